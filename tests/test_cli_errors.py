"""Every command's failures as a user meets them: exit status 1, exactly one line on stderr that starts with the
command's name, no traceback, and the output path exactly as it was before (absent if it was absent).

`CASES` is the table: one row per bad command line, with an id. Each case gets its own directory (`{out}`) holding
`afile` (a regular file, to put outputs under) and `existing/keep.txt` (an output directory that must survive a
failed run untouched); the shared inputs are in `{in}` (see `make_inputs`). The whole case directory and the inputs are
compared byte for byte before and after.

Each case runs as a process of its own that executes the module as `__main__` the way `python -m` does, forked from
one process that has already imported TensorFlow (tests/forking.py): a fresh `python -m` per case would pay the
seconds-long import once per row, minutes for this table on two cores.
"""

import dataclasses
import hashlib
import json
import os
import re
import shutil

import pytest

from tests import forking


@dataclasses.dataclass
class Case:
    """`python -m module *args`, `{in}` and `{out}` in the arguments standing for the inputs and the case's own
    directory; `expect`: a regular expression the error line must match after `<program>: error: `. `midway`: the
    input fails only once the work has started, so the run's progress lines (absl INFO) may come before the error,
    which must still be the last line."""

    id: str
    module: str
    args: list
    expect: str
    midway: bool = False

    def __post_init__(self):  # a flag given again replaces the shared lists' (the CLIs warn of a flag given twice)
        names = [arg.split("=", 1)[0] for arg in self.args]
        self.args = [arg for i, arg in enumerate(self.args) if names[i] not in names[i + 1:]]

    @property
    def program(self):
        return self.module.rsplit(".", 1)[-1]


CPD, BV = "data_gen.create_pretraining_data", "data_gen.build_vocab"
RP, RC, SWAG, NER, SQUAD = (f"bert_tf.cli.{m}" for m in ("run_pretraining", "run_classifier", "run_swag", "run_ner",
                                                         "run_squad"))
EF, CC, EX, QS = "bert_tf.cli.extract_features", "bert_tf.cli.convert_checkpoint", "export.export_saved_model", \
    "bert_tf_quickstart"
GEN = ["--vocab_file={in}/vocab.txt", "--max_seq_length=32", "--max_predictions_per_seq=5"]
MODEL = ["--bert_config_file={in}/bert_config.json", "--vocab_file={in}/vocab.txt"]
WRONG = "--init_checkpoint={in}/wrong/bert_model.ckpt"  # hidden size 24, the config says 16
PRE = ["--bert_config_file={in}/bert_config.json", "--input_file={in}/records/r.tfrecord", "--max_seq_length=32",
       "--max_predictions_per_seq=5", "--train_batch_size=2", "--num_train_steps=1", "--num_warmup_steps=0"]
GOOD = "--init_checkpoint={in}/good/bert_model.ckpt"
TUNE = MODEL + [GOOD]
SST = MODEL + ["--task_name=sst-2", "--data_dir={in}/glue", "--max_seq_length=16", "--train_batch_size=2"]
FEAT = MODEL + ["--layers=-1", "--input_file={in}/lines.txt"]
ENCODER = ["--kind=encoder", "--bert_config_file={in}/bert_config.json", GOOD]
UNDER_FILE = "afile.* not a directory"
SHAPE = "wrong/bert_model.ckpt.* has shape"
PAST = (r"--max_seq_length=600 is longer than the model's max_position_embeddings=512 \(--bert_config_file\); use "
        "at most 512")

