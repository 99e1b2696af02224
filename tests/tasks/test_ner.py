"""NER: entity-level scores against seqeval (the independent reference), CoNLL reading and its errors, windows
for long sentences, and run_ner end to end on a small CoNLL-format corpus."""

import os
import random
import subprocess
import sys

import pytest

from bert_tf.tasks import DataError, metrics, ner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_entity_scores_equal_seqeval_on_random_tag_sequences():
    from seqeval.metrics import f1_score, precision_score, recall_score

    rng = random.Random(0)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "E-LOC", "S-PER"]  # IOB1, IOB2 and IOBES mixed
    for _ in range(500):
        gold = [[rng.choice(tags) for _ in range(rng.randrange(1, 12))] for _ in range(rng.randrange(1, 5))]
        predicted = [[rng.choice(tags) for _ in sentence] for sentence in gold]
        ours = metrics.entity_scores(predicted, gold)
        assert ours["precision"] == pytest.approx(precision_score(gold, predicted, zero_division=0), abs=1e-12)
        assert ours["recall"] == pytest.approx(recall_score(gold, predicted, zero_division=0), abs=1e-12)
        assert ours["f1"] == pytest.approx(f1_score(gold, predicted, zero_division=0), abs=1e-12)
    assert metrics.entities(["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC"]) == {("PER", 0, 1), ("LOC", 3, 4),
                                                                                   ("LOC", 5, 5)}


def test_conll_reading_and_errors(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n")
    sentences = ner.read_sentences(str(path))
    assert [(s.words, s.tags) for s in sentences] == [(["EU", "rejects"], ["B-ORG", "O"]), (["Peter"], ["B-PER"])]
    assert ner.tag_set(sentences) == ["O", "B-ORG", "B-PER"]
    (tmp_path / "valid.txt").write_text("Paris B-LOC\n")
    dev = ner.read_sentences(str(tmp_path / "valid.txt"))
    with pytest.raises(DataError, match=r"valid.txt:1: tag 'B-LOC' does not occur in the training data"):
        ner.check_tags(dev, ner.tag_set(sentences), str(tmp_path / "valid.txt"))
    (tmp_path / "bad.txt").write_text("EU B-ORG\nlonely\n")
    with pytest.raises(DataError, match="bad.txt:2: expected 'word ... tag'"):
        ner.read_sentences(str(tmp_path / "bad.txt"))


def test_long_sentences_are_split_into_windows_of_whole_words(minilm_dir):
    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(os.path.join(minilm_dir, "vocab.txt"))
    words = [f"token{i}" for i in range(40)]  # several pieces each
    sentence = ner.Sentence(words, ["B-PER"] + ["O"] * 39, 1)
    inputs, labels, weights, spans = ner.encode([sentence], tokenizer, ["O", "B-PER"], max_seq_length=16)
    assert len(spans) > 3 and sum(len(w) for _, _, w in spans) == 40
    assert [first for _, first, _ in spans] == sorted(first for _, first, _ in spans)
    assert (inputs["input_mask"].sum(1) <= 16).all() and weights.sum() == 40  # one weighted piece per word
    assert labels[0, 1] == 1 and weights[0, 1] == 1  # the first word's first piece carries B-PER
    _, all_labels, all_weights, _ = ner.encode([sentence], tokenizer, ["O", "B-PER"], 16, label_all_subtokens=True)
    assert all_weights.sum() == sum(len(tokenizer.tokenize(w)) for w in words)


def _corpus(directory, seed):
    from bench.common import docstring_lines

    rng = random.Random(seed)
    plain = [w for line in docstring_lines()[:2000] for w in line.split() if w.isalpha() and w.islower()]
    people = [["Alice"], ["Bob"], ["Carol", "Smith"], ["David", "Jones"]]
    places = [["Paris"], ["London"], ["New", "York"], ["Rio", "de", "Janeiro"]]

    def sentence(length):
        words, tags = [], []
        while len(words) < length:
            roll = rng.random()
            if roll < 0.15:
                kind, name = rng.choice([("PER", rng.choice(people)), ("LOC", rng.choice(places))])
                words += name
                tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(name) - 1)
            else:
                words.append(rng.choice(plain))
                tags.append("O")
        return words, tags

    directory.mkdir(exist_ok=True)
    for name, count in (("train.txt", 150), ("valid.txt", 50), ("test.txt", 20)):
        with open(directory / name, "w", encoding="utf-8") as f:
            f.write("-DOCSTART- -X- -X- O\n\n")
            for k in range(count):
                words, tags = sentence(60 if k == 0 else rng.randrange(5, 15))  # one long sentence each
                f.write("".join(f"{w} X X {t}\n" for w, t in zip(words, tags)) + "\n")
    return directory


