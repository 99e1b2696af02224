"""The main job: raw text -> own vocabulary -> pretraining records -> pretrained BERT -> fine-tuned classifier ->
SavedModels -> answers from a fresh process, on a built-in corpus, with progress bars, plots and a report.

Stages, each in its own folder under `output_dir`, each keyed on what it depends on (the corpus's content digest or
the built-in corpus's version, every option that changes its output, and the key of the stage before it; see
`stages.Stages`). A re-run reuses the stages complete under the same key and says so, redoes a stage whose key changed
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
stages ran now and which were reused. A held-out figure computed on fewer than `stages.MIN_HELDOUT` examples is
marked as too small to mean anything, in the stage's summary and in the report.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from bert_tf.training import write_lines
from bert_tf_quickstart import corpus, demo
from bert_tf_quickstart.options import QuickstartOptions
from bert_tf_quickstart.plots import plot_curves
from bert_tf_quickstart.report import write_report
from bert_tf_quickstart.stages import Stages, heldout_note, noted, say, stage_inputs
from bert_tf_quickstart.word_order import DevCurve, order_sentences, word_order_examples, write_tsv
from data_gen.documents import read_documents


def run_quickstart(output_dir: str = "runs/quickstart", options: QuickstartOptions = QuickstartOptions(),
                   input_file: str | None = None, force: bool = False) -> dict:
    """Runs every stage (see the module docstring); returns {stage: figures}."""
    from tqdm import tqdm

    from bert_tf.config import BertConfig

    o = options
    inputs = stage_inputs(o, input_file)
    os.makedirs(output_dir, exist_ok=True)
    stages = Stages(output_dir, force)
    figures: dict = {}
    started = time.time()
    corpus_dir = os.path.join(output_dir, "corpus")
    figures["corpus"] = stages.run(
        "corpus", inputs["corpus"], lambda d: corpus.build_corpus(d, input_file, int(o.corpus_mb * 1e6)),
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
        share = heldout["random_next_fraction"]  # above 1/2 on short documents, as the original makes them
        return {"train_instances": train["instances"], "heldout_instances": heldout["instances"],
                "heldout_masked": round(heldout["masked_fraction"] * heldout["tokens"]),
                "heldout_next_sentence_chance": max(share, 1 - share)}

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
                                                      max_eval_steps=None,  # every held-out instance once
                                                      init_checkpoint=os.path.join(directory, "bert_model",
                                                                                   "bert_model.ckpt")))["eval"]
        records_figures = figures["records"]
        return {"heldout_masked_lm_accuracy": heldout["masked_lm_accuracy"],
                "heldout_next_sentence_accuracy": heldout["next_sentence_accuracy"],
                "masked_lm_chance": 1 / config.vocab_size,
                "next_sentence_chance": records_figures["heldout_next_sentence_chance"], "steps": o.num_train_steps,
                "masked_lm_note": heldout_note(records_figures["heldout_masked"], "masked positions"),
                "next_sentence_note": heldout_note(records_figures["heldout_instances"], "instances")}

    figures["pretrain"] = stages.run(
        "pretrain", inputs["pretrain"], pretrain,
        lambda f: f"{f['steps']} steps; held-out MLM accuracy {f['heldout_masked_lm_accuracy']:.3f} (chance "
                  f"{f['masked_lm_chance']:.4f}{noted(f['masked_lm_note'])}), NSP accuracy "
                  f"{f['heldout_next_sentence_accuracy']:.3f} (chance {f['next_sentence_chance']:.3f}"
                  f"{noted(f['next_sentence_note'])})")
    bert_model = os.path.join(output_dir, "pretrain", "bert_model")
    finetuned = os.path.join(output_dir, "finetune", "model")

    def finetune(directory):
        from bert_tf.finetuning import FinetuneOptions
        from bert_tf.tasks.classification import run_classifier
        from bert_tf.tasks import get_task

        data_dir = os.path.join(directory, "data")
        os.makedirs(data_dir, exist_ok=True)
        write_tsv(os.path.join(data_dir, "train.tsv"), word_order_examples(_documents(train_text),
                                                                             o.finetune_examples, o.random_seed))
        heldout_documents = _documents(heldout_text)
        dev_count = max(200, o.finetune_examples // 8)
        write_tsv(os.path.join(data_dir, "dev.tsv"), word_order_examples(heldout_documents, dev_count,
                                                                           o.random_seed + 1))
        # the dev examples are drawn from the held-out sentences: no more distinct examples than those
        distinct = min(dev_count, len(order_sentences(heldout_documents)))
        steps = max(1, int(o.finetune_examples / 32 * o.finetune_epochs))
        tuning = FinetuneOptions(do_train=True, do_eval=True, max_seq_length=o.max_seq_length, train_batch_sizes=32,
                                 learning_rates=(o.finetune_learning_rate,), num_train_epochs=o.finetune_epochs,
                                 init_checkpoint=os.path.join(bert_model, "bert_model.ckpt"),
                                 random_seed=o.random_seed, iterations_per_loop=max(1, steps // 10))
        curve = DevCurve(data_dir, vocab_file=vocab_file, max_seq_length=o.max_seq_length, total=steps)
        try:
            results = run_classifier(get_task("word_order"), config, vocab_file, finetuned, tuning,
                                     data_dir=data_dir, progress=curve)
        finally:
            curve.bar.close()
        write_lines(os.path.join(directory, "history.json"), [json.dumps(curve.history)])
        return {"heldout_accuracy": results["dev"]["accuracy"], "examples": o.finetune_examples, "steps": steps,
                "heldout_sentences": distinct, "heldout_note": heldout_note(distinct, "sentences")}

    figures["finetune"] = stages.run("finetune", inputs["finetune"], finetune,
                                     lambda f: f"word_order: held-out accuracy {f['heldout_accuracy']:.3f} "
                                               f"(chance 0.5{noted(f['heldout_note'])})")

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
            masked, order = demo.heldout_questions(_documents(heldout_text), vocab_file, o.random_seed)
        else:
            masked = [(text, None) for text in demo.MASKED_EXAMPLES]
            order = [(text, None) for text in demo.ORDER_EXAMPLES]
        return demo.ask_saved_models(os.path.join(output_dir, "export"), masked, order)

    figures["answers"] = stages.run("answers", inputs["answers"], answers,
                                    lambda f: "answers from the SavedModels in a fresh process")
    print(demo.format_answers(figures["answers"]))
    plots = plot_curves(output_dir, figures)
    write_report(output_dir, figures, plots, time.time() - started, stages.ran, stages.reused)
    say("report", f"{os.path.join(output_dir, 'report.md')}; plots in {os.path.join(output_dir, 'plots')}")
    return figures


def _documents(path: str) -> list[list[str]]:
    """The documents of one of the corpus stage's files, read as every corpus is (`data_gen.documents`)."""
    return list(read_documents([path]))