CASES = [
    # create_pretraining_data
    Case("cpd-missing-flag", CPD, ["--input_file={in}/corpus.txt", "--output_file={out}/new/"], "--vocab_file"),
    Case("cpd-no-input", CPD, GEN + ["--input_file={in}/missing.txt", "--output_file={out}/new/"], "missing.txt"),
    Case("cpd-output-under-file", CPD, GEN + ["--input_file={in}/corpus.txt", "--output_file={out}/afile/new/"],
         UNDER_FILE),
    Case("cpd-empty-corpus", CPD, GEN + ["--input_file={in}/empty.txt", "--output_file={out}/new/"], "empty.txt"),
    Case("cpd-empty-corpus-existing", CPD, GEN + ["--input_file={in}/empty.txt", "--output_file={out}/existing"],
         "empty.txt"),
    Case("cpd-bad-value", CPD, GEN + ["--input_file={in}/corpus.txt", "--output_file={out}/new/",
                                      "--max_seq_length=long"], "--max_seq_length"),
    Case("cpd-bad-prob", CPD, GEN + ["--input_file={in}/corpus.txt", "--output_file={out}/new/",
                                     "--masked_lm_prob=1.5"], "masked_lm_prob"),
    Case("cpd-no-workers", CPD, GEN + ["--input_file={in}/corpus.txt", "--output_file={out}/new/",
                                       "--num_workers=0"], r"--num_workers=0: 0 is not a positive integer"),
    # build_vocab
    Case("bv-missing-flag", BV, ["--input_file={in}/corpus.txt"], "--output_file"),
    Case("bv-no-input", BV, ["--input_file={in}/missing.txt", "--output_file={out}/new/vocab.txt"], "missing.txt"),
    Case("bv-output-under-file", BV, ["--input_file={in}/corpus.txt", "--output_file={out}/afile/vocab.txt"],
         UNDER_FILE),
    Case("bv-output-is-dir", BV, ["--input_file={in}/corpus.txt", "--output_file={out}/existing"], "existing"),
    Case("bv-bad-value", BV, ["--input_file={in}/corpus.txt", "--output_file={out}/v.txt", "--vocab_size=big"],
         "--vocab_size"),
    # run_pretraining
    Case("rp-missing-flag", RP, ["--bert_config_file={in}/bert_config.json", "--output_dir={out}/new"],
         "--input_file"),
    Case("rp-no-input", RP, ["--bert_config_file={in}/bert_config.json", "--input_file={in}/missing.tfrecord",
                             "--output_dir={out}/new", "--do_train"], "missing.tfrecord"),
    Case("rp-output-under-file", RP, PRE + ["--output_dir={out}/afile/run", "--do_train"], UNDER_FILE),
    Case("rp-wrong-checkpoint", RP, PRE + [WRONG, "--output_dir={out}/new", "--do_train"], SHAPE),
    Case("rp-wrong-checkpoint-existing", RP, PRE + [WRONG, "--output_dir={out}/existing", "--do_train"],
         SHAPE),
    Case("rp-bad-value", RP, PRE + ["--output_dir={out}/new", "--dtype=fp8"], "--dtype"),
    # run_classifier
    Case("rc-missing-flag", RC, TUNE + ["--output_dir={out}/new"], "--task_name"),
    Case("rc-unknown-task", RC, TUNE + ["--task_name=nope", "--data_dir={in}/glue", "--output_dir={out}/new",
                                        "--do_train"], "nope"),
    Case("rc-task-of-another-family", RC, TUNE + ["--task_name=squad", "--data_dir={in}/glue",
                                                   "--output_dir={out}/new", "--do_train"],
         r"--task_name=squad is not a sentence \(pair\) task; train it with run_squad"),
    Case("rc-no-data", RC, TUNE + ["--task_name=sst-2", "--data_dir={in}/missing", "--output_dir={out}/new",
                                   "--do_train"], "missing"),
    Case("rc-output-under-file", RC, SST + [GOOD, "--output_dir={out}/afile/run", "--do_train"], UNDER_FILE),
    Case("rc-output-is-file", RC, SST + [GOOD, "--output_dir={out}/afile", "--do_train"], "afile"),
    Case("rc-wrong-checkpoint", RC, SST + [WRONG, "--output_dir={out}/new", "--do_train"], SHAPE),
    Case("rc-wrong-checkpoint-existing", RC, SST + [WRONG, "--output_dir={out}/existing", "--do_train"],
         SHAPE),
    Case("rc-batch-not-divisible", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train",
                                              "--gradient_accumulation_steps=4", "--train_batch_size=6"],
         r"--train_batch_size=6 must be a multiple of replicas x --gradient_accumulation_steps = 1 x 4"),
    Case("rc-unknown-dtype", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train", "--dtype=float64"],
         r"--dtype=float64: value should be one of"),
    Case("rc-bad-grid-value", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train",
                                         "--num_train_epochs=2,three"], r"--num_train_epochs=2,three: expected a "
         "comma list of numbers"),
    Case("rc-grid-without-dev", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train", "--train_batch_size=2,4"],
         r"needs --do_eval \(the dev set decides\)"),
    Case("rc-resume-another-grid", RC, SST + [GOOD, "--output_dir={in}/grid_run", "--do_train"],
         r"holds a fine-tuning grid of other settings \(.*--learning_rate=0.001 there, 5e-05 here"),
    # run_swag: run_classifier's code under its own name
    Case("swag-output-under-file", SWAG, TUNE + ["--data_dir={in}/swag", "--output_dir={out}/afile/run",
                                                 "--do_train"], UNDER_FILE),
    Case("swag-no-data", SWAG, TUNE + ["--data_dir={in}/missing", "--output_dir={out}/new", "--do_train"],
         "train.csv"),
    Case("swag-bad-value", SWAG, TUNE + ["--data_dir={in}/swag", "--output_dir={out}/new",
                                         "--train_batch_size=many"], "--train_batch_size"),
    # run_ner
    Case("ner-missing-flag", NER, ["--vocab_file={in}/vocab.txt", "--output_dir={out}/new"], "--bert_config_file"),
    Case("ner-no-data", NER, TUNE + ["--data_dir={in}/missing", "--output_dir={out}/new", "--do_train"],
         "train.txt"),
    Case("ner-output-under-file", NER, TUNE + ["--data_dir={in}/ner", "--output_dir={out}/afile/run", "--do_train"],
         UNDER_FILE),
    Case("ner-bad-stride", NER, TUNE + ["--data_dir={in}/ner", "--output_dir={out}/new", "--do_train",
                                        "--max_seq_length=16", "--doc_stride=15"], "--doc_stride=15"),
    Case("ner-wrong-checkpoint", NER, MODEL + ["--data_dir={in}/ner", WRONG, "--output_dir={out}/new", "--do_train",
                                               "--max_seq_length=16"], SHAPE),
    # run_squad
    Case("squad-missing-flag", SQUAD, TUNE + ["--do_train"], "--output_dir"),
    Case("squad-no-train-file", SQUAD, TUNE + ["--train_file={in}/missing.json", "--output_dir={out}/new",
                                               "--do_train"], "missing.json"),
    Case("squad-output-under-file", SQUAD, TUNE + ["--train_file={in}/squad.json", "--output_dir={out}/afile/run",
                                                   "--do_train"], UNDER_FILE),
    # extract_features
    Case("ef-missing-flag", EF, MODEL + ["--input_file={in}/lines.txt", "--output_file={out}/f.jsonl"],
         "--init_checkpoint"),
    Case("ef-no-input", EF, MODEL + ["--input_file={in}/missing.txt", GOOD, "--output_file={out}/new/f.jsonl"],
         "missing.txt"),
    Case("ef-output-under-file", EF, FEAT + [GOOD, "--output_file={out}/afile/f.jsonl"], UNDER_FILE),
    Case("ef-wrong-checkpoint", EF, FEAT + [WRONG, "--output_file={out}/new/f.jsonl"], SHAPE),
    Case("ef-bad-layers", EF, FEAT + [GOOD, "--output_file={out}/new/f.jsonl", "--layers=-1,top"], "--layers"),
    Case("ef-unnumbered-layer", EF, FEAT + [GOOD, "--output_file={out}/new/f.jsonl", "--layers=0"],
         "--layer_numbering=original or --layer_numbering=paper"),
    # convert_checkpoint
    Case("cc-missing-flag", CC, ["--input={in}/good/bert_model.ckpt"], "--output"),
    Case("cc-no-input", CC, ["--input={in}/missing/bert_model.ckpt", "--output={out}/new/m.keras"], "missing"),
    Case("cc-keras-under-file", CC, ["--input={in}/good/bert_model.ckpt", "--output={out}/afile/m.keras"],
         UNDER_FILE),
    Case("cc-ckpt-under-file", CC, ["--input={in}/good/bert_model.ckpt", "--output={out}/afile/x/bert_model.ckpt"],
         UNDER_FILE),
    Case("cc-hf-under-file", CC, ["--input={in}/good/bert_model.ckpt", "--output={out}/afile/hf/"], UNDER_FILE),
    Case("cc-wrong-config", CC, ["--input={in}/wrong/bert_model.ckpt", "--bert_config_file={in}/bert_config.json",
                                 "--output={out}/new/m.keras"], "bert_model.ckpt"),
    # export_saved_model
    Case("ex-missing-flag", EX, ["--export_dir={out}/new/1"], "--kind"),
    Case("ex-under-file", EX, ENCODER + ["--export_dir={out}/afile/1"], UNDER_FILE),
    Case("ex-preprocessor-under-file", EX, ["--kind=preprocessor", "--vocab_file={in}/vocab.txt",
                                            "--export_dir={out}/afile/1"], UNDER_FILE),
    Case("ex-no-model-dir", EX, ["--kind=classifier", "--model_dir={in}/missing", "--export_dir={out}/new/1"],
         "missing"),
    Case("ex-wrong-checkpoint", EX, ["--kind=encoder", "--bert_config_file={in}/bert_config.json", WRONG,
                                     "--export_dir={out}/new/1"], SHAPE),
    Case("ex-bad-value", EX, ["--kind=everything", "--export_dir={out}/new/1"], "--kind"),
    # quickstart
    Case("qs-output-under-file", QS, ["--output_dir={out}/afile/q"], UNDER_FILE),
    Case("qs-no-input", QS, ["--input_file={in}/missing.txt", "--output_dir={out}/new"], "missing.txt"),
    Case("qs-empty-input", QS, ["--input_file={in}/empty.txt", "--output_dir={out}/new"], "empty.txt"),
    Case("qs-bad-value", QS, ["--output_dir={out}/new", "--corpus_mb=lots"], "--corpus_mb"),
    # damaged or malformed data (tests/test_data_errors.py has each case in detail)
    Case("rp-resume-other-shape", RP, PRE + ["--output_dir={in}/run24", "--do_train"],
         r"--output_dir=.*run24 holds checkpoints of another model \(.*ckpt-1: hidden_size 24 there, 16 here\); "
         r"train this model in a new --output_dir"),
    Case("rc-not-utf8", RC, SST + [GOOD, "--data_dir={in}/latin1", "--output_dir={out}/new", "--do_train"],
         r"latin1/train\.tsv:3: byte 0xe9 \(column 4\) is not UTF-8"),
    Case("ner-column-count", NER, TUNE + ["--data_dir={in}/ner_columns", "--output_dir={out}/new", "--do_train"],
         r"ner_columns/train\.txt:2: 3 columns, but the file's token lines have 2 \(line 1\)"),
    Case("rp-truncated-records", RP, PRE + ["--input_file={in}/cut/r.tfrecord", "--output_dir={out}/new",
                                            "--do_train"],
         r"cut/r\.tfrecord: TFRecord file is cut short: record \d+ .*regenerate it with create_pretraining_data",
         midway=True),
    Case("squad-not-utf8", SQUAD, TUNE + ["--train_file={in}/latin1/squad.json", "--output_dir={out}/new",
                                          "--do_train"], r"latin1/squad\.json:2: byte 0xe9 \(column 17\) is not UTF-8"),
    # inputs larger than the model: ids or positions it has no embedding for
    Case("rp-seq-past-positions", RP, PRE + ["--output_dir={out}/new", "--do_train", "--max_seq_length=600"], PAST),
    Case("rc-seq-past-positions", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train", "--max_seq_length=600"],
         PAST),
    Case("ner-seq-past-positions", NER, TUNE + ["--data_dir={in}/ner", "--output_dir={out}/new", "--do_train",
                                                "--max_seq_length=600"], PAST),
    Case("squad-seq-past-positions", SQUAD, TUNE + ["--train_file={in}/squad.json", "--output_dir={out}/new",
                                                    "--do_train", "--max_seq_length=600"], PAST),
    Case("ef-seq-past-positions", EF, FEAT + [GOOD, "--output_file={out}/new/f.jsonl", "--max_seq_length=600"], PAST),
    Case("ex-seq-past-positions", EX, ["--kind=classifier", "--model_dir={in}/grid_run", "--export_dir={out}/new/1",
                                       "--seq_length=600"], r"--seq_length=600 is longer than the model's "
         r"max_position_embeddings=512 \(the model in --model_dir=.*grid_run\); use at most 512"),
    Case("swag-task-name-spelled-otherwise", SWAG, TUNE + ["--data_dir={in}/missing", "--output_dir={out}/new",
                                                           "--do_train", "--task_name=SWAG"], "train.csv"),
    Case("rc-vocab-past-config", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train",
                                            "--vocab_file={in}/vocab_big.txt"],
         r"--vocab_file=.*vocab_big\.txt has 41 tokens but the model's vocab_size is 40 \(--bert_config_file\)"),
    Case("rp-vocab-past-config", RP, PRE + ["--output_dir={out}/new", "--do_train", "--vocab_file={in}/vocab_big.txt"],
         r"vocab_big\.txt has 41 tokens but the model's vocab_size is 40"),
    Case("cc-vocab-past-config", CC, ["--input={in}/good/bert_model.ckpt", "--output={out}/new/",
                                      "--vocab_file={in}/vocab_big.txt"],
         r"--vocab_file=.*vocab_big\.txt has 41 tokens but the model's vocab_size is 40 \(--input=.*good"),
    Case("rc-checkpoint-deeper", RC, SST + ["--init_checkpoint={in}/deep/bert_model.ckpt", "--output_dir={out}/new",
                                            "--do_train"], r"deep/bert_model\.ckpt: its encoder has 2 layers, the "
         r"model's config 1; set num_hidden_layers to 2"),
    Case("ef-checkpoint-deeper", EF, FEAT + ["--init_checkpoint={in}/deep/bert_model.ckpt",
                                            "--output_file={out}/new/f.jsonl"], r"its encoder has 2 layers"),
    Case("rp-eval-without-a-model", RP, PRE + ["--output_dir={out}/new", "--do_eval"],
         r"--do_eval alone evaluates a trained model, and there is none: --output_dir=.*new holds no checkpoint"),
    Case("rc-eval-without-a-model", RC, SST + ["--output_dir={out}/new", "--do_eval"],
         r"--output_dir=.*new holds no fine-tuned model \(model.keras\) to evaluate or predict with, and no "
         r"--init_checkpoint is given; add --do_train"),
    # a case setting that contradicts the vocabulary: capitalised words would all be [UNK]
    Case("cpd-cased-flag-uncased-vocab", CPD, GEN + ["--input_file={in}/corpus.txt", "--output_file={out}/new/",
                                                     "--nodo_lower_case"], r"vocab\.txt: an uncased vocabulary "
         r"\(lower-casing changes none of its tokens\) with do_lower_case off"),
    Case("rc-cased-flag-uncased-vocab", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train",
                                                   "--nodo_lower_case"], r"an uncased vocabulary"),
    # a flag for another mode or command, or a path of the wrong kind
    Case("cpd-shards-of-a-file-list", CPD, GEN + ["--input_file={in}/corpus.txt", "--num_output_shards=4",
                                                  "--output_file={out}/a.tfrecord,{out}/b.tfrecord"],
         r"--num_output_shards=4 names the shards of one directory, but --output_file=.* lists files"),
    Case("ef-output-ends-in-slash", EF, FEAT + [GOOD, "--output_file={out}/new/"],
         r"new/ ends in '/', the name of a directory; give a file name"),
    Case("swag-other-task", SWAG, TUNE + ["--data_dir={in}/swag", "--output_dir={out}/new", "--do_train",
                                          "--task_name=mrpc"], r"--task_name=mrpc: run_swag trains SWAG only"),
    Case("squad-threshold-without-v2", SQUAD, TUNE + ["--train_file={in}/squad.json", "--output_dir={out}/new",
                                                      "--do_train", "--null_score_diff_threshold=1.0"],
         r"--null_score_diff_threshold=1.0 is SQuAD 2.0's; add --version_2_with_negative"),
    Case("squad-zero-stride", SQUAD, TUNE + ["--train_file={in}/squad.json", "--output_dir={out}/new", "--do_train",
                                            "--doc_stride=0"], r"--doc_stride=0 must be at least 1"),
    Case("squad-zero-query", SQUAD, TUNE + ["--train_file={in}/squad.json", "--output_dir={out}/new", "--do_train",
                                           "--max_query_length=0"], r"--max_query_length=0 must be at least 1"),
    Case("ex-negative-stride", EX, ["--kind=span_qa", "--model_dir={in}/grid_run", "--export_dir={out}/new/1",
                                    "--doc_stride=-4"], r"--doc_stride=-4 must be at least 1"),
    Case("bv-negative-unused", BV, ["--input_file={in}/corpus.txt", "--output_file={out}/new/vocab.txt",
                                    "--num_unused=-5"], r"--num_unused=-5 must be 0 or more"),
    Case("ex-zero-top-k", EX, ["--kind=mlm", "--bert_config_file={in}/bert_config.json", "--export_dir={out}/new/1",
                               "--top_k=0"], r"--top_k=0 must be at least 1"),
    Case("cpd-zero-shards", CPD, GEN + ["--input_file={in}/corpus.txt", "--output_file={out}/new/",
                                        "--num_output_shards=0"], r"--num_output_shards=0 must be at least 1"),
    Case("ex-zero-seq-length", EX, ["--kind=classifier", "--model_dir={in}/grid_run", "--export_dir={out}/new/1",
                                    "--seq_length=0"], r"--seq_length=0 must be at least 1"),
    Case("cc-hf-format-ckpt-name", CC, ["--input={in}/good/bert_model.ckpt", "--output={out}/new/model.ckpt",
                                        "--output_format=hf"], r"--output=.*model.ckpt: the name says another format "
         r"than --output_format=hf"),
    Case("cc-stale-vocab-beside", CC, ["--input={in}/good/bert_model.ckpt", "--output={in}/stale/bert_model.ckpt"],
         r"stale/vocab\.txt is there already, from an earlier model, and the input has no vocabulary to replace it"),
    # numbers out of range, each named
    Case("rp-zero-batch", RP, PRE + ["--output_dir={out}/new", "--do_train", "--train_batch_size=0"],
         r"--train_batch_size=0 must be at least 1"),
    Case("rp-negative-learning-rate", RP, PRE + ["--output_dir={out}/new", "--do_train", "--learning_rate=-1e-4"],
         r"--learning_rate=-0.0001 must be above 0"),
    Case("rp-negative-decay", RP, PRE + ["--output_dir={out}/new", "--do_train", "--weight_decay=-0.5"],
         r"--weight_decay=-0.5 must be 0 or more"),
    # the original's TPU flags on a machine without a TPU
    Case("rp-use-tpu-without-one", RP, PRE + ["--output_dir={out}/new", "--do_train", "--use_tpu"],
         r"TPU 'local': cannot reach or start it \(TPUs not found in the cluster\)"),
    Case("rc-zero-eval-batch", RC, SST + [GOOD, "--output_dir={out}/new", "--do_eval", "--eval_batch_size=0"],
         r"--eval_batch_size=0 must be at least 1"),
    Case("rc-warmup-past-one", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train", "--warmup_proportion=1.5"],
         r"--warmup_proportion=1.5 must be between 0 and 1"),
    Case("rc-dropout-past-one", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train", "--dropout_rate=1.5"],
         r"--dropout_rate=1.5 must be at least 0 and below 1"),
    Case("rc-vocab-is-a-directory", RC, SST + [GOOD, "--output_dir={out}/new", "--do_train", "--vocab_file={in}/glue"],
         r"glue: a directory; give the vocab.txt file in it"),
    Case("ef-numbering-unused", EF, FEAT + [GOOD, "--output_file={out}/new/f.jsonl", "--layer_numbering=paper"],
         r"--layer_numbering=paper says what a non-negative --layers number means, and --layers=-1 has none"),
    Case("ef-zero-batch", EF, FEAT + [GOOD, "--output_file={out}/new/f.jsonl", "--batch_size=0"],
         r"--batch_size=0 must be at least 1"),
    Case("ex-encoder-untrained", EX, ["--kind=encoder", "--bert_config_file={in}/bert_config.json",
                                      "--export_dir={out}/new/1"], r"--kind=encoder needs --bert_config_file and "
         r"--init_checkpoint \(an export of untrained weights would serve random outputs\)"),
]

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "ran", "on", "mat", "in",
         "park", "it", "was", "big", "small", "and", "then", "slept", "home", "is", "good", "bad", "day", "night",
         ".", ",", "?", "##s", "##ed", "##ing", "he", "she", "saw", "old", "new", "red"]
