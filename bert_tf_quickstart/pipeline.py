"""The main job: raw text -> own vocabulary -> pretraining records -> pretrained BERT -> fine-tuned classifier ->
SavedModels -> answers from a fresh process, on a built-in corpus, with progress bars, plots and a report.

Stages, each in its own folder under `output_dir`, each keyed on what it depends on (the corpus's content digest or
the built-in corpus's version, every option that changes its output, and the key of the stage before it; see
`_Stages`). A re-run reuses the stages complete under the same key and says so, redoes a stage whose key changed
and every stage after it, saying what changed; `force=True` redoes everything; an interrupted pretraining resumes
from its checkpoints:

1. `corpus/`: the built-in corpus, the docstrings of the Python standard library on this machine (read with
   `ast`, nothing imported), one sentence per line, a blank line between documentation entries; every 20th entry
   is held out (`heldout.txt`) for evaluation. Or the user's `input_file` (same format), split the same way.
2. `vocab/`: `build_vocab` (WordPiece, learned from the training part).
3. `records/`: `create_pretraining_data` (masked LM 15 % 80/10/10 + next sentence 50/50), train and held-out.
4. `pretrain/`: `run_pretraining` logic; TensorBoard scalars in `pretrain/train`; held-out MLM and NSP accuracy;
   `pretrain/bert_model/` is the pretrained model in the released layout.
5. `finetune/`: the `word_order` task derived from the corpus without labels (is a sentence as written or are its
   words shuffled; half each), `run_classifier` from the pretrained model, held-out accuracy. Word order is a task
   a model this small learns from a corpus this size, where "does sentence B come from the same documentation entry
   as A" is not.
6. `export/`: `classifier` and `mlm` SavedModels (raw strings in).
7. `answers/`: both SavedModels loaded in a fresh process that imports only TensorFlow and tensorflow-text;
   `[MASK]` fill-ins and word-order decisions with scores. On the built-in corpus the questions are fixed ones; on
   a user's corpus they come from its held-out part (a held-out word masked, held-out sentences shuffled).
Then `plots/*.png` (training curves, each accuracy beside its held-out figure) and `report.md`, which says which
stages ran now and which were reused. A held-out figure computed on fewer than `MIN_HELDOUT` examples is marked as
too small to mean anything, in the stage's summary and in the report.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import time

import keras
from absl import logging

from bert_tf.training import write_lines

DONE = "DONE.json"
STAGE = "STAGE.json"
CORPUS_VERSION = "stdlib-docstrings-1"  # the built-in corpus's extraction; change it when that changes
HELDOUT_EVERY = 20
MIN_HELDOUT = 100  # held-out examples below which a figure is reported as meaningless (see heldout_note)
SKIP_DIRS = {"test", "tests", "site-packages", "dist-packages", "idlelib", "lib2to3", "tkinter", "turtledemo",
             "ensurepip", "__pycache__", "pydoc_data"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")
MASKED_EXAMPLES = ("Return the [MASK] of the list.", "If the file does not [MASK], an exception is raised.",
                   "This [MASK] is deprecated since version 3.4.")
ORDER_EXAMPLES = ("Return a new dictionary initialized from an optional positional argument.",
                  "dictionary argument new a positional initialized optional Return an from.",
                  "The socket must be bound to an address and listening for connections.",
                  "bound socket for listening The connections address must to an be and.")


def _option(default, help: str):
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class QuickstartOptions:
    """Sizes of every stage; the defaults fit 2 CPU cores and about ten minutes. Each field's `help` is its flag's
    help in `bert_tf_quickstart`."""

    corpus_mb: float = _option(2.0, "Megabytes of the built-in corpus to use (the standard library has about 1.5 MB "
                                    "of docstrings: more takes them all); not with --input_file.")
    vocab_size: int = _option(8000, "Most word pieces in the vocabulary learned from the corpus (special tokens "
                                    "included).")
    max_seq_length: int = _option(64, "Word pieces per pretraining and fine-tuning sequence.")
    max_predictions_per_seq: int = _option(10, "Masked positions per pretraining sequence (15 % of the tokens, up "
                                               "to this many).")
    dupe_factor: int = _option(3, "Times each training document is used to make pretraining instances, each time "
                                  "with other masks.")
    hidden_size: int = _option(128, "Width of the model (BERT-Base: 768); the feed-forward layer is 4 times it.")
    num_hidden_layers: int = _option(2, "Transformer layers of the model (BERT-Base: 12).")
    num_attention_heads: int = _option(2, "Attention heads per layer; must divide --hidden_size.")
    train_batch_size: int = _option(64, "Pretraining batch size (sequences per step).")
    num_train_steps: int = _option(1500, "Pretraining steps (the first 5 % warm up the learning rate).")
    learning_rate: float = _option(5e-4, "Peak pretraining learning rate, for the original optimizer (no bias "
                                         "correction: larger early steps than AdamW).")
    finetune_examples: int = _option(4000, "word_order training examples made from the corpus (half of them "
                                           "shuffled); the held-out ones are an eighth of this, at least 200.")
    finetune_epochs: float = _option(3.0, "Passes over the word_order examples when fine-tuning (batch size 32).")
    finetune_learning_rate: float = _option(3e-4, "Peak fine-tuning learning rate.")
    random_seed: int = _option(12345, "Seed of the masking, the word_order examples, initialisation, dropout and "
                                      "data order.")
    num_workers: int = _option(2, "Processes that write the pretraining records (the records do not depend on "
                                  "it).")


# ------------------------------------------------------------------------------------------------- corpus
def _sentences(docstring: str) -> list[str]:
    """Prose sentences of a docstring: paragraphs joined, code, doctest and table lines dropped."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", docstring):
        lines = [line.strip() for line in paragraph.splitlines()]
        if any(line.startswith((">>>", "...", "$", "|", "+-", "==")) for line in lines):
            continue
        text = " ".join(line for line in lines if line)
        for sentence in _SENTENCE_END.split(text):
            if len(sentence.split()) >= 4 and sum(c.isalpha() for c in sentence) > 0.6 * len(sentence):
                sentences.append(sentence)
    return sentences