def test_run_ner_cli_tags_entities(minilm_dir, tmp_path):
    data = _corpus(tmp_path / "conll", 0)
    out = subprocess.run([sys.executable, "-m", "bert_tf.cli.run_ner", f"--data_dir={data}",
                          f"--vocab_file={minilm_dir}/vocab.txt", f"--bert_config_file={minilm_dir}/config.json",
                          f"--init_checkpoint={minilm_dir}", "--do_train", "--do_eval", "--do_predict",
                          "--max_seq_length=32", "--train_batch_size=16", "--learning_rate=2e-4",
                          "--num_train_epochs=3", f"--output_dir={tmp_path / 'out'}"], capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT), cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    results = dict(line.split(" = ") for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines())
    print(f"CoNLL-format task: dev entity F1 {float(results['eval_f1']):.3f}")
    assert float(results["eval_f1"]) > 0.8
    predictions = (tmp_path / "out" / "test_predictions.txt").read_text().split("\n\n")
    gold_words = [s.words for s in ner.read_sentences(str(data / "test.txt"))]
    assert [[line.split()[0] for line in block.splitlines()] for block in predictions if block.strip()] == gold_words


def test_tfds_sources_for_squad_and_conll(minilm_dir, tmp_path):
    """Prepared TFDS data (offline mock data here) feed run_squad and run_ner like the files do."""
    import tensorflow_datasets as tfds

    from bert_tf import BertConfig
    from bert_tf.tasks.span_qa import SquadOptions, run_squad
    from bert_tf.tasks.tagging import NerOptions, run_ner

    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    vocab = os.path.join(minilm_dir, "vocab.txt")
    import tensorflow as tf

    def conll(self, split, **kwargs):  # aligned tokens and tags (the generic mock draws their lengths apart)
        rng = random.Random(split)
        rows = [[rng.choice(["Paris", "is", "big", "Bob", "runs"]) for _ in range(rng.randrange(2, 9))]
                for _ in range(12)]
        return tf.data.Dataset.from_generator(
            lambda: ({"tokens": r, "ner": [1 if w in ("Bob", "Paris") else 0 for w in r], "pos": [0] * len(r),
                      "chunks": [0] * len(r)} for r in rows),
            output_signature={k: tf.TensorSpec([None], tf.string if k == "tokens" else tf.int64)
                              for k in ("tokens", "ner", "pos", "chunks")})

    with tfds.testing.mock_data(num_examples=12, as_dataset_fn=conll):
        ner_results = run_ner(config, vocab, str(tmp_path / "ner"), NerOptions(
            do_train=True, do_eval=True, max_seq_length=24, train_batch_sizes=4, num_train_epochs=1), None,
            tfds_name="conll2003")
        assert set(ner_results["dev"]) == {"precision", "recall", "f1"}
    with tfds.testing.mock_data(num_examples=12):
        squad_results = run_squad(config, vocab, str(tmp_path / "squad"), SquadOptions(
            do_train=True, do_predict=True, version_2_with_negative=True, max_seq_length=64, doc_stride=32,
            train_batch_sizes=4, num_train_epochs=1), tfds_name="squad/v2.0")
    assert {"exact", "f1", "best_f1_thresh"} <= set(squad_results["predict"])
    assert (tmp_path / "squad" / "predictions.json").exists() and (tmp_path / "squad" / "null_odds.json").exists()