CORPUS = """the cat sat on the mat .
it was a good day .
then the cat slept .

the dog ran in the park .
he saw a red cat .
she ran home .

the old dog slept .
it was night .
"""


def make_inputs(d):
    """Writes the small valid inputs into the directory `d` (a model of hidden size 16, its vocabulary, corpus,
    records, task files) and a checkpoint of another shape (hidden size 24)."""
    from bert_tf import BertConfig, BertEncoder, checkpoints
    from data_gen.generate import Options, generate

    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (d / "vocab_big.txt").write_text("\n".join(VOCAB + ["extra"]) + "\n")
    sizes = dict(vocab_size=len(VOCAB), num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                 max_position_embeddings=512)
    config = BertConfig(hidden_size=16, **sizes)
    config.to_json_file(d / "bert_config.json")
    checkpoints.save_original(BertEncoder(config), str(d / "good" / "bert_model.ckpt"))
    config.to_json_file(d / "good" / "bert_config.json")
    checkpoints.save_original(BertEncoder(BertConfig(hidden_size=24, **sizes)), str(d / "wrong" / "bert_model.ckpt"))
    checkpoints.save_original(BertEncoder(BertConfig(hidden_size=16, **{**sizes, "num_hidden_layers": 2})),
                              str(d / "deep" / "bert_model.ckpt"))
    (d / "corpus.txt").write_text(CORPUS)
    (d / "empty.txt").write_text("")
    (d / "lines.txt").write_text("the cat sat .\nthe dog ran . ||| it was big .\n")
    generate([str(d / "corpus.txt")], [str(d / "records" / "r.tfrecord")], str(d / "vocab.txt"),
             Options(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2), progress=False)
    (d / "glue").mkdir()
    (d / "glue" / "train.tsv").write_text("sentence\tlabel\nthe cat sat\t1\nthe dog ran\t0\nit was bad\t0\n")
    (d / "glue" / "dev.tsv").write_text("sentence\tlabel\nthe cat ran\t1\n")
    (d / "ner").mkdir()
    (d / "ner" / "train.txt").write_text("the O\ncat B-ANI\nsat O\n\nthe O\ndog B-ANI\nran O\n")
    (d / "swag").mkdir()
    (d / "squad.json").write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{
        "context": "the cat sat on the mat .",
        "qas": [{"id": "q1", "question": "where ?", "answers": [{"text": "the mat", "answer_start": 15}]}]}]}]}))
    _pretrained(d, BertConfig(hidden_size=24, **sizes))
    _finetuned(d, config)
    (d / "stale").mkdir()  # where an earlier conversion left its vocabulary (good/ has none to replace it)
    (d / "stale" / "vocab.txt").write_text("an earlier model's\n")
    (d / "latin1").mkdir()
    (d / "latin1" / "train.tsv").write_bytes(b"sentence\tlabel\nthe cat sat\t1\nCaf\xe9 au lait\t0\n")
    (d / "latin1" / "squad.json").write_bytes(b'{"data": [{"title": "t", "paragraphs": [\n{"context": "Caf\xe9", '
                                              b'"qas": []}]}]}')
    shutil.copytree(d / "records", d / "cut")
    (d / "cut" / "r.tfrecord").write_bytes((d / "records" / "r.tfrecord").read_bytes()[:-20])
    (d / "ner_columns").mkdir()
    (d / "ner_columns" / "train.txt").write_text("the O\nNew York B-LOC\n\nthe O\n")
    return d