def stdlib_documents(max_bytes: int):
    """Documentation entries (module, class, function docstrings) of the standard library, in a fixed order, as
    lists of sentences, up to `max_bytes` of text."""
    root = sysconfig.get_paths()["stdlib"]
    total = 0
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    sentences = _sentences(ast.get_docstring(node) or "")
                    if len(sentences) >= 2:
                        yield sentences
                        total += sum(len(s) + 1 for s in sentences)
                        if total >= max_bytes:
                            return


def read_documents(path: str) -> list[list[str]]:
    """A corpus file in the pretraining format -> documents (lists of sentences)."""
    documents, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                current.append(line)
            elif current:
                documents.append(current)
                current = []
    if current:
        documents.append(current)
    return documents


def _write_text(path: str, documents) -> None:
    write_lines(path, (line for document in documents for line in [*document, ""]))


def build_corpus(directory: str, input_file: str | None, max_bytes: int) -> dict:
    documents = read_documents(input_file) if input_file else list(stdlib_documents(max_bytes))
    documents = [d for d in documents if len(d) >= 2]
    if len(documents) < 2 * HELDOUT_EVERY:
        where = input_file or "the built-in corpus"
        raise ValueError(f"{where}: {len(documents)} documents with two or more sentences; the quickstart needs at "
                         f"least {2 * HELDOUT_EVERY} (one sentence per line, a blank line between documents)")
    train = [d for i, d in enumerate(documents) if i % HELDOUT_EVERY]
    heldout = [d for i, d in enumerate(documents) if not i % HELDOUT_EVERY]
    _write_text(os.path.join(directory, "train.txt"), train)
    _write_text(os.path.join(directory, "heldout.txt"), heldout)
    size = sum(len(s) + 1 for d in documents for s in d)
    return {"source": input_file or "Python standard library docstrings", "documents": len(documents),
            "sentences": sum(len(d) for d in documents), "megabytes": round(size / 1e6, 2),
            "heldout_documents": len(heldout)}


