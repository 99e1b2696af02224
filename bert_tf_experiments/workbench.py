"""What the section 5 drivers share: one corpus made ready once (vocabulary, pretraining records, downstream data),
then per model the stages that pretrain it, score it on held-out text, and fine-tune it on the downstream tasks.

Every stage runs through the quickstart's stage runner (`bert_tf_quickstart.stages.Stages`), so a driver run again
in the same directory reuses what is done under the same settings, resumes an interrupted pretraining from its
checkpoints, and redoes what a changed setting touches, saying why. The shared stages form one chain; each model's
pretraining branches from its end and each fine-tuning from that pretraining, so changing one model's settings
redoes that model alone, and a fine-tuning is reused whichever other rows run beside it.

The downstream tasks need no labels: `word_order` (the quickstart's classification task: a sentence as written or
with its words shuffled) and `missing_word` (span QA, `missing_word.py`), both drawn from the held-out part of the
corpus for dev and from the training part for training.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os

from bert_tf.finetuning import write_json
from bert_tf_quickstart import corpus
from bert_tf_quickstart.options import QuickstartOptions
from bert_tf_quickstart.stages import Stages, heldout_note, say
from bert_tf_quickstart.word_order import order_sentences, word_order_examples, write_tsv
from bert_tf_experiments.missing_word import missing_word_examples, write_squad
from data_gen.documents import read_documents

# record kinds: data_gen's next-sentence pairs (BERT) and contiguous text (No NSP, LTR: random_next_sentence=False)
RECORD_KINDS = {"nsp": True, "contiguous": False}
EVAL_BATCH = 128
SPAN_SETTINGS = dict(doc_stride=16, max_query_length=24, max_answer_length=5)  # missing_word: one-word answers


@dataclasses.dataclass
class Bench:
    """A prepared corpus: where its pieces are, the shared stages' figures, and the stage chain to branch from."""

    output_dir: str
    options: QuickstartOptions
    stages: Stages
    figures: dict

    @property
    def vocab_file(self) -> str:
        return os.path.join(self.output_dir, "vocab", "vocab.txt")

    def records(self, kind: str, split: str) -> str:
        return os.path.join(self.output_dir, "records", kind, split, "*.tfrecord")

    def data(self, task: str) -> str:
        return os.path.join(self.output_dir, "tasks", task)


