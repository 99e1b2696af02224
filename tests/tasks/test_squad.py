"""SQuAD: the official EM/F1 on hand-made cases, reading, windowing with max context, mapping answers back to the
original text, and run_squad end to end (v1.1 CLI, v2.0 with the no-answer threshold search) on small data."""

import dataclasses
import json
import os
import random

import numpy as np
import pytest

from bert_tf.tasks import DataError, squad, squad_eval

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_official_metrics_on_hand_made_cases():
    assert squad_eval.normalize_answer("The  Cat, sat!") == "cat sat"
    assert squad_eval.exact_match("An apple.", "apple") == 1.0
    assert squad_eval.f1_score("the cat sat", "cat sat on a mat") == pytest.approx(2 * 1 * 0.5 / 1.5)  # p 1, r 2/4
    assert squad_eval.f1_score("", "") == 1.0 and squad_eval.f1_score("x", "") == 0.0
    data = [{"paragraphs": [{"context": "...", "qas": [
        {"id": "a", "answers": [{"text": "Denver Broncos"}, {"text": "the Broncos"}]},
        {"id": "b", "answers": [{"text": "1990"}]},
        {"id": "c", "answers": [], "is_impossible": True}]}]}]
    result = squad_eval.evaluate(data, {"a": "Broncos", "b": "in 1990", "c": ""})
    # a: EM 1 against "the Broncos"; b: EM 0, F1 2/3; c: no answer predicted for a no-answer question
    assert result["exact"] == pytest.approx(100 * 2 / 3)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 3)
    assert result["HasAns_total"] == 2 and result["NoAns_exact"] == 100.0
    # threshold: "b" has a high no-answer score; cutting there loses b's F1, "c" predicted non-empty at low score
    best, threshold = squad_eval.best_threshold(data, {"a": "Broncos", "b": "in 1990", "c": "x"},
                                                {"a": -3.0, "b": 2.0, "c": 5.0})
    assert (best, threshold) == (pytest.approx(100 * (1 + 2 / 3 + 1) / 3), 2.0)
    # where answering nothing is best, a threshold that gives that score when applied (the official's 0.0 does not)
    data = [{"paragraphs": [{"context": "x y", "qas": [
        {"id": "q1", "answers": [], "is_impossible": True}, {"id": "q2", "answers": [], "is_impossible": True},
        {"id": "q3", "answers": [{"text": "y"}]}]}]}]
    best_non_null, null_odds = {"q1": "x", "q2": "x", "q3": "x"}, {"q1": -1.0, "q2": 2.0, "q3": 3.0}
    best, threshold = squad_eval.best_threshold(data, best_non_null, null_odds)
    assert (best, threshold) == (pytest.approx(100 * 2 / 3), -2.0)
    applied = {q: "" if null_odds[q] > threshold else best_non_null[q] for q in best_non_null}
    assert squad_eval.evaluate(data, applied)["f1"] == pytest.approx(best)


# Answers and predictions for the comparison with the official scripts: words, articles in both cases, text that
# normalises to nothing (punctuation, articles, empty), punctuation inside words, non-ASCII letters.
PIECES = ["Denver", "Broncos", "the", "The", "a", "An", "1990", "in", ".", "!!", "", "café", "U.S.", "co-op", "ÉTÉ",
          "Panthers", "(2016)", "'s"]


def _random_dataset(rng, version_2):
    def text():
        return " ".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 4)))

    qas = []
    for i in range(60):
        answers = [{"text": text()} for _ in range(rng.randrange(0 if version_2 else 1, 4))]
        qas.append({"id": f"q{i}", "answers": answers})
    return [{"paragraphs": [{"context": "...", "qas": qas}]}]


