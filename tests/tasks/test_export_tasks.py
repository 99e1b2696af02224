"""export of the span-QA, tagger, multiple-choice and masked-LM kinds and the encoder's `mlm` sub-object: each
from a tiny model (random weights, heads scaled up so that decisions are not float ties), reloaded from a copied
directory in a fresh process that imports only tensorflow and tensorflow_text, compared with the library's own
prediction path on the Keras model (SQuAD: window_features + postprocess; NER: run_ner's SentenceEncoder +
word_tags), and, for windows, with the original's window loop and max-context rule written out in plain Python."""

import os

import numpy as np
import pytest

from tests.export.test_export import _load_elsewhere

VOCAB_SIZE = 30522
LONG = " ".join(f"word{i % 7} and the cat sat." for i in range(40))  # many windows at seq 48


def _config():
    from bert_tf import BertConfig

    return BertConfig(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64)


def _sharpen(head, factor=200.0):
    for weight in head.weights:
        weight.assign(weight * factor)


def _model_dir(tmp_path, model, task, options, vocab, extra):
    from bert_tf import finetuning

    directory = tmp_path / "model"
    directory.mkdir()
    result = finetuning.GridResult(model, finetuning.Cell(32, 5e-5, 3.0, 0), 0, [])
    finetuning.save(result, task, _config(), vocab, str(directory), options, **extra)
    return directory


def _windows(n, room, stride):
    """The original run_squad's window loop, and one empty window for an empty context (`windows.plan`)."""
    spans, start = [], 0
    while start < n:
        length = min(n - start, room)
        spans.append((start, length))
        if start + length == n:
            break
        start += min(length, stride)
    return spans or [(0, 0)]


def test_windows_match_the_original_loop_and_max_context():
    import tensorflow as tf

    from tests.reference.squad_features import _max_context
    from bert_tf.tasks import windows

    rng = np.random.default_rng(0)
    for _ in range(100):
        lengths = rng.integers(0, 40, size=rng.integers(1, 5))
        room, stride = rng.integers(1, 12, size=len(lengths)), int(rng.integers(1, 10))
        example, start, length = [t.numpy() for t in windows.plan(tf.constant(lengths), tf.constant(room), stride)]
        want = [(b, s, l, spans, i) for b, n in enumerate(lengths)
                for spans in [_windows(n, room[b], stride)] for i, (s, l) in enumerate(spans)]
        assert [w[:3] for w in want] == list(zip(example, start, length))
        width = int(room.max())
        best = windows.max_context(tf.constant(example), tf.constant(start), tf.constant(length), width).numpy()
        for w, (_, s, l, spans, i) in enumerate(want):
            assert list(best[w]) == [j < l and _max_context(spans, i, s + j) for j in range(width)]
    text = tf.constant(["héllo wörld", "", "東京 x"])
    chars = windows.char_offsets(text, tf.constant([[0, 1, 3, 13], [0, 0, 0, 0], [0, 3, 6, 8]])).numpy()
    np.testing.assert_array_equal(chars, [[0, 1, 2, 11], [0, 0, 0, 0], [0, 1, 2, 4]])


