"""Damaged or malformed data as users meet it: a truncated or corrupt TFRecord shard, text files that are not
UTF-8, a CoNLL line with another column count, SQuAD answers away from their `answer_start`, and resuming over
checkpoints of another model. Each is one error naming the file and the place (or, for SQuAD, a warning naming the
questions skipped), on small data written here."""

import json
import logging
import os
import zlib

import numpy as np
import pytest

SEQ, PREDS = 16, 3


# ----------------------------------------------------------------------------------------- pretraining records
def _write_records(path, count, seed, compression=""):
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=list(v)))  # noqa: E731
    with tf.io.TFRecordWriter(str(path), compression) as writer:
        for _ in range(count):
            feature = {"input_ids": ints(rng.integers(5, 30, SEQ)), "input_mask": ints([1] * SEQ),
                       "segment_ids": ints([0] * (SEQ // 2) + [1] * (SEQ // 2)),
                       "masked_lm_positions": ints(range(1, PREDS + 1)),
                       "masked_lm_ids": ints(rng.integers(5, 30, PREDS)),
                       "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * PREDS)),
                       "next_sentence_labels": ints([int(rng.integers(2))])}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
                deterministic=True))


def _record_starts(path):
    """Byte offsets of each record in a plain TFRecord file (8-byte length, 4-byte CRC, data, 4-byte CRC)."""
    data, starts, at = path.read_bytes(), [], 0
    while at < len(data):
        starts.append(at)
        at += 16 + int.from_bytes(data[at:at + 8], "little")
    return starts


@pytest.fixture
def shards(tmp_path):
    directory = tmp_path / "records"
    directory.mkdir()
    for k in range(3):
        _write_records(directory / f"s{k}.tfrecord", 20, k)
    return directory


def test_damaged_shards_are_found_with_their_record_and_byte(shards):
    from bert_tf.pretraining import damage_message, damaged_files, expand_files

    cut, flipped = shards / "s1.tfrecord", shards / "s2.tfrecord"
    starts = _record_starts(cut)
    cut.write_bytes(cut.read_bytes()[:starts[7] + 30])  # inside the 8th record
    data = bytearray(flipped.read_bytes())
    data[_record_starts(flipped)[12] + 12 + 5] ^= 1  # a byte of the 13th record's data
    flipped.write_bytes(bytes(data))

    damaged = damaged_files(expand_files(str(shards / "*.tfrecord")))
    assert [(os.path.basename(p), good) for p, good, _ in damaged] == [("s1.tfrecord", 7), ("s2.tfrecord", 12)]
    assert damage_message(damaged[:1]) == (
        f"{cut}: TFRecord file is cut short: record 8 (at byte {starts[7]}) is incomplete (an interrupted write or "
        "copy?); regenerate it with create_pretraining_data, or copy it again, then rerun")
    message = damage_message(damaged[1:])
    assert message.startswith(f"{flipped}: TFRecord file is corrupt: record 13 (at byte ")
    assert message.endswith("fails its checksum (an interrupted write or copy?); regenerate it with "
                            "create_pretraining_data, or copy it again, then rerun")
    assert damage_message(damaged).endswith(f"then rerun; 1 more damaged: {flipped}")
    assert damaged_files([str(shards / "s0.tfrecord")]) == []
    cut.write_bytes(cut.read_bytes()[:starts[3] + 5])  # inside the 4th record's header: TensorFlow reads 3 records
    assert damage_message(damaged_files([str(cut)])).startswith(
        f"{cut}: TFRecord file is cut short: record 4 (at byte {starts[3]}) is incomplete")