@pytest.mark.parametrize("seed", range(8))
def test_scores_equal_the_official_scripts_of_each_version(seed):
    """Against the official v1.1 and v2.0 rules as tests/reference/squad_official.py writes them, on random questions
    whose answers and predictions include text that normalises to nothing, where the two scripts differ."""
    from tests.reference import squad_official

    rng = random.Random(seed)
    data = _random_dataset(rng, version_2=False)
    predictions = {qa["id"]: " ".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 3)))
                   for qa in data[0]["paragraphs"][0]["qas"] if rng.random() < 0.95}  # a few questions unanswered
    ours = squad_eval.evaluate(data, predictions, version_2=False)
    official = squad_official.v1_1(data, predictions)
    assert (ours["exact"], ours["f1"]) == (pytest.approx(official["exact_match"], rel=1e-12),
                                           pytest.approx(official["f1"], rel=1e-12))
    assert not any(key.startswith(("HasAns", "NoAns")) for key in ours)

    data = _random_dataset(rng, version_2=True)
    ids = [qa["id"] for qa in data[0]["paragraphs"][0]["qas"]]
    predictions = {q: " ".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 3))) for q in ids}
    na_probs = {q: round(rng.uniform(-3, 3), 1) for q in ids}  # rounded: ties, which the threshold search orders
    for probs, threshold in ((None, 1.0), (None, -1.0), (na_probs, 0.5), (na_probs, -1.0)):
        ours = squad_eval.evaluate(data, predictions, probs, threshold)
        official = squad_official.v2_0(data, predictions, probs, threshold)
        assert ours.keys() == official.keys()
        assert ours == {key: pytest.approx(value, rel=1e-12) for key, value in official.items()}
    for metric in ("f1", "exact"):
        best, at = squad_eval.best_threshold(data, predictions, na_probs, metric)
        official_best, official_at = squad_official.v2_0_best_threshold(data, predictions, na_probs, metric)
        answering_nothing = 100.0 * sum(not qa["answers"] for qa in data[0]["paragraphs"][0]["qas"]) / len(ids)
        expected_at = official_at if official_best > answering_nothing else min(na_probs.values()) - 1.0
        assert (best, at) == (pytest.approx(official_best, rel=1e-12), expected_at)


def test_data_with_an_unanswerable_question_is_scored_by_v2_rules():
    def data(*qas):
        return [{"paragraphs": [{"context": "...", "qas": list(qas)}]}]

    answered = {"id": "a", "answers": [{"text": "x"}]}
    assert not squad_eval.has_unanswerable(data(answered))
    assert squad_eval.has_unanswerable(data(answered, {"id": "b", "answers": []}))
    assert squad_eval.has_unanswerable(data({"id": "c", "answers": [{"text": "x"}], "is_impossible": True}))


def test_an_answer_of_only_articles_scores_as_each_script_scores_it():
    data = [{"paragraphs": [{"context": "...", "qas": [{"id": "q", "answers": [{"text": "The"}]}]}]}]
    # v1.1 keeps the gold "The" (normalised: empty) and shares no token with "a": EM 100, F1 0
    assert squad_eval.evaluate(data, {"q": "a"}, version_2=False) == {"exact": 100.0, "f1": 0.0, "total": 1}
    # v2.0 drops it, leaving the empty answer, which the empty prediction matches in both figures; the question
    # still counts as answerable (it has an answer)
    assert squad_eval.evaluate(data, {"q": "a"}) == {"exact": 100.0, "f1": 100.0, "total": 1, "HasAns_exact": 100.0,
                                                     "HasAns_f1": 100.0, "HasAns_total": 1}


def _squad_file(path, paragraphs):
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))
    return str(path)


def test_reading_skips_misaligned_answers_and_names_bad_files(tmp_path, caplog):
    context = "Nikola Tesla (1856-1943) was an inventor."
    path = _squad_file(tmp_path / "train.json", [{"context": context, "qas": [
        {"id": "ok", "question": "When was Tesla born?", "answers": [{"text": "1856", "answer_start": 14}]},
        {"id": "bad", "question": "Who?", "answers": [{"text": "Edison", "answer_start": 0}]}]}])
    examples, _ = squad.read_examples(path, is_training=True, version_2=False)
    assert [e.qas_id for e in examples] == ["ok"]
    assert examples[0].doc_tokens[examples[0].start_word] == "(1856-1943)"
    assert "skipped 1 training question(s) whose answer text is not at its answer_start: bad" in caplog.text
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="not a SQuAD JSON file"):
        squad.read_examples(str(tmp_path / "bad.json"), False, False)
    unanswerable = _squad_file(tmp_path / "v2.json", [{"context": context, "qas": [
        {"id": "x", "question": "Why?", "answers": [], "is_impossible": True}]}])
    with pytest.raises(DataError, match="pass --version_2_with_negative"):
        squad.read_examples(unanswerable, True, False)


