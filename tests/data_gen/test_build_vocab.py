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
    """On this corpus (five times over) at 800 the learner's search ends at 829 pieces, the last of them pieces it
    did not keep but adds at count 1, a character as a word's continuation ("##2", "##ß"): the cut takes the least
    frequent pieces of several characters instead, so that no word of the corpus becomes [UNK]."""
    out = tmp_path / "vocab.txt"
    corpus_again = tmp_path / "corpus.txt"
    corpus_again.write_text((corpus.read_text(encoding="utf-8") + "\n") * 5 + "Die Straße ist lang.\n",
                            encoding="utf-8")
    corpus = corpus_again
    summary = build_vocab(str(corpus), out, vocab_size=800, num_unused=5)
    tokens = out.read_text(encoding="utf-8").splitlines()
    assert summary["vocab_size"] == len(tokens) == 800
    assert tokens[:10] == ["[PAD]", "[unused0]", "[unused1]", "[unused2]", "[unused3]", "[unused4]", "[UNK]",
                           "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(tokens)) == len(tokens) and any(t.startswith("##") for t in tokens)
    assert "naïve" not in tokens and "façade" not in tokens  # uncased: accents stripped before counting
    tokenizer = FullTokenizer(out, do_lower_case=True)
    pieces = [p for line in corpus.read_text(encoding="utf-8").splitlines() for p in tokenizer.tokenize(line)]
    assert "[UNK]" not in pieces
    chars = {t for t in tokens if len(t) == 1}
    assert len(chars) > 60 and {"##" + c for c in chars} <= set(tokens)
    with pytest.raises(ValueError, match=r"--vocab_size=140: the corpus's \d+ characters need \d+ pieces .* beside "
                                         r"the 10 reserved tokens; give at least"):
        build_vocab(str(corpus), tmp_path / "small.txt", vocab_size=140, num_unused=5)
    assert not (tmp_path / "small.txt").exists()
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


# Article 1 of the Universal Declaration of Human Rights in six languages: accents, four scripts and CJK, which the
# basic tokenization splits into single characters.
UDHR_ARTICLE_1 = """\
Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués de raison et de conscience \
et doivent agir les uns envers les autres dans un esprit de fraternité.
Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen begabt und \
sollen einander im Geist der Brüderlichkeit begegnen.
Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα. Είναι προικισμένοι με λογική \
και συνείδηση, και οφείλουν να συμπεριφέρονται μεταξύ τους με πνεύμα αδελφοσύνης.
Все люди рождаются свободными и равными в своем достоинстве и правах. Они наделены разумом и совестью и должны \
поступать в отношении друг друга в духе братства.
人人生而自由,在尊严和权利上一律平等。他们赋有理性和良心,并应以兄弟关系的精神相对待。
सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है। उन्हें बुद्धि और अन्तरात्मा की \
देन प्राप्त है और परस्पर उन्हें भाईचारे के भाव से बर्ताव करना चाहिए।
"""


def test_counting_words_reads_a_text_corpus_without_tf_datas_autotuning(corpus, monkeypatch):
    """The count over the whole corpus reads it without autotuning (`bert_tf.tf_data`)."""
    from data_gen import vocab
    from data_gen.documents import as_corpus

    read, without_autotuning = [], vocab.without_autotuning
    monkeypatch.setattr(vocab, "without_autotuning", lambda data: read.append(without_autotuning(data)) or read[-1])
    text = as_corpus(str(corpus))
    assert vocab.count_words(text, text.parts())["json"] > 0
    assert [dataset.options().autotune.enabled for dataset in read] == [False]


def test_counting_words_drops_invalid_utf8_and_names_the_file(tmp_path, caplog):
    """Invalid UTF-8 bytes are dropped, as create_pretraining_data drops them, with its warning naming each file
    and its number of damaged lines (the count said nothing of them)."""
    from data_gen import vocab
    from data_gen.documents import as_corpus

    (tmp_path / "bad.txt").write_bytes(b"caf\xc3\xa9 \xff\xfebad\n\nok \x80line\nclean line\n")
    (tmp_path / "good.txt").write_bytes("café ok\n".encode())
    text = as_corpus(f"{tmp_path}/bad.txt,{tmp_path}/good.txt")
    with caplog.at_level("WARNING"):
        counts = vocab.count_words(text, text.parts())
    assert (counts["bad"], counts["line"], counts["cafe"]) == (1, 2, 2)  # "\\x80line" read as "line"
    assert "bad.txt: 2 line(s) had invalid UTF-8 bytes; those bytes were dropped" in caplog.text
    assert "good.txt" not in caplog.text


@pytest.mark.reference
def test_the_learner_makes_tensorflow_texts_vocabulary(corpus, tmp_path):
    """`data_gen.wordpiece_learner` against tensorflow-text's learner itself, token for token: on real English,
    cased and uncased, at a few sizes (each a different threshold search), on six languages, and on words that
    begin with the joiner, which spell some pieces the same as suffixes do."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as reference

    from data_gen import wordpiece_learner
    from data_gen.documents import as_corpus
    from data_gen.vocab import count_words, reserved_tokens

    languages = tmp_path / "udhr.txt"
    languages.write_text(UDHR_ARTICLE_1 * 3, encoding="utf-8")
    cases = []
    for path, lower, sizes in ((corpus, True, (150, 400)), (corpus, False, (500,)), (languages, False, (300,))):
        text = as_corpus(str(path))
        counts = count_words(text, text.parts(), lower)
        cases += [(list(counts.items()), size, 2) for size in sizes]
    # "##ab" is a word and a suffix of "xab" and "cab": at size 24, which of its two counts is kept decides the order
    joined = [("##ab", 9), ("##abc", 4), ("xab", 7), ("yabc", 5), ("ab", 3), ("cab", 6), ("##", 2), ("b##a", 2),
              ("abab", 12), ("xy", 15)]
    cases += [(joined, size, 1) for size in (12, 24)]
    for counts, size, lower in cases:
        want = reference.learn(counts, size, reserved_tokens(3), lower_thresh=lower)
        assert wordpiece_learner.learn(counts, size, reserved_tokens(3), lower) == want, (len(counts), size)