def word_order_examples(documents, count: int, seed: int) -> list[tuple[str, str]]:
    """(label, sentence): a sentence of the corpus as written ("original") or with its words shuffled
    ("shuffled"), half each. Telling them apart needs the grammar that masked-LM pretraining learns."""
    rng = random.Random(seed)
    sentences = _order_sentences(documents)
    examples = []
    for i in range(count):
        words = rng.choice(sentences).split()
        examples.append(("shuffled", _shuffled(words, rng)) if i % 2 else ("original", " ".join(words)))
    rng.shuffle(examples)
    return examples


def _order_sentences(documents) -> list[str]:
    """The sentences whose word order can be asked about: four or more distinct words."""
    return [s for d in documents for s in d if len(set(s.split())) >= 4]


def _shuffled(words: list[str], rng: random.Random) -> str:
    shuffled = words[:]
    while shuffled == words:
        rng.shuffle(shuffled)
    return " ".join(shuffled)


def heldout_questions(documents, vocab_file: str, seed: int, count: int = 3):
    """Demo questions from the held-out part of a user's corpus: ([(sentence with one word as [MASK], that word)],
    [(sentence, "original" | "shuffled")]). The masked word is one the vocabulary holds whole (lower-cased), so one
    [MASK] stands for it; two sentences are asked about as written and shuffled."""
    with open(vocab_file, encoding="utf-8") as f:
        vocab = {line.strip() for line in f}
    rng = random.Random(seed)
    sentences = _order_sentences(documents)
    masked = []
    for sentence in rng.sample(sentences, len(sentences)):
        words = sentence.split()
        candidates = [i for i, w in enumerate(words) if i and w.isalpha() and len(w) >= 3 and w.lower() in vocab]
        if candidates and len(words) <= 40:
            i = rng.choice(candidates)
            masked.append((" ".join(words[:i] + ["[MASK]"] + words[i + 1:]), words[i]))
            if len(masked) == count:
                break
    order = []
    for sentence in rng.sample(sentences, min(2, len(sentences))):
        order += [(sentence, "original"), (_shuffled(sentence.split(), rng), "shuffled")]
    return masked, order


def _write_tsv(path: str, examples) -> None:
    write_lines(path, ["label\tsentence"] + [f"{label}\t{sentence.replace(chr(9), ' ')}"
                                               for label, sentence in examples])


# ------------------------------------------------------------------------------------------------- stages
def stage_inputs(options: QuickstartOptions, input_file: str | None) -> dict[str, dict]:
    """What each stage's output depends on besides the stages before it: the corpus (the input's content digest, or
    the built-in corpus's version, the Python it is read from and its size) and every option that changes the
    stage's output (`num_workers` does not: the records are the same bytes for any number)."""
    from bert_tf.pretraining import file_sha256

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
                        "dupe_factor": o.dupe_factor, "random_seed": o.random_seed},
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


class _Stages:
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
            _say(name, f"redoing it: {reason}")
            shutil.rmtree(directory)
        os.makedirs(directory, exist_ok=True)
        self.key, self.previous = key, name
        figures = _read_json(os.path.join(directory, DONE))
        if figures is not None:
            self.reused.append(name)
            _say(name, f"complete, skipped ({summary(figures)}); --force redoes it")
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
        _say(name, f"{summary(figures)} in {figures['seconds']:.0f} s")
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
        return f"{record['after_stage']} changed"


