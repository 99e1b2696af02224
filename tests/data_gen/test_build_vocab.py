import importlib
import os

import pytest

from bert_tf.tokenization import FullTokenizer
from data_gen.documents import CorpusError
from data_gen.vocab import build_vocab

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Real English: the docstrings of a few standard-library modules, one line each."""
    lines = []
    for name in ("json", "collections", "argparse", "functools", "pathlib", "csv", "textwrap", "Ünïcödé"):
        try:
            module = importlib.import_module(name)
        except ImportError:  # the last entry is a line of accented text, not a module
            lines.append("Ünïcödé ÀÉÎÕÜ naïve façade 北京")
            continue
        for attr in dir(module):
            doc = getattr(getattr(module, attr), "__doc__", None)
            if isinstance(doc, str):
                lines += [line.strip() for line in doc.splitlines() if line.strip()]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_vocab_layout_and_round_trip(corpus, tmp_path):
    out = tmp_path / "vocab.txt"
    summary = build_vocab(str(corpus), out, vocab_size=1200, num_unused=5)
    tokens = out.read_text(encoding="utf-8").splitlines()
    assert summary["vocab_size"] == len(tokens) <= 1200
    assert tokens[:10] == ["[PAD]", "[unused0]", "[unused1]", "[unused2]", "[unused3]", "[unused4]", "[UNK]",
                           "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(tokens)) == len(tokens) and any(t.startswith("##") for t in tokens)
    assert "naïve" not in tokens and "façade" not in tokens  # uncased: accents stripped before counting
    tokenizer = FullTokenizer(out, do_lower_case=True)
    pieces = [p for line in corpus.read_text(encoding="utf-8").splitlines() for p in tokenizer.tokenize(line)]
    unk_rate = pieces.count("[UNK]") / len(pieces)
    assert unk_rate < 0.005, unk_rate
    words = sum(len(line.split()) for line in corpus.read_text(encoding="utf-8").splitlines())
    assert len(pieces) < 2.5 * words  # learned pieces, not characters


def test_cased_vocab_keeps_case(corpus, tmp_path):
    build_vocab(str(corpus), tmp_path / "cased.txt", vocab_size=1200, do_lower_case=False, num_unused=0)
    tokens = set((tmp_path / "cased.txt").read_text(encoding="utf-8").splitlines())
    assert any(t[:1].isupper() and len(t) > 1 for t in tokens)


def test_cli_and_bad_inputs(corpus, tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    ok = forking.python(["-m", "data_gen.build_vocab", f"--input_file={corpus}", f"--output_file={tmp_path}/v.txt",
                         "--vocab_size=600", "--num_unused=2"], env=env, cwd=ROOT, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "wrote" in ok.stdout and (tmp_path / "v.txt").exists()
    bad = forking.python(["-m", "data_gen.build_vocab", f"--input_file={tmp_path}/none*.txt",
                          f"--output_file={tmp_path}/w.txt"], env=env, cwd=ROOT, timeout=300)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "build_vocab: error: --input_file:" in bad.stderr and "matches no file" in bad.stderr
    assert not (tmp_path / "w.txt").exists()
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(CorpusError, match="no words"):
        build_vocab(str(empty), tmp_path / "x.txt", vocab_size=100, num_unused=0)
    with pytest.raises(ValueError, match="leaves no room"):
        build_vocab(str(corpus), tmp_path / "x.txt", vocab_size=50, num_unused=99)
    assert not (tmp_path / "x.txt").exists()
