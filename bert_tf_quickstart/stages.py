"""The stage runner: each stage of a run in its own folder under the output directory, keyed on what it depends on
(`STAGE.json`), marked complete with its figures (`DONE.json`), reused, resumed or redone accordingly."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import time

from bert_tf.training import write_lines
from bert_tf_quickstart.corpus import CORPUS_VERSION, HELDOUT_EVERY

# What the records stage's records are made by; change it when data_gen makes other records from the same flags, so
# that an output directory of an earlier version is redone from there (2: the original's next-sentence labels).
RECORDS_VERSION = 2
from bert_tf_quickstart.options import QuickstartOptions

DONE = "DONE.json"
STAGE = "STAGE.json"
MIN_HELDOUT = 100  # held-out examples below which a figure is reported as meaningless (see heldout_note)


def stage_inputs(options: QuickstartOptions, input_file: str | None) -> dict[str, dict]:
    """What each stage's output depends on besides the stages before it: the corpus (the input's content digest, or
    the built-in corpus's version, the Python it is read from and its size) and every option that changes the
    stage's output (`num_workers` does not: the records are the same bytes for any number)."""
    from bert_tf.records import file_sha256

    o = options
    if input_file:
        if not os.path.isfile(input_file):
            raise FileNotFoundError(f"--input_file={input_file}: no such file (give a text file: one sentence per "
                                    "line, a blank line between documents)")
        source = {"input_sha256": file_sha256(input_file)}
    else:
        source = {"corpus": CORPUS_VERSION, "python": platform.python_version(), "corpus_mb": o.corpus_mb}
    return {"corpus": dict(source, heldout_every=HELDOUT_EVERY),
            "vocab": {"vocab_size": o.vocab_size},
            "records": {"max_seq_length": o.max_seq_length, "max_predictions_per_seq": o.max_predictions_per_seq,
                        "dupe_factor": o.dupe_factor, "random_seed": o.random_seed, "data_gen": RECORDS_VERSION},
            "pretrain": {"hidden_size": o.hidden_size, "num_hidden_layers": o.num_hidden_layers,
                         "num_attention_heads": o.num_attention_heads, "train_batch_size": o.train_batch_size,
                         "num_train_steps": o.num_train_steps, "learning_rate": o.learning_rate,
                         "random_seed": o.random_seed},
            "finetune": {"finetune_examples": o.finetune_examples, "finetune_epochs": o.finetune_epochs,
                         "finetune_learning_rate": o.finetune_learning_rate, "random_seed": o.random_seed},
            "export": {},
            "answers": {"questions": "built-in" if not input_file else "held-out", "random_seed": o.random_seed}}


def _shown(value) -> str:
    text = str(value)
    return text[:12] + "..." if len(text) > 40 else text


class Stages:
    """The stages of one run, each in its own folder, each keyed on what it depends on.

    A stage's key is the digest of its inputs (`stage_inputs`) and of the key of the stage before it, so a change
    anywhere reruns that stage and every one after it. `STAGE.json` records the key and inputs when a stage starts,
    `DONE.json` its figures when it ends. A stage is reused when it is done under the same key; resumed (its folder
    kept, e.g. pretraining checkpoints) when it started under the same key and did not finish; redone from an empty
    folder when its key changed or nothing records what it was made from, with one line saying why.
    """

    def __init__(self, output_dir: str, force: bool):
        self.output_dir, self.force = output_dir, force
        self.key, self.previous = "", None
        self.ran: list[str] = []
        self.reused: list[str] = []

    def run(self, name: str, inputs: dict, work, summary) -> dict:
        """Runs `work(directory) -> figures` unless the stage is done under this key; prints the one-line summary."""
        directory = os.path.join(self.output_dir, name)
        record = {"inputs": inputs, "after": self.key, "after_stage": self.previous}
        key = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
        reason = "--force" if self.force and os.path.exists(directory) else self._changed(directory, record, key)
        if reason:
            say(name, f"redoing it: {reason}")
            shutil.rmtree(directory)
        os.makedirs(directory, exist_ok=True)
        self.key, self.previous = key, name
        figures = _read_json(os.path.join(directory, DONE))
        if figures is not None:
            self.reused.append(name)
            say(name, f"complete, skipped ({summary(figures)}); --force redoes it")
            return figures
        write_lines(os.path.join(directory, STAGE), [json.dumps(dict(record, key=key), indent=2, sort_keys=True)])
        started = time.time()
        try:
            figures = dict(work(directory), seconds=round(time.time() - started, 1), key=key)
        except BaseException:
            if os.listdir(directory) == [STAGE]:  # failed before writing anything: as if it had not started
                os.remove(os.path.join(directory, STAGE))
            raise
        write_lines(os.path.join(directory, DONE), [json.dumps(figures, indent=2)])
        self.ran.append(name)
        say(name, f"{summary(figures)} in {figures['seconds']:.0f} s")
        return figures

    @staticmethod
    def _changed(directory: str, record: dict, key: str) -> str | None:
        """Why the stage's folder cannot be kept, or None when it can (empty, or made under `key`)."""
        if not os.path.isdir(directory) or not os.listdir(directory):
            return None
        old = _read_json(os.path.join(directory, STAGE))
        if old is None:
            return "nothing records what it was made from (made by an earlier version?)"
        if old.get("key") == key:
            return None
        before, now = old.get("inputs", {}), record["inputs"]
        changed = [f"{k} {_shown(before.get(k))} -> {_shown(now.get(k))}" for k in sorted({*before, *now})
                   if before.get(k) != now.get(k)]
        if changed:
            return ", ".join(changed)
        if old.get("after_stage") != record["after_stage"]:  # another version of the program ordered it otherwise
            return f"it now follows {record['after_stage']}, not {old.get('after_stage')}"
        return f"{record['after_stage']} changed"


def _read_json(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def say(stage: str, summary: str) -> None:
    """A stage's one-line summary on stdout, flushed so that it shows before the next stage's progress bar."""
    print(f"[{stage}] {summary}", flush=True)


def noted(note: str) -> str:
    """A `heldout_note` as the tail of a summary's parenthesis: "" when there is none."""
    return f"; {note}" if note else ""


def heldout_note(count: int, what: str) -> str:
    """"" when `count` held-out examples can give a figure meaning, else a note saying they cannot (fewer than
    `MIN_HELDOUT`: a 95 % interval for an accuracy near 0.5 is then wider than +-0.1)."""
    if count >= MIN_HELDOUT:
        return ""
    return f"only {count} held-out {what}, too few for the figure to mean anything (fewer than {MIN_HELDOUT})"