def _pretrained(d, config):
    """`{in}/run24`: a one-step pretraining run of another hidden size, for resuming over."""
    from bert_tf.pretraining import PretrainingOptions, run_pretraining

    run_pretraining(config, str(d / "records" / "r.tfrecord"), str(d / "run24"), PretrainingOptions(
        max_seq_length=32, max_predictions_per_seq=5, train_batch_size=2, num_train_steps=1, num_warmup_steps=0))


def _finetuned(d, config):
    """`{in}/grid_run`: a one-step fine-tuning run at learning rate 1e-3, for resuming with other settings."""
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks import get_task
    from bert_tf.tasks.classification import run_classifier

    run_classifier(get_task("sst-2"), config, str(d / "vocab.txt"), str(d / "grid_run"), FinetuneOptions(
        do_train=True, max_seq_length=16, train_batch_sizes=2, learning_rates=1e-3, num_train_epochs=1),
        data_dir=str(d / "glue"))


def snapshot(path):
    """{relative path: file bytes, or None for a directory} of everything under `path` ({} when absent)."""
    found = {}
    for top, dirs, files in os.walk(path):
        for name in dirs:
            found[os.path.relpath(os.path.join(top, name), path)] = None
        for name in files:
            with open(os.path.join(top, name), "rb") as f:
                found[os.path.relpath(os.path.join(top, name), path)] = f.read()
    return found