def test_questions_on_one_paragraph_share_its_words_however_the_data_groups_them():
    """TFDS gives a paragraph per question: questions on the same context, in paragraphs of their own, get the
    examples that one paragraph holding them all gives, in the data's order, and share one list of its words
    (one per distinct context, not per question) and one context string."""
    first, second = "Nikola  Tesla (1856-1943) was\tan inventor.", "Paris is big."
    qas = [{"id": str(i), "question": "When?", "answers": [{"text": text, "answer_start": context.index(text)}]}
           for i, (context, text) in enumerate([(first, "1856"), (second, "big"), (first, "inventor")])]
    contexts = [first, second, first]
    alone = [{"title": "t", "paragraphs": [{"context": "".join(list(c)), "qas": [qa]} for c, qa in zip(contexts, qas)]}]
    grouped = [{"title": "t", "paragraphs": [{"context": first, "qas": [qas[0], qas[2]]},
                                            {"context": second, "qas": [qas[1]]}]}]
    got = squad.parse_examples(alone, True, False, "alone")
    want = {e.qas_id: e for e in squad.parse_examples(grouped, True, False, "grouped")}
    assert [e.qas_id for e in got] == ["0", "1", "2"] and all(e == want[e.qas_id] for e in got)
    assert got[0].doc_tokens is got[2].doc_tokens and got[0].doc_tokens[got[2].start_word] == "inventor."


def test_windows_max_context_and_the_answer_span(minilm_dir, tmp_path):
    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(os.path.join(minilm_dir, "vocab.txt"))
    words = [f"word{i}" for i in range(60)]
    words[41] = "(1856-1943)."
    context = " ".join(words)
    start = context.index("(1856")
    path = _squad_file(tmp_path / "t.json", [{"context": context, "qas": [
        {"id": "q", "question": "When?", "answers": [{"text": "1856", "answer_start": start + 1}]}]}])
    examples, _ = squad.read_examples(path, True, False)
    features, _ = squad.window_features(examples, os.path.join(minilm_dir, "vocab.txt"), max_seq_length=48,
                                        doc_stride=20, max_query_length=8, is_training=True)
    assert len(features) > 3
    assert all(len(f.input_word_ids) == 48 for f in features)
    # every context piece is the max-context token of exactly one window
    pieces = sum(len(tokenizer.tokenize(word)) for word in context.split())
    assert sum(sum(f.max_context.values()) for f in features) == pieces
    covered = {word for f in features for word in f.token_to_word.values()}
    assert covered == set(range(60))
    answered = [f for f in features if f.start_position]
    assert answered, "some window holds the answer"
    for feature in answered:
        pieces = tokenizer.convert_ids_to_tokens(feature.input_word_ids[feature.start_position:
                                                                        feature.end_position + 1])
        assert pieces == tokenizer.tokenize("1856")  # the improved span: inside "(1856-1943)."
    assert any(f.start_position == 0 for f in features)  # windows without the answer point at [CLS]


