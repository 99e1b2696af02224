"""NER: entity-level scores against seqeval's (the independent reference, tests/reference/seqeval_scores.py),
CoNLL reading and its errors, the in-graph windows, labels and read positions of long sentences against a
plain-Python reference, and run_ner end to end on a small CoNLL-format corpus."""

import os
import random

import numpy as np
import pytest

from bert_tf.tasks import DataError, metrics, ner

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_entity_report_equals_seqeval_on_random_tag_sequences():
    """seqeval's scores of 500 random cases (overall, per type, token accuracy), from
    tests/reference/seqeval_scores.py (which says how to rerun it)."""
    import json

    from tests.reference import seqeval_scores

    with open(seqeval_scores.PATH, encoding="utf-8") as f:
        golden = json.load(f)
    assert golden["seqeval"] == "1.2.2"
    cases = seqeval_scores.cases()
    assert len(cases) == len(golden["scores"]) == 500
    for (gold, predicted), want in zip(cases, golden["scores"]):
        ours = metrics.entity_report(predicted, gold)
        for name in ("precision", "recall", "f1", "accuracy"):
            assert ours["all"][name] == pytest.approx(want[name], abs=1e-12), (gold, predicted, name)
        assert set(ours) - {"all"} == set(want["by_type"]), (gold, predicted)
        for kind, figures in want["by_type"].items():
            assert ours[kind] == pytest.approx(figures, abs=1e-12), (gold, predicted, kind)
    assert metrics.entities(["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC"]) == {("PER", 0, 1), ("LOC", 3, 4),
                                                                                   ("LOC", 5, 5)}