@pytest.mark.parametrize("version_2", [False, True])
def test_span_qa_export_answers_like_run_squad(minilm_dir, tmp_path, version_2):
    from bert_tf.tasks.span_qa import SquadOptions, squad_task
    from bert_tf.models import BertEncoder, BertSpanQA
    from bert_tf.tasks import squad
    from bert_tf.tokenization import FullTokenizer
    from export.exporting import export

    vocab = os.path.join(minilm_dir, "vocab.txt")
    contexts = ["The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a "
                "region in France (1895-1943).", LONG, "Naïve café owners in 東京 opened déjà vu bars in 1999.", "",
                "Short."]
    questions = ["Who gave their name to Normandy?", "Where did the cat sit and what did word3 do there?",
                 "Where are the cafés?", "Anything?", "What is this question about that is long " * 4]
    data = [{"paragraphs": [{"context": c, "qas": [{"id": str(i), "question": q, "answers": [],
                                                   "is_impossible": True}]}]}
            for i, (q, c) in enumerate(zip(questions, contexts))]
    examples = squad.parse_examples(data, False, True, "test")
    model = BertSpanQA(BertEncoder(_config()))
    _sharpen(model.head)
    tokenizer = FullTokenizer(vocab)
    features, inputs = squad.window_features(examples, vocab, max_seq_length=48, doc_stride=12, max_query_length=12)
    assert len(features) > len(examples) + 5  # the long context is windowed
    logits = model.predict(inputs, verbose=0)
    _, _, _, odds = squad.postprocess(examples, features, logits["start_logits"], logits["end_logits"], tokenizer,
                                      version_2=True)
    # some null answers, some not: the threshold sits in the wider of the two middle gaps between the examples' null
    # odds, not on one of them, where the export's float32 rounding (TensorFlow's portable ops, not this process's
    # oneDNN kernels) could tip that example either way
    ordered = sorted(odds.values())
    middle = max((1, 2), key=lambda i: ordered[i + 1] - ordered[i])
    threshold = (ordered[middle] + ordered[middle + 1]) / 2 if version_2 else None
    want, *_ = squad.postprocess(examples, features, logits["start_logits"], logits["end_logits"], tokenizer,
                                 version_2=version_2, null_threshold=threshold or 0.0)
    directory = _model_dir(tmp_path, model, squad_task(version_2), SquadOptions(max_seq_length=48), vocab,
                           {"doc_stride": 12, "max_query_length": 12, "max_answer_length": 30,
                            "version_2_with_negative": version_2, "null_score_diff_threshold": threshold})
    report = export("span_qa", str(tmp_path / "qa"), model_dir=str(directory))
    assert report["unlisted"] == [] and report["min_serving"] == "2.15.1", " ".join(report["unlisted"])
    served, copy = _load_elsewhere(tmp_path / "qa", tmp_path, "serving_default",
                                   {"question": questions, "context": contexts})
    expected = [want[str(i)] if want[str(i)] != "empty" else "" for i in range(len(contexts))]
    assert served["answer"] == expected
    if version_2:
        assert "" in expected and any(expected)  # both branches of the threshold ran
        np.testing.assert_allclose(served["null_score_diff"], [odds[str(i)] for i in range(len(contexts))],
                                   rtol=1e-4, atol=1e-3)
    for context, answer, start, end in zip(contexts, served["answer"], served["start"], served["end"]):
        assert (context[start:end] == answer) if answer else (start, end) == (-1, -1)
    # an empty batch is answered with empty outputs, as the classifier's and the tagger's
    import tensorflow as tf

    serve = tf.saved_model.load(str(copy)).signatures["serving_default"]
    empty = tf.constant([], tf.string)
    answered = serve(question=empty, context=empty)
    assert answered.keys() == served.keys() and all(value.shape[0] == 0 for value in answered.values())
    # invalid UTF-8 is dropped before tokenizing, as the original does: the answer and offsets are of the rest
    i = next(i for i, answer in enumerate(served["answer"]) if answer)
    dirty = serve(question=tf.constant([questions[i]]), context=tf.constant([b"\xff\xfe" + contexts[i].encode()]))
    assert (dirty["answer"][0].numpy().decode(), int(dirty["start"][0]), int(dirty["end"][0])) == \
        (served["answer"][i], served["start"][i], served["end"][i])