def test_answers_from_logits_follow_the_originals_write_predictions(minilm_dir):
    """Equal scores go to the earlier candidate (the original sorts stably: lower positions, then earlier spans),
    the SQuAD 2.0 null answer competes for the n-best places, and scores are summed in double precision, so a null
    odd of a few 1e-7 still decides as the original decides. Expected values are worked out from those rules."""
    import math

    from bert_tf.tokenization import FullTokenizer

    vocab = os.path.join(minilm_dir, "vocab.txt")
    tokenizer = FullTokenizer(vocab)
    data = [{"title": "t", "paragraphs": [{"context": "Paris or London.", "qas": [
        {"id": "q", "question": "who?", "answers": [], "is_impossible": True}]}]}]
    examples = squad.parse_examples(data, False, True, "t")
    features, _ = squad.window_features(examples, vocab, max_seq_length=16, doc_stride=8, max_query_length=4)
    (feature,) = features
    paris, london = (next(i for i, w in feature.token_to_word.items() if w == k) for k in (0, 2))

    def logits(**at):
        start, end = np.zeros((1, 16), np.float32), np.zeros((1, 16), np.float32)
        for position, (s, e) in at.items():
            start[0, int(position[1:])], end[0, int(position[1:])] = s, e
        return start, end

    start, end = logits(**{f"p{paris}": (5, 5), f"p{london}": (5, 5)})
    predictions, _, nbest, _ = squad.postprocess(examples, features, start, end, tokenizer, n_best_size=3)
    assert predictions["q"] == "Paris" and [i["text"] for i in nbest["q"]] == ["Paris", "Paris or London", "London"]

    start, end = logits(p0=(3, 3), **{f"p{paris}": (2.5, 2.5), f"p{london}": (2, 2)})
    _, _, nbest, _ = squad.postprocess(examples, features, start, end, tokenizer, n_best_size=3, version_2=True)
    scores = [6.0, 5.0, 4.5]  # null, Paris, Paris or London; London (4.0) is past the cut
    total = sum(math.exp(x - 6.0) for x in scores)
    assert [i["text"] for i in nbest["q"]] == ["", "Paris", "Paris or London"]
    assert [i["probability"] for i in nbest["q"]] == [math.exp(x - 6.0) / total for x in scores]
    assert set(nbest["q"][0]) == {"text", "probability", "start_logit", "end_logit"}  # the original's fields

    start, end = logits(p0=(7.3, 3.1), **{f"p{paris}": (5.7, 4.7)})
    predictions, _, _, odds = squad.postprocess(examples, features, start, end, tokenizer, version_2=True)
    f32 = [float(np.float32(x)) for x in (7.3, 3.1, 5.7, 4.7)]
    assert odds["q"] == f32[0] + f32[1] - f32[2] - f32[3] > 0  # 4.8e-7; in float32 the sums tie
    assert predictions["q"] == ""


def test_final_text_keeps_the_original_case_and_drops_extra_characters():
    assert squad.final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert squad.final_text("1856", "(1856-1943).", True) == "1856"
    assert squad.final_text("nowhere", "Steve Smith's", True) == "Steve Smith's"  # no alignment: whole words


def test_final_text_equals_the_originals_get_final_text():
    """Against the original's algorithm (tests/reference/squad_final_text.py) on seeded random words: accents,
    combining marks, CJK, controls, non-breaking and zero-width spaces; predictions cut from the tokenized words
    (so most align) and some that are not in them."""
    from bert_tf.tokenization import basic_tokenize
    from tests.reference.squad_final_text import final_text

    rng = random.Random(0)
    alphabet = list("abcXYZ  .,'-()éñÉß") + ["\u0301", "\u00a0", "\t", "中", "文", "İ", "Σ", "\x00", "\u200b"]
    aligned = 0
    for _ in range(4000):
        orig = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        lower = rng.random() < 0.7
        tokenized = " ".join(basic_tokenize(orig, lower))
        if tokenized and rng.random() < 0.8:
            first = rng.randrange(len(tokenized))
            pred = tokenized[first:rng.randrange(first, len(tokenized) + 1)]
        else:
            pred = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
        want = final_text(pred, orig, lower)
        assert squad.final_text(pred, orig, lower) == want, (pred, orig, lower)
        aligned += want != orig
    assert aligned > 300  # the mapping, not only the fall-back to the whole words, was compared


# -------------------------------------------------------------------------------------------- end to end
def _year_task(path, n, seed, version_2=False):
    """Short contexts of real docstring sentences; one sentence says when "it" was released (a four-digit year).
    The question asks when. With `version_2`, a third of the contexts lack that sentence: no answer."""
    from bench.common import docstring_lines

    lines = [line for line in docstring_lines() if 5 <= len(line.split()) <= 12 and not any(c.isdigit()
                                                                                          for c in line)]
    rng = random.Random(seed)
    paragraphs = []
    for i in range(n):
        sentences = rng.sample(lines, 2)
        answerable = not version_2 or i % 3
        year = str(rng.randrange(1900, 2020))
        if answerable:
            sentences.insert(rng.randrange(3), f"It was released in {year}.")
        context = " ".join(sentences)
        qa = {"id": f"q{i}", "question": "When was it released?"}
        if answerable:
            qa["answers"] = [{"text": year, "answer_start": context.index(f"in {year}") + 3}]
        else:
            qa.update(answers=[], is_impossible=True)
        paragraphs.append({"context": context, "qas": [qa]})
    return _squad_file(path, paragraphs)