def test_gzip_shards_cut_inside_a_record_or_where_one_ends_are_found(tmp_path):
    """TensorFlow reads a gzip stream cut where a record ends as a shorter file, without an error; the scan still
    finds it."""
    import tensorflow as tf

    from bert_tf.pretraining import damage_message, damaged_files

    path = tmp_path / "g.tfrecord"
    _write_records(path, 20, 9, "GZIP")
    whole = path.read_bytes()
    record = len(zlib.decompress(whole, wbits=31)) // 20
    inflated = [len(zlib.decompressobj(wbits=31).decompress(whole[:n])) for n in range(len(whole))]
    inside = next(n for n in range(len(whole) // 2, len(whole)) if inflated[n] % record)
    at_end = next(n for n in range(len(whole) // 2, len(whole)) if inflated[n] and not inflated[n] % record)

    path.write_bytes(whole[:inside])
    [(_, good, _)] = damaged = damaged_files([str(path)])
    assert good == inflated[inside] // record
    assert f"is cut short: record {good + 1} (at byte {good * record} of the decompressed data)" in \
        damage_message(damaged)
    path.write_bytes(whole[:at_end])
    options = tf.io.TFRecordOptions("GZIP")
    assert sum(1 for _ in tf.compat.v1.io.tf_record_iterator(str(path), options)) == inflated[at_end] // record
    assert damage_message(damaged_files([str(path)])).startswith(
        f"{path}: TFRecord file is cut short: its gzip stream stops after record {inflated[at_end] // record}, "
        "before the end of the stream")


def test_a_data_loss_that_no_shard_explains_goes_on_unchanged(shards):
    import tensorflow as tf

    from bert_tf.pretraining import _naming_damaged_files

    with pytest.raises(tf.errors.DataLossError, match="a damaged checkpoint"):
        with _naming_damaged_files([str(shards / "s0.tfrecord")]):
            raise tf.errors.DataLossError(None, None, "a damaged checkpoint")


def test_a_shard_damaged_in_its_first_record_is_refused_before_training(shards):
    from bert_tf.pretraining import DataError, check_records

    path = shards / "s0.tfrecord"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DataError, match=f"^{path}: TFRecord file is cut short: record 1 .*create_pretraining_data"):
        check_records([str(path)], SEQ, PREDS)


def _tiny(hidden):
    from bert_tf import BertConfig

    return BertConfig(vocab_size=30, hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=SEQ)


def _options(steps):
    from bert_tf.pretraining import PretrainingOptions

    return PretrainingOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, train_batch_size=4,
                              num_train_steps=steps, num_warmup_steps=1, save_checkpoints_steps=2,
                              iterations_per_loop=2)


def test_training_on_a_truncated_shard_names_it_and_saves_nothing(shards, tmp_path):
    from bert_tf.pretraining import DataError, run_pretraining

    path = shards / "s1.tfrecord"
    path.write_bytes(path.read_bytes()[:_record_starts(path)[10] + 30])
    output = tmp_path / "run"
    with pytest.raises(DataError, match=f"^{path}: TFRecord file is cut short: record 11 "):
        run_pretraining(_tiny(16), str(shards / "*.tfrecord"), str(output), _options(4))
    assert os.listdir(output) == []  # no checkpoint, no events file: an empty directory the CLI removes


def test_resuming_over_checkpoints_of_another_size_or_input_names_what_differs(shards, tmp_path):
    from bert_tf.checkpoints import CheckpointError
    from bert_tf.pretraining import build_pretrainer, run_pretraining
    from bert_tf.checkpoints import restore_weights

    output = tmp_path / "run"
    run_pretraining(_tiny(16), str(shards / "*.tfrecord"), str(output), _options(2))
    before = sorted(os.listdir(output))
    with pytest.raises(CheckpointError, match=(
            rf"^--output_dir={output} holds checkpoints of another model \({output}/ckpt-2: hidden_size 16 there, "
            r"32 here\); train this model in a new --output_dir")):
        run_pretraining(_tiny(32), str(shards / "*.tfrecord"), str(output), _options(4))
    assert sorted(os.listdir(output)) == before
    with pytest.raises(CheckpointError, match=rf"^{output}/ckpt-2 saved its input position for another input \(.*"
                                              "cycle length.*\): resume with the --input_file it was trained on"):
        run_pretraining(_tiny(16), str(shards / "s0.tfrecord"), str(output), _options(4))
    assert sorted(os.listdir(output)) == before
    with pytest.raises(CheckpointError, match=rf"^--init_checkpoint={output}/ckpt-2: a checkpoint of another model "
                                              r"\(variable embeddings/word_embeddings has shape \(30, 16\) there"):
        restore_weights(build_pretrainer(_tiny(32), _options(4)), str(output / "ckpt-2"))


def test_resuming_over_checkpoints_of_a_deeper_model_names_the_config_that_differs(shards, tmp_path):
    """Every weight of a one-layer model is in a two-layer checkpoint, so TensorFlow alone could restore it with the
    second layer dropped (or, as Keras tracks layers by position, with weights mismatched by shape)."""
    import dataclasses

    from bert_tf.checkpoints import CheckpointError
    from bert_tf.pretraining import run_pretraining

    output = tmp_path / "run"
    run_pretraining(dataclasses.replace(_tiny(16), num_hidden_layers=2), str(shards / "*.tfrecord"), str(output),
                    _options(2))
    before = sorted(os.listdir(output))
    with pytest.raises(CheckpointError, match=rf"^--output_dir={output} holds checkpoints of another model "
                                              rf"\({output}/ckpt-2: num_hidden_layers 2 there, 1 here\); train this "
                                              r"model in a new --output_dir"):
        run_pretraining(_tiny(16), str(shards / "*.tfrecord"), str(output), _options(4))
    assert sorted(os.listdir(output)) == before
    run_pretraining(dataclasses.replace(_tiny(16), num_hidden_layers=2), str(shards / "*.tfrecord"), str(output),
                    _options(4))  # the model that wrote them resumes
    assert "ckpt-4.index" in os.listdir(output)


# ----------------------------------------------------------------------------------------- fine-tuning text
LATIN1 = "Caf\xe9 au lait".encode("latin-1")  # 0xe9: not UTF-8


def _glue(d):
    (d / "train.tsv").write_bytes(b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta b\tc d\n"
                                  b"0\t3\t4\t" + LATIN1 + b"\te f\n")
    from bert_tf.tasks import get_task
    return lambda: get_task("mrpc").examples(str(d), "train"), d / "train.tsv", 3


def _xnli(d):
    (d / "xnli.dev.tsv").write_bytes(b"language\tgold_label\ta\tb\tc\td\tsentence1\tsentence2\n"
                                     b"en\tneutral\t.\t.\t.\t.\t" + LATIN1 + b"\tb\n")
    from bert_tf.tasks.xnli import XnliTask
    return lambda: XnliTask("xnli", labels=("contradiction", "entailment", "neutral"), language="en").examples(
        str(d), "dev"), d / "xnli.dev.tsv", 2


def _swag(d):
    (d / "train.csv").write_bytes(b"sent1,sent2,ending0,ending1,ending2,ending3,label\n"
                                  b"a,b,c,d,e,f,0\n\n" + b"a,b,c,d,e," + LATIN1 + b",1\n")
    from bert_tf.tasks.swag import SwagTask
    return lambda: SwagTask("swag", labels=("0", "1", "2", "3")).examples(str(d), "train"), d / "train.csv", 4


def _ner(d):
    (d / "train.txt").write_bytes(b"EU B-ORG\nrejects O\n\n" + LATIN1[:5] + b" O\n")
    from bert_tf.tasks.ner import read_sentences
    return lambda: read_sentences(str(d / "train.txt")), d / "train.txt", 4


def _squad(d):
    (d / "train.json").write_bytes(b'{"data": [{"paragraphs": [{\n"context": "' + LATIN1 + b'", "qas": []}]}]}')
    from bert_tf.tasks.squad import read_examples
    return lambda: read_examples(str(d / "train.json"), True, False), d / "train.json", 2


def _lines(d):
    (d / "lines.txt").write_bytes(b"one\ntwo ||| three\n" + LATIN1 + b"\n")
    from bert_tf.feature_extraction import read_lines
    return lambda: read_lines(str(d / "lines.txt")), d / "lines.txt", 3


@pytest.mark.parametrize("make", [_glue, _xnli, _swag, _ner, _squad, _lines],
                         ids=["glue", "xnli", "swag", "conll", "squad", "extract_features"])
def test_text_that_is_not_utf8_is_named_by_file_line_and_byte(make, tmp_path):
    from bert_tf.tasks import DataError

    read, path, line = make(tmp_path)
    column = len(path.read_bytes().split(b"\n")[line - 1].split(b"\xe9")[0]) + 1
    with pytest.raises(DataError, match=rf"^{path}:{line}: byte 0xe9 \(column {column}\) is not UTF-8; convert the "
                                        "file to UTF-8"):
        read()


@pytest.mark.parametrize("where", ["local", "remote"])
def test_task_text_is_read_by_lines_without_carriage_returns_on_every_filesystem(where, tmp_path):
    """A task file's lines as TensorFlow's GFile reads text, local or remote (`ram://` goes through GFile): the BOM
    and every carriage return dropped, a last run of carriage returns no line; cut at every newline whatever the
    block it falls in; and a byte that is not UTF-8 named at the column it has in the file."""
    import re

    import tensorflow as tf

    from bert_tf.tasks import DataError
    from bert_tf.tasks.base import open_text

    def written(name, data):  # a new file each time: writing over a ram:// file appended to it here (TF 2.21)
        path = str(tmp_path / name) if where == "local" else f"ram://{tmp_path.name}/{name}"
        with tf.io.gfile.GFile(path, "wb") as f:
            f.write(data)
        return path

    data = b"\xef\xbb\xbfa\r\nb\rc\n\n\xc3\xa9t\xc3\xa9\nend\r"
    path = written("text.txt", data)
    with open_text(path) as f:
        assert list(f) == ["a\n", "bc\n", "\n", "\u00e9t\u00e9\n", "end"]
    with open_text(path) as f:
        assert list(f._byte_lines(block=3)) == re.findall(rb"[^\n]*\n|[^\n]+$", data)
    path = written("latin1.txt", b"x\r\nab\r\xffc\n\r")
    with pytest.raises(DataError, match=rf"^{re.escape(path)}:2: byte 0xff \(column 4\) is not UTF-8"):
        list(open_text(path))
    with open_text(written("returns.txt", b"\r\r")) as f:
        assert list(f) == [] and f.read() == ""


def test_a_conll_line_with_another_column_count_is_an_error_at_its_line(tmp_path):
    from bert_tf.tasks import DataError
    from bert_tf.tasks.ner import read_sentences

    path = tmp_path / "train.txt"
    path.write_text("-DOCSTART- -X- O O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nNew York NNP I-NP B-LOC\n",
                    encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:6: 5 columns, but the file's token lines have 4 \(line 3\)"):
        read_sentences(str(path))
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nGerman JJ B-NP B-MISC\n", encoding="utf-8")
    assert [s.tags for s in read_sentences(str(path))] == [["B-ORG", "O"], ["B-MISC"]]


def test_squad_answers_away_from_their_start_are_skipped_and_named(tmp_path, caplog):
    from bert_tf.tasks.squad import read_examples

    context = "The Normans gave their name to Normandy in France."
    qas = [{"id": "good", "question": "Who?", "answers": [{"text": "Normans", "answer_start": 4}]}]
    qas += [{"id": f"off{k}", "question": "Where?", "answers": [{"text": "Normandy", "answer_start": k}]}
            for k in range(6)]
    qas += [{"id": "past-end", "question": "Where?", "answers": [{"text": "France.", "answer_start": 48}]}]
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        examples, _ = read_examples(str(path), True, False)
    assert [(e.qas_id, e.answer_text) for e in examples] == [("good", "Normans")]
    assert f"{path}: skipped 7 training question(s) whose answer text is not at its answer_start: off0, off1, off2, " \
           "off3, off4 ..." in caplog.text
    assert len(read_examples(str(path), False, False)[0]) == 8  # prediction reads every question