def prepare(output_dir: str, options: QuickstartOptions, input_file: str | None = None, force: bool = False,
            span: bool = True) -> Bench:
    """The shared stages: `corpus` (built-in or `input_file`, every 20th document held out), `vocab`, `records`
    (both kinds, training and held-out) and `tasks` (word_order, and missing_word when `span`)."""
    from bert_tf_quickstart.stages import stage_inputs

    o = options
    inputs = stage_inputs(o, input_file)
    os.makedirs(output_dir, exist_ok=True)
    stages = Stages(output_dir, force)
    figures: dict = {}
    corpus_dir = os.path.join(output_dir, "corpus")
    train_text, heldout_text = os.path.join(corpus_dir, "train.txt"), os.path.join(corpus_dir, "heldout.txt")
    bench = Bench(output_dir, options, stages, figures)
    figures["corpus"] = stages.run(
        "corpus", inputs["corpus"], lambda d: corpus.build_corpus(d, input_file, int(o.corpus_mb * 1e6)),
        lambda f: f"{f['documents']} documents, {f['megabytes']} MB from {f['source']}")

    def vocab(directory):
        from data_gen.vocab import build_vocab

        return build_vocab([train_text], bench.vocab_file, vocab_size=o.vocab_size)

    figures["vocab"] = stages.run("vocab", inputs["vocab"], vocab, lambda f: f"{f['vocab_size']} word pieces")

    def records(directory):
        from data_gen.generate import generate
        from data_gen.window import Options

        made = {}
        for kind, random_next in RECORD_KINDS.items():
            data = Options(max_seq_length=o.max_seq_length, max_predictions_per_seq=o.max_predictions_per_seq,
                           dupe_factor=o.dupe_factor, random_seed=o.random_seed, random_next_sentence=random_next)
            heldout_settings = dict(dupe_factor=1, random_seed=o.random_seed + 1)
            for split, text, settings in (("train", train_text, {}), ("heldout", heldout_text, heldout_settings)):
                made[f"{kind}_{split}"] = generate(
                    [text], [os.path.join(directory, kind, split, f"{split}.tfrecord")], bench.vocab_file,
                    dataclasses.replace(data, **settings), num_workers=o.num_workers if split == "train" else 1)
        heldout = made["contiguous_heldout"]
        return {"train_instances": made["nsp_train"]["instances"],
                "train_instances_by_kind": {kind: made[f"{kind}_train"]["instances"] for kind in RECORD_KINDS},
                "heldout_instances": {kind: made[f"{kind}_heldout"]["instances"] for kind in RECORD_KINDS},
                "heldout_masked": round(heldout["masked_fraction"] * heldout["tokens"]),
                "heldout_tokens": heldout["tokens"]}

    def _by_kind(f):  # a records stage made before the counts by kind were kept has the next-sentence one only
        counts = f.get("train_instances_by_kind") or {"nsp": f["train_instances"]}
        return " and ".join(f"{count} {'next-sentence' if kind == 'nsp' else kind}" for kind, count in counts.items())

    figures["records"] = stages.run(
        "records", dict(inputs["records"], kinds=sorted(RECORD_KINDS)), records,
        lambda f: f"{_by_kind(f)} training instances; held-out "
                  f"{f['heldout_masked']} masked positions")

    def tasks(directory):
        train_documents, heldout_documents = _documents(train_text), _documents(heldout_text)
        dev_count = max(200, o.finetune_examples // 8)
        made = {"word_order_dev_sentences": min(dev_count, len(order_sentences(heldout_documents)))}
        os.makedirs(bench.data("word_order"), exist_ok=True)
        write_tsv(os.path.join(bench.data("word_order"), "train.tsv"),
                  word_order_examples(train_documents, o.finetune_examples, o.random_seed))
        write_tsv(os.path.join(bench.data("word_order"), "dev.tsv"),
                  word_order_examples(heldout_documents, dev_count, o.random_seed + 1))
        if span:
            os.makedirs(bench.data("missing_word"), exist_ok=True)
            write_squad(os.path.join(bench.data("missing_word"), "train.json"),
                        missing_word_examples(train_documents, o.finetune_examples, o.random_seed, "train"))
            dev = missing_word_examples(heldout_documents, dev_count, o.random_seed + 1, "dev")
            write_squad(os.path.join(bench.data("missing_word"), "dev.json"), dev)
            made["missing_word_dev_questions"] = len({p["qas"][0]["question"] for p in dev})
        return made

    figures["tasks"] = stages.run(
        "tasks", {"finetune_examples": o.finetune_examples, "random_seed": o.random_seed, "missing_word": span},
        tasks, lambda f: "word_order" + (" and missing_word" if span else "") + " training and dev data")
    return bench


def _documents(path: str) -> list[list[str]]:
    return list(read_documents([path]))


def branch(stages: Stages) -> Stages:
    """A stage chain that starts where `stages` is now (its stages' keys depend on the stages so far, not on those
    of another branch); it records what ran and what was reused in the same lists."""
    return copy.copy(stages)


def pretrain(bench: Bench, stages: Stages, name: str, config, objective: str, heldout: tuple[tuple[str, str], ...],
             num_train_steps: int | None = None) -> dict:
    """Stage `<name>/pretrain`: `config` pretrained with `objective` on its records (contiguous text unless the
    objective is BERT's), then each (record kind, objective) of `heldout` evaluated on the held-out records: every
    held-out instance once. Figures: the held-out metrics by `<kind>/<metric>`, the step, the encoder's parameter
    count, and `bert_model`, the released-layout directory the fine-tuning stages start from."""
    from bert_tf.pretraining import PretrainingOptions, run_pretraining

    o = bench.options
    steps = num_train_steps or o.num_train_steps
    kind = "nsp" if objective == "mlm_nsp" else "contiguous"

    def work(directory):
        options = PretrainingOptions(
            max_seq_length=o.max_seq_length, max_predictions_per_seq=o.max_predictions_per_seq,
            train_batch_size=o.train_batch_size, eval_batch_size=EVAL_BATCH, learning_rate=o.learning_rate,
            num_train_steps=steps, num_warmup_steps=max(1, steps // 20), save_checkpoints_steps=max(1, steps // 4),
            iterations_per_loop=max(1, steps // 40), random_seed=o.random_seed, vocab_file=bench.vocab_file,
            objective=objective)
        with ProgressBar(steps, f"{name}: run_pretraining --objective={objective}") as progress:
            trained = run_pretraining(config, bench.records(kind, "train"), directory, options, progress=progress)
        bert_model = trained["train"]["export"]
        figures = {"bert_model": bert_model, "step": trained["train"]["step"], "objective": objective,
                   "parameters": encoder_parameters(os.path.join(bert_model, "bert_model.ckpt"))}
        for records, metric_objective in heldout:
            scores = run_pretraining(config, bench.records(records, "heldout"),
                                     os.path.join(directory, f"heldout_{records}_{metric_objective}"),
                                     dataclasses.replace(options, do_train=False, do_eval=True,
                                                         objective=metric_objective,
                                                         max_eval_steps=None,  # each instance once
                                                         init_checkpoint=os.path.join(bert_model, "bert_model.ckpt"))
                                     )["eval"]
            figures.update({f"{records}/{k}": v for k, v in scores.items() if k != "global_step"})
        return figures

    inputs = {"config": config.to_dict(), "objective": objective, "heldout": [list(h) for h in heldout],
              "heldout_scored": "each instance once",  # earlier runs scored full batches round the data
              "max_seq_length": o.max_seq_length, "train_batch_size": o.train_batch_size, "num_train_steps": steps,
              "learning_rate": o.learning_rate, "random_seed": o.random_seed}
    return stages.run(f"{name}/pretrain", inputs, work,
                      lambda f: f"{f['step']} steps, {f['parameters']:,} encoder parameters")


def word_order(bench: Bench, stages: Stages, name: str, bert_model: str) -> dict:
    """Stage `<name>/word_order`, a branch of `stages` (at the end of the model's pretraining): `run_classifier`
    on word_order from `bert_model`; dev accuracy and its standard error (binomial, over the distinct dev
    sentences)."""
    from bert_tf.config import BertConfig
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks import get_task
    from bert_tf.tasks.classification import run_classifier

    o = bench.options

    def work(directory):
        steps = max(1, int(o.finetune_examples / 32 * o.finetune_epochs))
        options = FinetuneOptions(do_train=True, do_eval=True, max_seq_length=o.max_seq_length, train_batch_sizes=32,
                                  learning_rates=(o.finetune_learning_rate,), num_train_epochs=o.finetune_epochs,
                                  init_checkpoint=os.path.join(bert_model, "bert_model.ckpt"),
                                  random_seed=o.random_seed, iterations_per_loop=max(1, steps // 10))
        config = BertConfig.from_json_file(os.path.join(bert_model, "bert_config.json"))
        results = run_classifier(get_task("word_order"), config, bench.vocab_file, os.path.join(directory, "model"),
                                 options, data_dir=bench.data("word_order"))
        count = bench.figures["tasks"]["word_order_dev_sentences"]
        accuracy = results["dev"]["accuracy"]
        return {"accuracy": accuracy, "stderr": standard_error(accuracy, count), "dev_sentences": count,
                "note": heldout_note(count, "sentences")}

    inputs = {"bert_model": bert_model, "finetune_examples": o.finetune_examples,
              "finetune_epochs": o.finetune_epochs, "finetune_learning_rate": o.finetune_learning_rate}
    return branch(stages).run(f"{name}/word_order", inputs, work,
                      lambda f: f"word_order dev accuracy {f['accuracy']:.3f} +- {f['stderr']:.3f}")


def missing_word(bench: Bench, stages: Stages, name: str, bert_model: str, bilstm_head: bool = False) -> dict:
    """Stage `<name>/missing_word` (`missing_word_bilstm` with the BiLSTM), a branch of `stages` as above:
    `run_squad` (with `--bilstm_head` when asked) on missing_word from `bert_model`; dev exact match and F1 (the
    official SQuAD v1.1 script's)."""
    from bert_tf.config import BertConfig
    from bert_tf.tasks.span_qa import SquadOptions, run_squad

    o = bench.options

    def work(directory):
        options = SquadOptions(do_train=True, do_predict=True, max_seq_length=o.max_seq_length,
                               train_batch_sizes=32, learning_rates=(o.finetune_learning_rate,),
                               num_train_epochs=o.finetune_epochs, random_seed=o.random_seed,
                               init_checkpoint=os.path.join(bert_model, "bert_model.ckpt"), bilstm_head=bilstm_head,
                               **SPAN_SETTINGS)
        config = BertConfig.from_json_file(os.path.join(bert_model, "bert_config.json"))
        data = bench.data("missing_word")
        scores = run_squad(config, bench.vocab_file, os.path.join(directory, "model"), options,
                           train_file=os.path.join(data, "train.json"),
                           predict_file=os.path.join(data, "dev.json"))["predict"]
        count = bench.figures["tasks"]["missing_word_dev_questions"]
        return {"exact_match": scores["exact"], "f1": scores["f1"], "dev_questions": count,
                "note": heldout_note(count, "questions")}

    inputs = {"bert_model": bert_model, "bilstm_head": bilstm_head, "finetune_examples": o.finetune_examples,
              "finetune_epochs": o.finetune_epochs, "finetune_learning_rate": o.finetune_learning_rate,
              **SPAN_SETTINGS}
    return branch(stages).run(f"{name}/missing_word" + ("_bilstm" if bilstm_head else ""), inputs, work,
                      lambda f: f"missing_word dev EM {f['exact_match']:.1f}, F1 {f['f1']:.1f}")


def encoder_parameters(checkpoint: str) -> int:
    """Parameters of the encoder (`bert/...`: embeddings, layers, pooler) in a released-layout checkpoint."""
    import tensorflow as tf

    return sum(math.prod(shape) for name, shape in tf.train.list_variables(checkpoint) if name.startswith("bert/"))


def standard_error(accuracy: float, count: int) -> float:
    """The binomial standard error of an accuracy measured on `count` examples."""
    return math.sqrt(max(accuracy * (1 - accuracy), 0.0) / max(count, 1))


class ProgressBar:
    """A tqdm bar as `run_pretraining`'s `progress`, showing the objective's own accuracy."""

    def __init__(self, total: int, desc: str):
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=desc, unit=" steps")

    def __enter__(self):
        def progress(step, scalars):
            self.bar.update(step - self.bar.n)
            accuracy = scalars.get("masked_lm_accuracy", scalars.get("lm_accuracy"))
            if accuracy is not None:
                self.bar.set_postfix(accuracy=f"{accuracy:.3f}")

        return progress

    def __exit__(self, *exc):
        self.bar.close()


def write_results(bench: Bench, results: dict) -> str:
    path = os.path.join(bench.output_dir, "results.json")
    write_json(path, results)
    say("results", path)
    return path