def test_run_squad_cli_learns_a_span_task(minilm_dir, tmp_path):
    train = _year_task(tmp_path / "train.json", 160, 0)
    dev = _year_task(tmp_path / "dev.json", 40, 1)
    out = forking.python(["-m", "bert_tf.cli.run_squad", f"--vocab_file={minilm_dir}/vocab.txt",
                          f"--bert_config_file={minilm_dir}/config.json", f"--init_checkpoint={minilm_dir}",
                          "--do_train", f"--train_file={train}", "--do_predict", f"--predict_file={dev}",
                          "--max_seq_length=64", "--doc_stride=32", "--train_batch_size=16", "--learning_rate=2e-4",
                          "--num_train_epochs=1", f"--output_dir={tmp_path / 'out'}"],
                         cwd=ROOT, timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr[-3000:]
    results = dict(line.split(" = ") for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines())
    print(f"SQuAD-format year task: exact {float(results['exact']):.1f}, f1 {float(results['f1']):.1f}")
    assert float(results["exact"]) > 80  # a first-word baseline scores 0
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    nbest = json.loads((tmp_path / "out" / "nbest_predictions.json").read_text())
    assert set(predictions) == {f"q{i}" for i in range(40)} and len(nbest["q0"]) >= 1
    assert abs(sum(item["probability"] for item in nbest["q0"]) - 1) < 1e-6


def test_run_squad_counts_its_steps_from_questions_as_the_original(minilm_dir, tmp_path):
    """The original's num_train_steps = int(len(train_examples) / train_batch_size * num_train_epochs), its examples
    the questions, here each several windows (short windows, small stride): 12 questions, batch 4, 2 epochs."""
    from bert_tf import BertConfig
    from bert_tf.tasks.span_qa import SquadOptions, run_squad

    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    vocab = os.path.join(minilm_dir, "vocab.txt")
    train = _year_task(tmp_path / "train.json", 12, 0)
    shape = dict(max_seq_length=32, doc_stride=8, max_query_length=8)
    windows = squad.window_arrays(squad.read_examples(train, True, False)[0], vocab, is_training=True, **shape)
    assert len(windows["start_logits"]) > 2 * 12
    run_squad(config, vocab, str(tmp_path / "out"), SquadOptions(
        do_train=True, train_batch_sizes=4, learning_rates=(1e-4,), num_train_epochs=2, **shape), train)
    assert json.loads((tmp_path / "out" / "task.json").read_text())["global_step"] == 6


def test_squad_2_searches_and_saves_the_null_threshold(minilm_dir, tmp_path):
    from bert_tf import BertConfig
    from bert_tf.tasks.span_qa import SquadOptions, run_squad

    config = BertConfig.from_json_file(os.path.join(minilm_dir, "config.json"))
    train = _year_task(tmp_path / "train.json", 150, 0, version_2=True)
    dev = _year_task(tmp_path / "dev.json", 30, 1, version_2=True)
    options = SquadOptions(do_train=True, do_predict=True, version_2_with_negative=True, max_seq_length=64,
                           doc_stride=32, train_batch_sizes=16, learning_rates=(2e-4,), num_train_epochs=1,
                           init_checkpoint=minilm_dir)
    vocab = os.path.join(minilm_dir, "vocab.txt")
    results = run_squad(config, vocab, str(tmp_path / "out"), options, train, dev)["predict"]
    print(f"SQuAD 2.0-format year task: {results}")
    assert {"best_f1", "best_f1_thresh", "HasAns_exact", "NoAns_exact"} <= set(results)
    assert results["f1"] == pytest.approx(results["best_f1"])  # the predictions use the threshold found
    assert results["f1"] > 80
    saved = json.loads((tmp_path / "out" / "task.json").read_text())
    assert saved["null_score_diff_threshold"] == results["best_f1_thresh"] and saved["task"] == "squad2"
    odds = json.loads((tmp_path / "out" / "null_odds.json").read_text())
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert all((predictions[q] == "") == (odds[q] > saved["null_score_diff_threshold"]) for q in odds)
    # predicting again from the saved model, on questions without answers, uses the saved threshold
    bare = json.loads(open(dev).read())
    for paragraph in bare["data"][0]["paragraphs"]:
        for qa in paragraph["qas"]:
            qa.pop("answers", None)
            qa.pop("is_impossible", None)
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    run_squad(config, vocab, str(tmp_path / "out"), SquadOptions(
        do_predict=True, version_2_with_negative=True, max_seq_length=64, doc_stride=32),
        predict_file=str(tmp_path / "bare.json"))
    assert json.loads((tmp_path / "out" / "predictions.json").read_text()) == predictions
    # without --version_2_with_negative too: predicting alone follows the model (it answered nothing without it)
    os.remove(tmp_path / "out" / "predictions.json")
    run_squad(config, vocab, str(tmp_path / "out"), SquadOptions(do_predict=True, max_seq_length=64, doc_stride=32),
              predict_file=str(tmp_path / "bare.json"))
    assert json.loads((tmp_path / "out" / "predictions.json").read_text()) == predictions


def test_a_grid_without_answers_to_choose_by_is_refused(minilm_dir, tmp_path):
    """A grid scored on a predict file without answers would keep its first cell for no reason: refused before
    any training."""
    from bert_tf import BertConfig
    from bert_tf.tasks import DataError
    from bert_tf.tasks.span_qa import SquadOptions, run_squad

    train = _year_task(tmp_path / "train.json", 4, 0)
    questions = json.loads(open(_year_task(tmp_path / "q.json", 4, 1)).read())
    for article in questions["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                del qa["answers"]
    (tmp_path / "q.json").write_text(json.dumps(questions))
    options = SquadOptions(do_train=True, do_predict=True, max_seq_length=64, train_batch_sizes=(2, 4))
    with pytest.raises(DataError, match=r"q.json: no answers to score the grid's 2 cells by"):
        run_squad(BertConfig.from_json_file(os.path.join(minilm_dir, "config.json")),
                  os.path.join(minilm_dir, "vocab.txt"), str(tmp_path / "out"), options, str(train),
                  str(tmp_path / "q.json"))
    assert not (tmp_path / "out" / "grid").exists()


def _gate_data(context_words=60):
    """Contexts of every kind the feature path must agree on: long (windowed, the answer near a window edge),
    accented, CJK, odd whitespace (tabs, newlines, U+202F, U+00A0 inside a word), an answer inside punctuation,
    a question with no answer and an empty context."""
    words = [f"word{i}" for i in range(context_words)]
    words[41] = "(1856-1943)."
    long = " ".join(words)
    paragraphs = [
        (long, "When?", "1856", long.index("(1856") + 1),
        (long, "Which word?", "word27 word28", long.index("word27")),
        (long, "Which last?", f"word{context_words - 1}", long.index(f"word{context_words - 1}")),
        ("Naïve café owners in 東京都 opened déjà vu bars in 1999.", "Where are the cafés?", "東京", None),
        ("The  Normans\twere\n the people\u202fwho in the 10th\u00a0century gave their name to Normandy.",
         "Who gave a name?", "Normans", None),
        ("Nikola Tesla (1856-1943) was an inventor.", "Born?", "1856-1943", None),
        ("Ünïcödé CAPS and ﬁ ligatures ß here.", "What?", "CAPS", None),
        ("Some context without the answer.", "Impossible?", None, None),
        ("", "Empty?", None, None),
    ]
    data = []
    for i, (context, question, answer, start) in enumerate(paragraphs):
        qa = {"id": str(i), "question": question, "answers": [], "is_impossible": answer is None}
        if answer is not None:
            qa["answers"] = [{"text": answer, "answer_start": context.index(answer) if start is None else start}]
        data.append({"paragraphs": [{"context": context, "qas": [qa]}]})
    return data


@pytest.mark.parametrize("seq,stride,query", [(48, 20, 8), (32, 7, 6), (32, 1, 6), (128, 128, 64)])
def test_in_graph_features_equal_the_original_algorithm(minilm_dir, seq, stride, query):
    from bert_tf.tokenization import FullTokenizer
    from tests.reference.squad_features import convert_examples

    vocab = os.path.join(minilm_dir, "vocab.txt")
    tokenizer = FullTokenizer(vocab)
    for is_training in (True, False):
        examples = squad.parse_examples(_gate_data(), is_training, True, "gate")
        want = convert_examples(examples, tokenizer, max_seq_length=seq, doc_stride=stride, max_query_length=query,
                                is_training=is_training)
        got, arrays = squad.window_features(examples, vocab, max_seq_length=seq, doc_stride=stride,
                                            max_query_length=query, is_training=is_training, chunk=4)
        assert len(got) == len(want) > len(examples)
        for g, w in zip(got, want):
            assert (g.example_index, g.input_word_ids, g.input_mask, g.input_type_ids) == \
                   (w.example_index, w.input_word_ids, w.input_mask, w.input_type_ids)
            assert (g.token_to_word, g.max_context) == (w.token_to_word, w.max_context)
            assert (g.start_position, g.end_position) == (w.start_position, w.end_position)
        alone = squad.window_arrays(examples, vocab, max_seq_length=seq, doc_stride=stride, max_query_length=query,
                                    is_training=is_training, chunk=3)
        fields = {key: key for key in ("input_word_ids", "input_mask", "input_type_ids")}
        if is_training:
            fields.update(start_logits="start_position", end_logits="end_position")
        for got_arrays in (arrays, alone):  # `window_arrays` (training's) from its own chunks of 3
            assert set(got_arrays) == set(fields)
            for key, field in fields.items():
                assert got_arrays[key].dtype == np.int32
                assert got_arrays[key].tolist() == [getattr(w, field) for w in want], key
        if is_training:
            assert sum(1 for w in want if w.start_position) >= 6  # the answers were found, not all [CLS]
        empty = squad.window_arrays([], vocab, max_seq_length=seq, is_training=is_training)
        assert {k: (v.shape, v.dtype) for k, v in empty.items()} == {
            k: ((0, seq) if k.startswith("input") else (0,), np.int32) for k in fields}


def test_bilstm_head_trains_predicts_and_is_kept_with_the_model(minilm_dir, tmp_path, monkeypatch):
    """run_squad --bilstm_head (Table 5's "+ BiLSTM"): the BiLSTM sits between the encoder and the span head, trains
    with it, is named in checkpoints, recorded in task.json, and comes back with the saved model for prediction."""
    from bert_tf import BertConfig, checkpoints
    from bert_tf.finetuning import load_finetuned
    from bert_tf.tasks import DataError
    from bert_tf.tasks.span_qa import SquadOptions, run_squad

    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, causal_attention=True)
    train = _year_task(tmp_path / "train.json", 16, 0)
    dev = _year_task(tmp_path / "dev.json", 4, 1)
    vocab = os.path.join(minilm_dir, "vocab.txt")
    options = SquadOptions(do_train=True, do_predict=True, max_seq_length=64, doc_stride=32, train_batch_sizes=8,
                           num_train_epochs=1, bilstm_head=True)
    run_squad(config, vocab, str(tmp_path / "out"), options, train, dev)
    assert json.loads((tmp_path / "out" / "task.json").read_text())["bilstm_head"] is True
    model = load_finetuned(str(tmp_path / "out"))
    assert model.bilstm_head and model.encoder.bert_config.causal_attention
    names = [slot.name for slot in checkpoints.names.variable_map(model)]
    assert {f"cls/squad/bilstm/{d}/{w}" for d in ("fw", "bw") for w in ("kernel", "recurrent_kernel", "bias")} \
        <= set(names) and len(names) == len(model.weights)
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    run_squad(config, vocab, str(tmp_path / "out"), SquadOptions(do_predict=True, max_seq_length=64, doc_stride=32),
              predict_file=dev)
    assert json.loads((tmp_path / "out" / "predictions.json").read_text()) == predictions
    plain = tmp_path / "plain"
    made = []  # training reads the windows' arrays alone: no per-window SquadFeature
    monkeypatch.setattr(squad, "SquadFeature", lambda *a, **k: made.append(a))
    run_squad(config, vocab, str(plain), SquadOptions(do_train=True, max_seq_length=64, train_batch_sizes=8,
                                                      num_train_epochs=1), train)
    assert made == []
    monkeypatch.undo()
    assert "bilstm_head" not in json.loads((plain / "task.json").read_text())
    with pytest.raises(DataError, match="--bilstm_head: the model in .* was trained without it"):
        run_squad(config, vocab, str(plain), dataclasses.replace(options, do_train=False), predict_file=dev)


@pytest.mark.parametrize("version_2", [False, True])
def test_answers_equal_the_original_write_predictions(minilm_dir, version_2):
    """`postprocess` on the in-graph windows gives what the original's `write_predictions` gives on the original's
    windows (tests/reference/squad_predictions.py, on tests/reference/squad_features.py): predictions, n-best lists
    with their probabilities and logits, best non-null answers and null odds, exactly. Random logits, half of them
    rounded to halves so that scores tie; several windows per long context, an empty context, short and long
    answers (none at a length of 0), n-best cuts from none to more than a window's positions; for 2.0
    thresholds on both sides of the odds."""
    from bert_tf.tokenization import FullTokenizer
    from tests.reference.squad_features import convert_examples
    from tests.reference.squad_predictions import write_predictions

    vocab = os.path.join(minilm_dir, "vocab.txt")
    tokenizer = FullTokenizer(vocab)
    examples = squad.parse_examples(_gate_data(), False, version_2, "gate")
    settings = dict(max_seq_length=32, doc_stride=7, max_query_length=6)
    ours, _ = squad.window_features(examples, vocab, **settings, chunk=4)
    theirs = convert_examples(examples, tokenizer, **settings)
    assert len(ours) == len(theirs) > 2 * len(examples)
    rng = np.random.default_rng(7)
    for trial, (n_best, longest, threshold) in enumerate([(20, 30, 0.0), (3, 2, -1.0), (5, 4, 1.0), (1, 30, 0.0),
                                                          (0, 30, 0.0), (64, 0, 0.0)]):
        start, end = (rng.normal(0, 2, (len(ours), 32)).astype(np.float32) for _ in range(2))
        half = rng.random(start.shape) < 0.5
        start[half], end[half] = np.round(start[half] * 2) / 2, np.round(end[half] * 2) / 2
        got = squad.postprocess(examples, ours, start, end, tokenizer, n_best_size=n_best,
                                max_answer_length=longest, version_2=version_2, null_threshold=threshold)
        want = write_predictions(examples, theirs, start, end, tokenizer, n_best, longest, version_2, threshold)
        assert got == want, trial
        assert n_best <= 1 or longest == 0 or any(len(texts) > 1 for texts in got[2].values())


def test_logits_that_are_not_finite_are_refused(minilm_dir):
    """A diverged model's NaN or infinite logits give no answer: one clear error, not a ranking of NaNs."""
    from bert_tf.tokenization import FullTokenizer

    vocab = os.path.join(minilm_dir, "vocab.txt")
    data = [{"title": "t", "paragraphs": [{"context": "Paris or London.", "qas": [{"id": "q", "question": "who?"}]}]}]
    examples = squad.parse_examples(data, False, False, "t")
    features, _ = squad.window_features(examples, vocab, max_seq_length=16, doc_stride=8, max_query_length=4)
    start, end = np.zeros((1, 16), np.float32), np.zeros((1, 16), np.float32)
    for bad in (np.nan, np.inf):
        start[0, 3] = bad
        with pytest.raises(ValueError, match=r"not finite \(NaN or infinite\) in 1 of 1 window"):
            squad.postprocess(examples, features, start, end, FullTokenizer(vocab))