def test_conll_reading_and_errors(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n")
    sentences = ner.read_sentences(str(path))
    assert [(s.words, s.tags) for s in sentences] == [(["EU", "rejects"], ["B-ORG", "O"]), (["Peter"], ["B-PER"])]
    assert ner.tag_set(sentences) == ["O", "B-ORG", "B-PER"]
    assert [s.document for s in sentences] == [0, 0]
    (tmp_path / "docs.txt").write_text("A O\n\n-DOCSTART- O\nB O\n\nC O\n-DOCSTART- O\n-DOCSTART- O\n\nD O\n")
    assert [(s.words, s.document) for s in ner.read_sentences(str(tmp_path / "docs.txt"))] == [
        (["A"], 0), (["B"], 1), (["C"], 1), (["D"], 2)]  # an empty document is no document
    (tmp_path / "plain.txt").write_text("A O\n\nB O\n")
    assert [s.document for s in ner.read_sentences(str(tmp_path / "plain.txt"))] == [None, None]
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # a byte-order mark before -DOCSTART- (Windows editors)
    assert [(s.words, s.tags, s.line) for s in ner.read_sentences(str(path))] == [
        (s.words, s.tags, s.line) for s in sentences]
    (tmp_path / "valid.txt").write_text("Paris B-LOC\n")
    dev = ner.read_sentences(str(tmp_path / "valid.txt"))
    with pytest.raises(DataError, match=r"valid.txt:1: tag 'B-LOC' does not occur in the training data"):
        ner.check_tags(dev, ner.tag_set(sentences), str(tmp_path / "valid.txt"))
    (tmp_path / "bad.txt").write_text("EU B-ORG\nlonely\n")
    with pytest.raises(DataError, match="bad.txt:2: expected 'word ... tag'"):
        ner.read_sentences(str(tmp_path / "bad.txt"))


def _reference_windows(words, tags, tag_names, seq, stride, all_pieces):
    """Plain-Python windows, labels, weights and read positions: the original run_squad's window loop and
    max-context rule (tests/reference/squad_features.py) applied to a sentence's pieces, a word's tag on its first
    piece (and, with `all_pieces`, on its other pieces as I-)."""
    from tests.reference.squad_features import _max_context
    from tests.tasks.test_export_tasks import _windows

    index = {t: i for i, t in enumerate(tag_names)}
    pieces, first, piece_label, piece_weight = [], [], [], []
    for word, tag in zip(words, tags):
        first.append(len(pieces))
        for k, piece in enumerate(word):
            pieces.append(piece)
            inner = "I-" + tag[2:] if k and tag.startswith("B-") and "I-" + tag[2:] in index else tag
            piece_label.append(index[inner] if k == 0 or all_pieces else 0)
            piece_weight.append(1.0 if k == 0 or all_pieces else 0.0)
    spans = _windows(len(pieces), seq - 2, stride)
    ids = np.zeros((len(spans), seq), np.int64)
    labels, weights = np.zeros((len(spans), seq), np.int64), np.zeros((len(spans), seq), np.float32)
    for row, (start, length) in enumerate(spans):
        ids[row, :length + 2] = [101] + pieces[start:start + length] + [102]
        labels[row, 1:length + 1] = piece_label[start:start + length]
        weights[row, 1:length + 1] = piece_weight[start:start + length]
    read = []
    for position in first:
        row = next(i for i, (s, n) in enumerate(spans) if s <= position < s + n and _max_context(spans, i, position))
        read.append((row, position - spans[row][0] + 1))
    return ids, labels, weights, read


@pytest.mark.parametrize("all_pieces", [False, True])
def test_tag_windows_equal_the_plain_python_windows_labels_and_reads(all_pieces):
    import tensorflow as tf

    from bert_tf.tasks.tag_features import tag_windows

    tag_names = ["O", "B-PER", "I-PER", "B-LOC"]  # B-LOC has no I-LOC: its later pieces keep B-LOC
    inner = [0, 2, 2, 3]
    rng = np.random.default_rng(0)
    sentences = []
    for n in (1, 3, 17, 30, 2):  # several windows for the longer ones, words cut at window edges
        words = [list(rng.integers(1000, 2000, size=rng.integers(1, 5))) for _ in range(n)]
        sentences.append((words, [tag_names[t] for t in rng.integers(0, 4, size=n)]))
    seq, stride = 10, 3
    pieces = tf.ragged.constant([[list(map(int, w)) for w in words] for words, _ in sentences], tf.int64,
                                ragged_rank=2)
    tags = tf.ragged.constant([[tag_names.index(t) for t in tags] for _, tags in sentences], tf.int64)
    out = tag_windows(pieces, seq, stride, 101, 102, word_tags=tags, inner_tags=tf.constant(inner, tf.int64),
                      label_all_subtokens=all_pieces)
    offset = 0
    for k, (words, tags_) in enumerate(sentences):
        ids, labels, weights, read = _reference_windows(words, tags_, tag_names, seq, stride, all_pieces)
        rows = np.flatnonzero(out["example"].numpy() == k)
        assert list(rows) == list(range(offset, offset + len(ids)))
        np.testing.assert_array_equal(out["input_word_ids"].numpy()[rows], ids)
        np.testing.assert_array_equal(out["input_mask"].numpy()[rows], (ids > 0).astype(np.int32))
        np.testing.assert_array_equal(out["labels"].numpy()[rows], labels)
        np.testing.assert_array_equal(out["weights"].numpy()[rows], weights)
        assert list(zip(out["read_window"][k].numpy() - offset, out["read_position"][k].numpy())) == read
        offset += len(ids)
    assert offset == len(out["example"]) and offset > len(sentences) + 4


def test_sentence_encoder_tokenizes_words_as_the_tokenizer_does(minilm_dir):
    from bert_tf.tasks.tag_features import SentenceEncoder
    from bert_tf.tokenization import FullTokenizer

    vocab = os.path.join(minilm_dir, "vocab.txt")
    tokenizer = FullTokenizer(vocab)
    words = [f"token{i}" for i in range(40)] + ["U.S.", "\u200b", "Zoë"]  # several pieces; none; accents
    sentence = ner.Sentence(words, ["B-PER"] + ["O"] * (len(words) - 1), 1)
    encoded = SentenceEncoder(vocab, True, ["O", "B-PER"], 16, doc_stride=5)([sentence, sentence])
    pieces = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w) or ["[UNK]"]) for w in words]
    flat = [p for word in pieces for p in word]
    windows, positions = encoded.read[1]
    ids = encoded.inputs["input_word_ids"]
    assert len(set(windows)) > 5 and min(windows) >= len(ids) // 2  # the second sentence's windows
    assert [ids[w, p] for w, p in zip(windows, positions)] == [word[0] for word in pieces]
    first = np.flatnonzero(encoded.weights[0])  # window 0 starts at the first piece: its words' first pieces
    assert encoded.labels[0, 1] == 1 and list(ids[0, first]) == [word[0] for word in pieces][:len(first)]
    assert list(ids[0, 1:15]) == flat[:14] and encoded.labels[0, 2:].sum() == 0