def _read_json(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _say(stage: str, summary: str) -> None:
    print(f"[{stage}] {summary}", flush=True)


def _noted(note: str) -> str:
    return f"; {note}" if note else ""


def heldout_note(count: int, what: str) -> str:
    """"" when `count` held-out examples can give a figure meaning, else a note saying they cannot (fewer than
    `MIN_HELDOUT`: a 95 % interval for an accuracy near 0.5 is then wider than +-0.1)."""
    if count >= MIN_HELDOUT:
        return ""
    return f"only {count} held-out {what}, too few for the figure to mean anything (fewer than {MIN_HELDOUT})"


def run_quickstart(output_dir: str = "runs/quickstart", options: QuickstartOptions = QuickstartOptions(),
                   input_file: str | None = None, force: bool = False) -> dict:
    """Runs every stage (see the module docstring); returns {stage: figures}."""
    from tqdm import tqdm

    from bert_tf.config import BertConfig

    o = options
    inputs = stage_inputs(o, input_file)
    os.makedirs(output_dir, exist_ok=True)
    stages = _Stages(output_dir, force)
    figures: dict = {}
    started = time.time()
    corpus_dir = os.path.join(output_dir, "corpus")
    figures["corpus"] = stages.run(
        "corpus", inputs["corpus"], lambda d: build_corpus(d, input_file, int(o.corpus_mb * 1e6)),
        lambda f: f"{f['documents']} documents, {f['sentences']} sentences, {f['megabytes']} MB from {f['source']}")
    train_text, heldout_text = os.path.join(corpus_dir, "train.txt"), os.path.join(corpus_dir, "heldout.txt")
    vocab_file = os.path.join(output_dir, "vocab", "vocab.txt")

    def vocab(directory):
        from data_gen.vocab import build_vocab

        return build_vocab([train_text], vocab_file, vocab_size=o.vocab_size)

    figures["vocab"] = stages.run("vocab", inputs["vocab"], vocab,
                                  lambda f: f"{f['vocab_size']} word pieces from {f['words']} words")

    def records(directory):
        from data_gen.generate import generate
        from data_gen.window import Options

        data = Options(max_seq_length=o.max_seq_length, max_predictions_per_seq=o.max_predictions_per_seq,
                       dupe_factor=o.dupe_factor, random_seed=o.random_seed)
        train = generate([train_text], [os.path.join(directory, "train", "train.tfrecord")], vocab_file, data,
                         num_workers=o.num_workers)
        heldout = generate([heldout_text], [os.path.join(directory, "heldout", "heldout.tfrecord")], vocab_file,
                           dataclasses.replace(data, dupe_factor=1, random_seed=o.random_seed + 1), num_workers=1)
        return {"train_instances": train["instances"], "heldout_instances": heldout["instances"],
                "heldout_masked": round(heldout["masked_fraction"] * heldout["tokens"]),
                "heldout_eval_steps": max(1, -(-heldout["instances"] // 128))}  # every held-out instance once

    figures["records"] = stages.run("records", inputs["records"], records,
                                    lambda f: f"{f['train_instances']} training and {f['heldout_instances']} "
                                              "held-out instances")
    config = BertConfig(vocab_size=figures["vocab"]["vocab_size"], hidden_size=o.hidden_size,
                        num_hidden_layers=o.num_hidden_layers, num_attention_heads=o.num_attention_heads,
                        intermediate_size=4 * o.hidden_size, max_position_embeddings=max(128, o.max_seq_length))

    def pretrain(directory):
        from bert_tf.pretraining import PretrainingOptions, run_pretraining

        pretraining = PretrainingOptions(
            max_seq_length=o.max_seq_length, max_predictions_per_seq=o.max_predictions_per_seq,
            train_batch_size=o.train_batch_size, eval_batch_size=128, learning_rate=o.learning_rate,
            num_train_steps=o.num_train_steps, num_warmup_steps=max(1, o.num_train_steps // 20),
            save_checkpoints_steps=max(1, o.num_train_steps // 4), iterations_per_loop=max(1, o.num_train_steps // 40),
            random_seed=o.random_seed, vocab_file=vocab_file)
        bar = tqdm(total=o.num_train_steps, desc="run_pretraining", unit=" steps")

        def progress(step, scalars):
            bar.update(step - bar.n)
            bar.set_postfix(mlm_acc=f"{scalars['masked_lm_accuracy']:.3f}",
                            nsp_acc=f"{scalars['next_sentence_accuracy']:.3f}")

        try:
            run_pretraining(config, os.path.join(output_dir, "records", "train", "*.tfrecord"), directory,
                            pretraining, progress=progress)
        finally:
            bar.close()
        heldout = run_pretraining(config, os.path.join(output_dir, "records", "heldout", "*.tfrecord"),
                                  os.path.join(directory, "heldout_eval"),
                                  dataclasses.replace(pretraining, do_train=False, do_eval=True,
                                                      max_eval_steps=figures["records"]["heldout_eval_steps"],
                                                      init_checkpoint=os.path.join(directory, "bert_model",
                                                                                   "bert_model.ckpt")))["eval"]
        records_figures = figures["records"]
        return {"heldout_masked_lm_accuracy": heldout["masked_lm_accuracy"],
                "heldout_next_sentence_accuracy": heldout["next_sentence_accuracy"],
                "masked_lm_chance": 1 / config.vocab_size, "steps": o.num_train_steps,
                "masked_lm_note": heldout_note(records_figures["heldout_masked"], "masked positions"),
                "next_sentence_note": heldout_note(records_figures["heldout_instances"], "instances")}

    figures["pretrain"] = stages.run(
        "pretrain", inputs["pretrain"], pretrain,
        lambda f: f"{f['steps']} steps; held-out MLM accuracy {f['heldout_masked_lm_accuracy']:.3f} (chance "
                  f"{f['masked_lm_chance']:.4f}{_noted(f['masked_lm_note'])}), NSP accuracy "
                  f"{f['heldout_next_sentence_accuracy']:.3f} (chance 0.5{_noted(f['next_sentence_note'])})")
    bert_model = os.path.join(output_dir, "pretrain", "bert_model")
    finetuned = os.path.join(output_dir, "finetune", "model")

    def finetune(directory):
        from bert_tf.finetuning import FinetuneOptions
        from bert_tf.tasks.classification import run_classifier
        from bert_tf.tasks import get_task

        data_dir = os.path.join(directory, "data")
        os.makedirs(data_dir, exist_ok=True)
        _write_tsv(os.path.join(data_dir, "train.tsv"), word_order_examples(read_documents(train_text),
                                                                              o.finetune_examples, o.random_seed))
        heldout_documents = read_documents(heldout_text)
        dev_count = max(200, o.finetune_examples // 8)
        _write_tsv(os.path.join(data_dir, "dev.tsv"), word_order_examples(heldout_documents, dev_count,
                                                                            o.random_seed + 1))
        # the dev examples are drawn from the held-out sentences: no more distinct examples than those
        distinct = min(dev_count, len(_order_sentences(heldout_documents)))
        tuning = FinetuneOptions(do_train=True, do_eval=True, max_seq_length=o.max_seq_length, train_batch_size=32,
                                 learning_rates=(o.finetune_learning_rate,), num_train_epochs=o.finetune_epochs,
                                 init_checkpoint=os.path.join(bert_model, "bert_model.ckpt"),
                                 random_seed=o.random_seed)
        steps = max(1, int(o.finetune_examples / 32 * o.finetune_epochs))
        curve = _DevCurve(data_dir, vocab_file, o.max_seq_length, every=max(1, steps // 10), total=steps)
        try:
            results = run_classifier(get_task("word_order"), config, vocab_file, finetuned, tuning,
                                     data_dir=data_dir, callbacks=[curve])
        finally:
            curve.bar.close()
        write_lines(os.path.join(directory, "history.json"), [json.dumps(curve.history)])
        return {"heldout_accuracy": results["dev"]["accuracy"], "examples": o.finetune_examples, "steps": steps,
                "heldout_sentences": distinct, "heldout_note": heldout_note(distinct, "sentences")}

    figures["finetune"] = stages.run("finetune", inputs["finetune"], finetune,
                                     lambda f: f"word_order: held-out accuracy {f['heldout_accuracy']:.3f} "
                                               f"(chance 0.5{_noted(f['heldout_note'])})")

    def export(directory):
        from export.exporting import export as export_kind

        from export.ops import version

        reports = [export_kind("classifier", os.path.join(directory, "classifier", "1"), model_dir=finetuned),
                   export_kind("mlm", os.path.join(directory, "mlm", "1"),
                               bert_config_file=os.path.join(bert_model, "bert_config.json"),
                               init_checkpoint=os.path.join(bert_model, "bert_model.ckpt"), vocab_file=vocab_file,
                               seq_length=o.max_seq_length)]
        servings = [report["min_serving"] for report in reports]
        return {"ops": sorted({op for report in reports for op in report["tensorflow_text"]}),
                "min_serving": None if None in servings else max(servings, key=version)}

    figures["export"] = stages.run("export", inputs["export"], export,
                                   lambda f: f"classifier and mlm SavedModels; tf-text ops {', '.join(f['ops'])}; "
                                             + (f"TF Serving {f['min_serving']} and newer load them"
                                                if f["min_serving"] else
                                                "no TF Serving release listed in export/ops.py loads them"))

    def answers(directory):
        if input_file:
            masked, order = heldout_questions(read_documents(heldout_text), vocab_file, o.random_seed)
        else:
            masked, order = [(text, None) for text in MASKED_EXAMPLES], [(text, None) for text in ORDER_EXAMPLES]
        return ask_saved_models(os.path.join(output_dir, "export"), masked, order)

    figures["answers"] = stages.run("answers", inputs["answers"], answers,
                                    lambda f: "answers from the SavedModels in a fresh process")
    print(format_answers(figures["answers"]))
    plots = plot_curves(output_dir, figures)
    write_report(output_dir, figures, plots, time.time() - started, stages.ran, stages.reused)
    _say("report", f"{os.path.join(output_dir, 'report.md')}; plots in {os.path.join(output_dir, 'plots')}")
    return figures


class _DevCurve(keras.callbacks.Callback):
    """Held-out accuracy every `every` fine-tuning steps (kept in `history` for the plot), and a progress bar."""

    def __init__(self, data_dir, vocab_file, max_seq_length, every, total):
        from tqdm import tqdm

        from bert_tf.tasks.classification import encode, label_array
        from bert_tf.tasks import get_task

        super().__init__()
        task = get_task("word_order")
        examples = task.examples(data_dir, "dev")[:256]
        self.features = encode(examples, vocab_file, True, max_seq_length)
        self.labels = label_array(task, examples, "word_order dev")
        self.every, self.history = every, []
        self.bar = tqdm(total=total, desc="run_classifier", unit=" steps")

    def on_train_batch_end(self, batch, logs=None):
        self.bar.update(1)
        if (batch + 1) % self.every == 0 or batch + 1 == self.bar.total:
            logits = self.model.predict(self.features, batch_size=256, verbose=0)["logits"]
            accuracy = float((logits.argmax(-1) == self.labels).mean())
            self.history.append({"step": batch + 1, "heldout_accuracy": accuracy,
                                 "loss": float((logs or {}).get("loss", float("nan")))})
            self.bar.set_postfix(heldout_acc=f"{accuracy:.3f}")


# ---------------------------------------------------------------------------------------- fresh process
ASK = r'''
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the ops TF Serving links)
export, masked, sentences = json.loads(sys.argv[1])
fills, decisions = [], []
if masked:
    mlm = tf.saved_model.load(export + "/mlm/1").signatures["serving_default"]
    out = mlm(text=tf.constant(masked))
    fills = [[[(t.decode(), float(p)) for t, p in zip(tokens, probs)] for tokens, probs in zip(rows_t[:n], rows_p[:n])]
             for rows_t, rows_p, n in zip(out["top_tokens"].numpy(), out["top_probabilities"].numpy(),
                                           out["num_masks"].numpy())]
if sentences:
    classifier = tf.saved_model.load(export + "/classifier/1").signatures["serving_default"]
    out = classifier(text=tf.constant(sentences))
    decisions = [(label.decode(), probs.tolist()) for label, probs in zip(out["label"].numpy(),
                                                                          out["probabilities"].numpy())]
print(json.dumps({"fill_ins": fills, "decisions": decisions, "modules": sorted(
    m for m in sys.modules if m.split(".")[0] in ("bert_tf", "export", "data_gen"))}))
'''


def ask_saved_models(export_dir: str, masked, order) -> dict:
    """Loads the exported SavedModels in a fresh Python that imports only tensorflow and tensorflow_text and asks
    them the `masked` [(text with [MASK], expected word or None)] and `order` [(sentence, expected label or None)]
    questions."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    masked_texts, sentences = [text for text, _ in masked], [text for text, _ in order]
    out = subprocess.run([sys.executable, "-c", ASK, json.dumps([os.path.abspath(export_dir), masked_texts,
                                                                  sentences])],
                         capture_output=True, text=True, env=env, cwd=os.path.dirname(os.path.abspath(export_dir)),
                         timeout=600)
    if out.returncode:
        raise RuntimeError(f"loading the SavedModels in a fresh process failed:\n{out.stderr[-3000:]}")
    answers = json.loads(out.stdout.strip().splitlines()[-1])
    return dict(answers, masked=masked_texts, sentences=sentences, masked_answers=[a for _, a in masked],
                sentence_labels=[label for _, label in order])


def format_answers(answers: dict) -> str:
    lines = ["Answers from the SavedModels (fresh process, only tensorflow + tensorflow_text imported):"]
    expected = answers.get("masked_answers") or [None] * len(answers["masked"])
    for text, fills, word in zip(answers["masked"], answers["fill_ins"], expected):
        shown = "; ".join(", ".join(f"{token} {p:.2f}" for token, p in mask[:3]) for mask in fills)
        lines.append(f"  {text!r} -> [MASK] = {shown}" + (f" (held-out text: {word})" if word else ""))
    labels = answers.get("sentence_labels") or [None] * len(answers["sentences"])
    for sentence, (label, probabilities), truth in zip(answers["sentences"], answers["decisions"], labels):
        lines.append(f"  word order? {sentence!r} -> {label} (p = {max(probabilities):.2f})"
                     + (f" (it is {truth})" if truth else ""))
    if not answers["masked"] and not answers["sentences"]:
        lines.append("  (the held-out part has no sentence to ask about)")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ plots, report
def read_scalars(event_dir: str) -> dict[str, list[tuple[int, float]]]:
    """The scalars `bert_tf.training` wrote to TensorBoard event files: {name: [(step, value)]}, last write wins."""
    import tensorflow as tf

    values: dict = {}
    for path in sorted(tf.io.gfile.glob(os.path.join(event_dir, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                values.setdefault(value.tag, {})[event.step] = number
    return {tag: sorted(points.items()) for tag, points in values.items()}


def plot_curves(output_dir: str, figures: dict) -> list[str]:
    """PNG plots under `output_dir/plots`; returns their paths. Each accuracy panel shows the training curve and,
    at its last step, the held-out figure of `report.md` (from `figures`, the stages' results) with the number of
    held-out examples behind it, and chance where it is not near zero; every axis is labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir = os.path.join(output_dir, "plots")
    os.makedirs(plots_dir, exist_ok=True)
    scalars = read_scalars(os.path.join(output_dir, "pretrain", "train"))
    p, r = figures["pretrain"], figures["records"]
    train = "training batches"
    # panel: (tag, y label, curve label, held-out figure and its label or None, chance or None)
    panels = [("pretraining_mlm.png", "Masked LM", [
                  ("masked_lm_loss", "masked-LM loss", train, None, None),
                  ("masked_lm_accuracy", "masked-LM accuracy", train,
                   (p["heldout_masked_lm_accuracy"], f"held-out ({r['heldout_masked']} masked positions)"), None)]),
              ("pretraining_nsp.png", "Next sentence", [
                  ("next_sentence_loss", "next-sentence loss", train, None, None),
                  ("next_sentence_accuracy", "next-sentence accuracy", train,
                   (p["heldout_next_sentence_accuracy"], f"held-out ({r['heldout_instances']} instances)"), 0.5)]),
              ("learning_rate.png", "Learning rate (warm-up, linear decay)", [
                  ("learning_rate", "learning rate", None, None, None)])]
    history_path = os.path.join(output_dir, "finetune", "history.json")
    if os.path.exists(history_path):
        with open(history_path, encoding="utf-8") as f:
            history = json.load(f)
        scalars["finetune_loss"] = [(h["step"], h["loss"]) for h in history]
        scalars["finetune_heldout_accuracy"] = [(h["step"], h["heldout_accuracy"]) for h in history]
        t = figures["finetune"]
        panels.append(("finetuning.png", "Fine-tuning (word_order)", [
            ("finetune_loss", "loss", "training batch", None, None),
            ("finetune_heldout_accuracy", "word_order accuracy", "held-out (up to 256 examples), during training",
             (t["heldout_accuracy"], f"held-out, after training ({t['heldout_sentences']} sentences)"), 0.5)]))
    written = []
    for name, title, specs in panels:
        specs = [spec for spec in specs if scalars.get(spec[0])]
        if not specs:
            continue
        figure, axes = plt.subplots(1, len(specs), figsize=(5.5 * len(specs), 3.8), squeeze=False)
        for axis, (tag, ylabel, curve, heldout, chance) in zip(axes[0], specs):
            steps, values = zip(*scalars[tag])
            axis.plot(steps, values, marker="." if len(steps) < 30 else None, label=curve)
            if heldout is not None:
                axis.plot([steps[-1]], [heldout[0]], "o", color="tab:red", markersize=8,
                          label=f"{heldout[1]}: {heldout[0]:.3f}")
            if chance is not None:
                axis.axhline(chance, color="gray", linestyle="--", linewidth=1, label=f"chance ({chance:g})")
            axis.set_xlabel("step")
            axis.set_ylabel(ylabel)
            axis.grid(alpha=0.3)
            if curve or heldout or chance is not None:
                axis.legend(fontsize=8, loc="best")
        figure.suptitle(title)
        figure.tight_layout()
        path = os.path.join(plots_dir, name)
        figure.savefig(path + ".tmp.png", dpi=80)
        plt.close(figure)
        os.replace(path + ".tmp.png", path)
        written.append(path)
    return written


def write_report(output_dir: str, figures: dict, plots: list[str], seconds: float, ran: list[str],
                 reused: list[str]) -> str:
    """`report.md`: the corpus, the held-out figures (each with its number of held-out examples, and a note where
    that number is too small to mean anything), which stages ran in this run and which were reused, the answers."""
    c, r, p, f = figures["corpus"], figures["records"], figures["pretrain"], figures["finetune"]
    times = lambda names: ", ".join(f"{name} {figures[name]['seconds']:.0f} s" for name in names)  # noqa: E731
    notes = [f"- {what}: {note}." for what, note in (("masked-LM accuracy", p.get("masked_lm_note")),
                                                     ("next-sentence accuracy", p.get("next_sentence_note")),
                                                     ("word_order accuracy", f.get("heldout_note"))) if note]
    lines = ["# bert-tf quickstart report", "",
             f"Corpus: {c['source']}: {c['documents']} documents, {c['sentences']} sentences, {c['megabytes']} MB "
             f"({c['heldout_documents']} documents held out). Vocabulary: {figures['vocab']['vocab_size']} word "
             f"pieces. Pretraining instances: {r['train_instances']}.", "",
             "| figure | value | chance | held-out examples |", "|---|---|---|---|",
             f"| held-out masked-LM accuracy | {p['heldout_masked_lm_accuracy']:.3f} | {p['masked_lm_chance']:.4f} "
             f"| {r['heldout_masked']} masked positions |",
             f"| held-out next-sentence accuracy | {p['heldout_next_sentence_accuracy']:.3f} | 0.5 "
             f"| {r['heldout_instances']} instances |",
             f"| word_order fine-tuned held-out accuracy | {f['heldout_accuracy']:.3f} | 0.5 "
             f"| {f['heldout_sentences']} sentences |", ""]
    if notes:
        lines += ["Too little held-out data:", *notes, ""]
    if ran:
        lines.append(f"Run now: {times(ran)} (this run {seconds:.0f} s in all).")
    else:
        lines.append(f"Nothing was redone: every stage was reused (this run {seconds:.0f} s, plots and report).")
    if reused:
        lines.append(f"Reused from an earlier run, with the times they took then: {times(reused)}.")
    lines += ["", "```", format_answers(figures["answers"]), "```", ""]
    lines += [f"![{os.path.basename(path)}](plots/{os.path.basename(path)})" for path in plots]
    path = os.path.join(output_dir, "report.md")
    write_lines(path, lines)
    logging.info("wrote %s", path)
    return path