@pytest.fixture(scope="module")
def results(tmp_path_factory, request):
    """Runs the cases this session selected, each forked from one interpreter that has imported TensorFlow
    (tests/forking.py); {id: (exit status, stderr, case directory before, after)}. Computed once per session: the
    xdist worker that asks second reads the first one's results."""
    params = [getattr(getattr(item, "callspec", None), "params", {}) for item in request.session.items
              if item.module.__name__ == __name__]
    selected = sorted({p["case"].id for p in params if "case" in p})
    return forking.once_per_session(tmp_path_factory, "cli_errors-" + hashlib.sha256(
        " ".join(selected).encode()).hexdigest()[:12], lambda work: _run_cases(work, set(selected)))


def _run_cases(work, selected):
    inputs = work / "inputs"
    inputs.mkdir()
    make_inputs(inputs)
    inputs_before = snapshot(inputs)
    runs, before = [], {}
    for case in CASES:
        if case.id not in selected:
            continue
        out = work / case.id
        (out / "existing").mkdir(parents=True)
        (out / "existing" / "keep.txt").write_text("an earlier run's output\n")
        (out / "afile").write_text("a regular file\n")
        before[case.id] = snapshot(out)
        args = [a.replace("{in}", str(inputs)).replace("{out}", str(out)) for a in case.args]
        runs.append(dict(id=case.id, module=case.module, args=args, cwd=str(out)))
    status = forking.run_forked(runs, str(work), parallel=4, timeout=240)
    assert snapshot(inputs) == inputs_before, "a case wrote into the inputs"
    return {run["id"]: (status[run["id"]][0], status[run["id"]][2], before[run["id"]], snapshot(run["cwd"]))
            for run in runs}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_cli_error(case, results):
    code, stderr, before, after = results[case.id]
    shown = (line.rsplit("\r", 1)[-1] for line in stderr.split("\n"))  # as a terminal shows progress bars
    lines = [line for line in shown if line.strip()]
    if case.midway:
        lines = [line for line in lines if not re.match(r"I\d{4} [\d:.]+ +\d+ \w+\.py:\d+\] ", line)]
    assert code == 1 and "Traceback" not in stderr and len(lines) == 1, f"exit {code}, stderr:\n{stderr}"
    assert lines[0].startswith(f"{case.program}: error: "), lines[0]
    assert re.search(case.expect, lines[0][len(case.program) + 9:]), lines[0]
    assert stderr.rstrip().endswith(lines[0])
    assert after == before, f"the case directory changed: {sorted(set(after) ^ set(before))}"