def _reference_tags(model, tokenizer, words, tags, seq, stride):
    """Word tags with the original's windows and max-context rule, in plain Python (tags read at first pieces)."""
    from tests.reference.squad_features import _max_context

    pieces, first = [], []
    for word in words:
        first.append(len(pieces))
        pieces += tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word) or ["[UNK]"])
    spans = _windows(len(pieces), seq - 2, stride)
    ids = np.zeros((len(spans), seq), np.int32)
    for row, (start, length) in enumerate(spans):
        window = [tokenizer.vocab["[CLS]"]] + pieces[start:start + length] + [tokenizer.vocab["[SEP]"]]
        ids[row, :len(window)] = window
    logits = model.predict({"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                            "input_type_ids": np.zeros_like(ids)}, verbose=0)["logits"]
    out = []
    for position in first:
        row = next(i for i, (s, l) in enumerate(spans) if s <= position < s + l and _max_context(spans, i, position))
        out.append(tags[int(logits[row, position - spans[row][0] + 1].argmax())])
    return out


@pytest.mark.parametrize("probe", [None, "weighted_sum_all"], ids=["fine-tuned", "feature-based probe"])
def test_tagger_export_tags_words_with_offsets(minilm_dir, tmp_path, probe):
    """The tagger export of a fine-tuned tagger, and of run_ner --feature_based's probe (frozen encoder, scalar mix,
    BiLSTMs), which task.json's feature_based and lstm_units rebuild."""
    from bert_tf.tasks.tagging import NerOptions
    from bert_tf.models import BertEncoder, BertFeatureTagger, BertTokenClassifier
    from bert_tf.tasks import get_task, ner, task_info
    from bert_tf.tasks.tag_features import SentenceEncoder
    from bert_tf.tokenization import FullTokenizer
    from export.exporting import export

    vocab = os.path.join(minilm_dir, "vocab.txt")
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    texts = ["John Smith lives in Paris .", "Zoë went to Ünterwald , then home", "", LONG.replace(".", " .")]
    if probe:
        model = BertFeatureTagger(BertEncoder(_config()), num_classes=len(tags), combination=probe, lstm_units=8)
        (gamma,) = [w for w in model.combine.weights if w.path.endswith("gamma")]
        gamma.assign(3.0)  # the mix's scale, which the export must carry
    else:
        model = BertTokenClassifier(BertEncoder(_config()), num_classes=len(tags))
    _sharpen(model.head)
    task = get_task("conll2003")
    probe_fields = {"feature_based": probe, "lstm_units": 8} if probe else {}
    directory = _model_dir(tmp_path, model, type(task)(**{**task.__dict__, "labels": tuple(tags)}),
                           NerOptions(max_seq_length=24, doc_stride=8, **probe_fields), vocab,
                           {"doc_stride": 8, **probe_fields})
    info = task_info.read(str(directory))
    assert info.doc_stride == 8 and (info.feature_based, info.lstm_units) == ((probe, 8) if probe else (None, None))
    report = export("tagger", str(tmp_path / "tagger"), model_dir=str(directory))  # the stride: from task.json
    assert report["unlisted"] == [] and report["min_serving"] == "2.15.1", " ".join(report["unlisted"])
    served, copy = _load_elsewhere(tmp_path / "tagger", tmp_path, "serving_default", {"text": texts})
    tokenizer = FullTokenizer(vocab)
    sentences = [ner.Sentence(t.split(), [], 0) for t in texts]
    encoded = SentenceEncoder(vocab, True, tags, 24, doc_stride=8)(sentences)  # run_ner's prediction path
    library = encoded.word_tags(model.predict(encoded.inputs, verbose=0)["logits"], tags)
    assert len(set(encoded.read[3][0])) > 10  # the long text spans many windows
    for row, text in enumerate(texts):
        count = served["num_words"][row]
        words = served["words"][row][:count]
        assert words == text.split()  # these texts split into words at spaces only
        assert served["tags"][row][:count] == library[row]
        assert served["tags"][row][:count] == _reference_tags(model, tokenizer, words, tags, 24, 8)
        for word, start, end in zip(words, served["start"][row], served["end"][row]):
            assert text[start:end] == word
        assert served["tags"][row][count:] == [""] * (len(served["tags"][row]) - count)
    assert (copy / "assets" / "labels.txt").read_text().split() == tags
    if not probe:  # invalid UTF-8 is dropped before tokenizing, as the original does: words and offsets of the rest
        import tensorflow as tf

        dirty = tf.saved_model.load(str(copy)).signatures["serving_default"](
            text=tf.constant([b"\xff" + texts[1].encode().replace(b" ", b" \xfe\xfe", 1)]))
        count = served["num_words"][1]
        assert [w.decode() for w in dirty["words"][0].numpy()[:count]] == served["words"][1][:count]
        assert dirty["start"][0].numpy()[:count].tolist() == served["start"][1][:count]
        assert dirty["tags"][0].numpy()[:count].astype(str).tolist() == served["tags"][1][:count]


def test_multiple_choice_export_scores_endings(minilm_dir, tmp_path):
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks.multiple_choice import FAMILY as MULTIPLE_CHOICE
    from bert_tf.models import BertEncoder, BertMultipleChoice
    from bert_tf.tasks import Example, get_task
    from export.exporting import export

    vocab = os.path.join(minilm_dir, "vocab.txt")
    model = BertMultipleChoice(BertEncoder(_config()))
    _sharpen(model.head, 20.0)
    directory = _model_dir(tmp_path, model, get_task("swag"), FinetuneOptions(max_seq_length=24), vocab,
                           {"pairs": True})
    contexts = ["She opened the door.", "The chef — naïve — cooked " + "a lot " * 50]
    endings = [["She walked in.", "A cat flew.", "", "The door ate lunch."],
               ["Dinner was served.", "x", "The oven sang.", "Café!"]]
    report = export("multiple_choice", str(tmp_path / "mc"), model_dir=str(directory))
    assert report["unlisted"] == [] and report["min_serving"] == "2.15.1", " ".join(report["unlisted"])
    served, _ = _load_elsewhere(tmp_path / "mc", tmp_path, "serving_default",
                                {"context": contexts, "endings": endings})
    logits = model.predict(MULTIPLE_CHOICE.features([Example(str(i), c, choices=tuple(e)) for i, (c, e) in
                                                     enumerate(zip(contexts, endings))], vocab, True, 24),
                           verbose=0)["logits"]
    want = np.exp(logits - logits.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(served["probabilities"], want, atol=1e-5)
    assert served["best"] == list(want.argmax(-1))


def test_mlm_and_encoder_exports_fill_masks(minilm_dir, tmp_path):
    import tensorflow as tf

    from bert_tf import checkpoints
    from bert_tf.models import BertEncoder, BertPretrainer
    from bert_tf.tokenization import FullTokenizer, pack_inputs
    from export.exporting import export

    vocab = os.path.join(minilm_dir, "vocab.txt")
    pretrainer = BertPretrainer(BertEncoder(_config()))
    pretrainer.masked_lm.output_bias.assign(np.random.default_rng(0).normal(0, 3, VOCAB_SIZE))
    checkpoints.save_original(pretrainer, str(tmp_path / "ckpt" / "bert_model.ckpt"))
    _config().to_json_file(str(tmp_path / "bert_config.json"))
    texts = ["The [MASK] sat on the [MASK].", "No mask here, naïve café.", "[MASK]", "[MASK] " * 40]
    export("mlm", str(tmp_path / "mlm"), bert_config_file=str(tmp_path / "bert_config.json"),
           init_checkpoint=str(tmp_path / "ckpt" / "bert_model.ckpt"), vocab_file=vocab, seq_length=16, top_k=3)
    served, _ = _load_elsewhere(tmp_path / "mlm", tmp_path, "serving_default", {"text": texts})

    tokenizer = FullTokenizer(vocab)
    mask = tokenizer.vocab["[MASK]"]
    for row, text in enumerate(texts):
        ids = []
        for k, part in enumerate(text.split("[MASK]")):
            ids += ([mask] if k else []) + tokenizer.convert_tokens_to_ids(tokenizer.tokenize(part))
        packed = pack_inputs(ids, None, 16, vocab=tokenizer.vocab)
        positions = [i for i, t in enumerate(packed["input_word_ids"]) if t == mask]
        assert served["num_masks"][row] == len(positions)
        if not positions:
            continue
        batch = {k: np.array([v], np.int32) for k, v in packed.items()}
        batch["masked_lm_positions"] = np.array([positions], np.int32)
        logits = pretrainer.predict(batch, verbose=0)["mlm_logits"][0]
        probabilities = tf.nn.softmax(logits).numpy()
        top = np.argsort(-probabilities, axis=-1)[:, :3]
        assert served["top_tokens"][row][:len(positions)] == [tokenizer.convert_ids_to_tokens(r) for r in top]
        np.testing.assert_allclose(served["top_probabilities"][row][:len(positions)],
                                   np.take_along_axis(probabilities, top, -1), atol=1e-5)

    # the TF-Hub-style encoder from the same checkpoint carries the `mlm` sub-object
    export("encoder", str(tmp_path / "enc"), bert_config_file=str(tmp_path / "bert_config.json"),
           init_checkpoint=str(tmp_path / "ckpt" / "bert_model.ckpt"))
    loaded = tf.saved_model.load(str(tmp_path / "enc"))
    batch = {k: tf.constant(v) for k, v in pack_inputs(tokenizer.convert_tokens_to_ids(["the", "[MASK]"]), None, 8,
                                                       vocab=tokenizer.vocab).items()}
    batch = {k: v[None] for k, v in batch.items()}
    batch["masked_lm_positions"] = tf.constant([[2]], tf.int32)
    np.testing.assert_allclose(loaded.mlm(batch)["mlm_logits"].numpy(),
                               pretrainer.predict({k: v.numpy() for k, v in batch.items()}, verbose=0)["mlm_logits"],
                               atol=1e-4)