def test_document_context_encodes_each_document_as_one_row(minilm_dir):
    """With document context, a document's sentences are windowed as one row (the same windows, labels and reads
    as the merged sentence), each sentence reading its own words; unmarked sentences stay alone."""
    from bert_tf.tasks.tag_features import SentenceEncoder

    def sentence(words, document):
        return ner.Sentence(words.split(), ["B-PER"] + ["O"] * (len(words.split()) - 1), 1, document)

    document = [sentence("Alice met the visiting delegation", 0), sentence("She spoke", 0),
                sentence("Bob listened carefully to every word of it", 0)]
    rest = [sentence("Carol left early", 1), sentence("David stayed", None), sentence("Eve too", None)]
    encoder = SentenceEncoder(os.path.join(minilm_dir, "vocab.txt"), True, ["O", "B-PER"], 8, doc_stride=3)
    together = encoder(document + rest, document_context=True)
    merged = ner.Sentence([w for s in document for w in s.words], [t for s in document for t in s.tags], 1, 0)
    want = encoder([merged] + rest)
    for key in want.inputs:
        np.testing.assert_array_equal(together.inputs[key], want.inputs[key])
    np.testing.assert_array_equal(together.labels, want.labels)
    np.testing.assert_array_equal(together.weights, want.weights)
    assert len(together.read) == len(document + rest)
    joined = [np.concatenate([together.read[k][i] for k in range(3)]) for i in (0, 1)]
    np.testing.assert_array_equal(joined[0], want.read[0][0])
    np.testing.assert_array_equal(joined[1], want.read[0][1])
    for k in range(3, 6):
        np.testing.assert_array_equal(together.read[k][0], want.read[k - 2][0])
    # "She" is read from a window that also holds words of the sentences around it
    with open(os.path.join(minilm_dir, "vocab.txt"), encoding="utf-8") as f:
        vocab = f.read().split("\n")
    window = [vocab[i] for i in together.inputs["input_word_ids"][together.read[1][0][0]]]
    assert "she" in window and {"the", "visiting", "bob", "listened"} & set(window), window
    alone = encoder(document + rest)  # sentence by sentence
    assert [vocab[i] for i in alone.inputs["input_word_ids"][alone.read[1][0][0]]][:4] == ["[CLS]", "she", "spoke",
                                                                                           "[SEP]"]


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
    """Trained in document context (the files mark documents); conlleval's figures, per type too, for dev and test."""
    import json

    data = _corpus(tmp_path / "conll", 0)
    out = forking.python(["-m", "bert_tf.cli.run_ner", f"--data_dir={data}",
                          f"--vocab_file={minilm_dir}/vocab.txt", f"--bert_config_file={minilm_dir}/config.json",
                          f"--init_checkpoint={minilm_dir}", "--do_train", "--do_eval", "--do_predict",
                          "--max_seq_length=32", "--train_batch_size=16", "--learning_rate=2e-4",
                          "--num_train_epochs=2", f"--output_dir={tmp_path / 'out'}"],
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    results = dict(line.split(" = ") for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines())
    print(f"CoNLL-format task: dev entity F1 {float(results['eval_f1']):.3f}")
    assert float(results["eval_f1"]) > 0.8
    dev = ner.read_sentences(str(data / "valid.txt"))
    assert int(results["eval_PER_gold"]) + int(results["eval_LOC_gold"]) == sum(
        len(metrics.entities(s.tags)) for s in dev)
    assert 0.8 < float(results["eval_accuracy"]) <= 1 and float(results["eval_PER_f1"]) > 0.5
    test = dict(line.split(" = ") for line in (tmp_path / "out" / "test_results.txt").read_text().splitlines())
    assert {"test_f1", "test_accuracy", "test_LOC_recall", "global_step"} <= set(test)
    assert f"run_ner: test: accuracy {float(test['test_accuracy']):.4f}" in out.stdout
    assert json.loads((tmp_path / "out" / "task.json").read_text())["document_context"] is True
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
        assert split in ("train", "dev", "test"), split  # the conll2003 builder's split names
        rng = random.Random(split)
        rows = [[rng.choice(["Paris", "is", "big", "Bob", "runs"]) for _ in range(rng.randrange(2, 9))]
                for _ in range(12)] + [[]]  # the builder ends every file with an empty example
        return tf.data.Dataset.from_generator(
            lambda: ({"tokens": r, "ner": [1 if w in ("Bob", "Paris") else 0 for w in r], "pos": [0] * len(r),
                      "chunks": [0] * len(r)} for r in rows),
            output_signature={k: tf.TensorSpec([None], tf.string if k == "tokens" else tf.int64)
                              for k in ("tokens", "ner", "pos", "chunks")})

    with tfds.testing.mock_data(num_examples=12, as_dataset_fn=conll):
        ner_results = run_ner(config, vocab, str(tmp_path / "ner"), NerOptions(
            do_train=True, do_eval=True, do_predict=True, max_seq_length=24, train_batch_sizes=4,
            num_train_epochs=1), None, tfds_name="conll2003")
        assert set(ner_results["dev"]) == set(ner_results["test"]) == {"precision", "recall", "f1", "accuracy"}
        blocks = (tmp_path / "ner" / "test_predictions.txt").read_text().split("\n\n")
        assert len([b for b in blocks if b.strip()]) == 12 and all(b.strip() for b in blocks[:-1])
        with pytest.raises(DataError, match=r"--document_context: --tfds_name=conll2003 \(train\) marks no docum"):
            run_ner(config, vocab, str(tmp_path / "ner2"), NerOptions(
                do_train=True, max_seq_length=24, train_batch_sizes=4, document_context=True), None,
                tfds_name="conll2003")
    with tfds.testing.mock_data(num_examples=12):
        squad_results = run_squad(config, vocab, str(tmp_path / "squad"), SquadOptions(
            do_train=True, do_predict=True, version_2_with_negative=True, max_seq_length=64, doc_stride=32,
            train_batch_sizes=4, num_train_epochs=1), tfds_name="squad/v2.0")
    assert {"exact", "f1", "best_f1_thresh"} <= set(squad_results["predict"])
    assert (tmp_path / "squad" / "predictions.json").exists() and (tmp_path / "squad" / "null_odds.json").exists()


def test_feature_based_probe_learns_tags_with_bert_frozen(minilm_dir, tmp_path):
    """run_ner --feature_based (Table 7): the two-layer BiLSTM probe on frozen features learns the CoNLL-format task
    to > 0.9 entity F1 while the encoder's weights stay bit-identical to the checkpoint's; task.json records the
    probe, so an evaluation-only run rebuilds it."""
    import json

    from bert_tf import BertConfig, BertEncoder, checkpoints
    from bert_tf.finetuning import load_finetuned
    from bert_tf.tasks.tagging import NerOptions, run_ner

    data = _corpus(tmp_path / "conll", 0)
    config = BertConfig.from_json_file(os.path.join(minilm_dir, "config.json"))
    vocab = os.path.join(minilm_dir, "vocab.txt")
    options = NerOptions(do_train=True, do_eval=True, max_seq_length=32, train_batch_sizes=8, learning_rates=1e-2,
                         num_train_epochs=5, init_checkpoint=minilm_dir, feature_based="weighted_sum_last_four",
                         lstm_units=32)
    results = run_ner(config, vocab, str(tmp_path / "out"), options, str(data))
    print(f"feature-based probe: dev entity F1 {results['dev']['f1']:.3f}")
    assert results["dev"]["f1"] > 0.9
    model = load_finetuned(str(tmp_path / "out"))
    reference = BertEncoder(config)
    checkpoints.restore_weights(reference, minilm_dir)
    for ours, theirs in zip(model.encoder.weights, reference.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert len(model.trainable_weights) == 2 + 2 * 6 + 2  # scalar mix, two BiLSTMs, classifier
    saved = json.loads((tmp_path / "out" / "task.json").read_text())
    assert saved["feature_based"] == "weighted_sum_last_four" and saved["lstm_units"] == 32
    again = run_ner(config, vocab, str(tmp_path / "out"), NerOptions(do_eval=True, max_seq_length=32), str(data))
    assert again["dev"] == results["dev"]
    # a flag that says another probe, or another labelling, is refused rather than left unread
    for flags, message in ((dict(feature_based="concat_last_four"), "--feature_based=concat_last_four: the model"),
                           (dict(feature_based="weighted_sum_last_four", lstm_units=64), "--lstm_units=64: the model"),
                           (dict(label_all_subtokens=True), "--label_all_subtokens=True: the model")):
        with pytest.raises(ValueError, match=f"{message} in --output_dir=.* was fine-tuned with"):
            run_ner(config, vocab, str(tmp_path / "out"), NerOptions(do_eval=True, max_seq_length=32, **flags),
                    str(data))
    with pytest.raises(ValueError, match="--feature_based='mean': expected one of embeddings"):
        NerOptions(do_train=True, feature_based="mean").check(1)
    with pytest.raises(ValueError, match="--lstm_units=32 sizes the probe of --feature_based, which is not set"):
        NerOptions(do_train=True, lstm_units=32).check(1)