def test_a_flag_given_twice_is_said_and_the_last_is_used(tmp_path):
    """absl takes the last of a flag given twice without a word (a grid flag given twice would train one value):
    the command says so in one line, and goes on with the last (here, to its refusal of it)."""
    out = forking.python(["-m", CPD, f"--input_file={tmp_path}/missing.txt", f"--output_file={tmp_path}/out/",
                          "--vocab_file=v.txt", "--num_output_shards=2", "--num_output_shards=0"],
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1 and lines == [
        "create_pretraining_data: warning: --num_output_shards is given 2 times; the last is used, "
        "--num_output_shards=0 (a grid flag takes a comma list)",
        "create_pretraining_data: error: --num_output_shards=0 must be at least 1"], out.stderr


# ---------------------------------------------------------------------------------- failures met during the work
def _writing(tmp_path, monkeypatch, main):
    """`bert_tf.cli`'s wrapper around a command's main, for a command `demo` with --output_dir under tmp_path."""
    from absl import flags

    from bert_tf import cli

    monkeypatch.setattr(cli, "_program", "demo")
    values = flags.FlagValues()
    flags.DEFINE_string("output_dir", str(tmp_path / "run" / "out"), "", flag_values=values)
    values(["demo"])
    with pytest.raises(SystemExit) as raised:
        cli._run_writing(main, [], {"output_dir": cli.DIRECTORY}, values)
    return raised.value.code


def test_an_oserror_met_on_an_output_is_one_line_and_the_directories_made_are_removed(tmp_path, monkeypatch, capsys):
    def main(argv):
        os.makedirs(tmp_path / "run" / "out" / "train")
        raise OSError(28, "No space left on device", str(tmp_path / "run" / "out" / "train" / "events"))

    assert _writing(tmp_path, monkeypatch, main) == 1
    assert capsys.readouterr().err == (f"demo: error: cannot write --output_dir={tmp_path}/run/out: "
                                       f"{tmp_path}/run/out/train/events: No space left on device; give another "
                                       "--output_dir\n")
    assert os.listdir(tmp_path) == []


def test_a_failed_run_keeps_what_it_wrote(tmp_path, monkeypatch, capsys):
    from bert_tf.cli import fail

    def main(argv):
        os.makedirs(tmp_path / "run" / "out")
        (tmp_path / "run" / "out" / "ckpt-1.index").write_text("a checkpoint to resume from")
        fail("stopped at step 2")

    assert _writing(tmp_path, monkeypatch, main) == 1
    assert capsys.readouterr().err == "demo: error: stopped at step 2\n"
    assert os.listdir(tmp_path / "run" / "out") == ["ckpt-1.index"]
