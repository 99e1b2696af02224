"""TFDS corpora: the sentence splitter on real sentences, and a TFDS dataset built and prepared here (no download)
as the corpus of create_pretraining_data and of the Beam pipeline, against the same text given as a file."""

import json
import os

import pytest

from tests import forking
from tests.data_gen.test_data_gen import vocab_file  # noqa: F401  (the module fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("text, sentences", [
    ("Mr. Smith went to Washington. He arrived at 3.5 p.m. on Monday! Did he stay? Yes.",
     ["Mr. Smith went to Washington.", "He arrived at 3.5 p.m. on Monday!", "Did he stay?", "Yes."]),
    ("The U.S. Army was founded in 1775. It is the oldest branch.",
     ["The U.S. Army was founded in 1775.", "It is the oldest branch."]),
    ('J. R. R. Tolkien wrote books. "Hello," she said. "Goodbye." Then (in 1937) she left.',
     ["J. R. R. Tolkien wrote books.", '"Hello," she said.', '"Goodbye."', "Then (in 1937) she left."]),
    ("See e.g. the appendix, which lists Fig. 3. The end", ["See e.g. the appendix, which lists Fig. 3.", "The end"]),
    ("东京是日本的首都。它很大！你去过吗？是的", ["东京是日本的首都。", "它很大！", "你去过吗？", "是的"]),
    ("First line\nSecond line. Third sentence.\n\n   \nLast",
     ["First line", "Second line.", "Third sentence.", "Last"]),
    # the documented limits: after an abbreviation, or before a lower-case start, no split
    ("He moved to the U.S. The rest followed. and so on.", ["He moved to the U.S. The rest followed. and so on."]),
])
def test_sentence_splitter(text, sentences):
    from data_gen.sentences import split_sentences

    assert split_sentences(text) == sentences


ARTICLES = 48


def _articles():
    """Real English (the standard library's docstrings) in articles of two paragraphs of 2-7 lines each."""
    from bench.common import docstring_lines

    lines, articles, at = docstring_lines(), [], 0
    for k in range(ARTICLES):
        paragraphs = []
        for size in (2 + k % 6, 3 + (k * 5) % 5):
            paragraphs.append(" ".join(lines[at:at + size]))
            at += size
        articles.append("\n".join(paragraphs))
    articles[ARTICLES - 3] = "   "  # an empty article (in the validation split) is skipped
    return articles


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    """A TFDS text dataset `bert_tf_test_articles` (train, validation) prepared in a new data_dir."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    articles = _articles()

    class BertTfTestArticles(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")
        # a module name without a package: for a class in one (tests.data_gen), TFDS 4.9.10 looks for its source
        # with importlib_resources, which it does not install on Python >= 3.9
        __module__ = "test_tfds_corpus"

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
                {"title": tfds.features.Text(), "text": tfds.features.Text(), "words": tf.int32}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(0, ARTICLES - 8),
                    "validation": self._generate_examples(ARTICLES - 8, ARTICLES)}

        def _generate_examples(self, start, end):
            for i in range(start, end):
                yield i, {"title": f"Article {i}", "text": articles[i], "words": len(articles[i].split())}

    data_dir = tmp_path_factory.mktemp("tfds")
    BertTfTestArticles(data_dir=str(data_dir)).download_and_prepare()
    return str(data_dir)


def _as_text_file(path, data_dir, split, keep_line_breaks=False):
    """The split's articles in TFDS's own reading order (`tfds.load`, files in order), as a corpus file."""
    import tensorflow_datasets as tfds

    from data_gen.sentences import split_sentences

    dataset = tfds.load("bert_tf_test_articles", split=split, data_dir=data_dir, shuffle_files=False,
                        read_config=tfds.ReadConfig(interleave_cycle_length=1))
    documents = []
    for example in tfds.as_numpy(dataset):
        text = example["text"].decode()
        lines = [line.strip() for line in text.splitlines() if line.strip()] if keep_line_breaks \
            else split_sentences(text)
        if lines:
            documents.append("\n".join(lines))
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return len(documents)


@pytest.mark.parametrize("keep_line_breaks", [False, True], ids=["sentences", "line_breaks"])
def test_a_tfds_split_makes_the_records_of_the_same_text_as_a_file(tfds_dir, vocab_file, tmp_path,  # noqa: F811
                                                                   keep_line_breaks):
    from data_gen.generate import Options, generate, output_paths
    from data_gen.tfds_corpus import TfdsCorpus

    options = Options(dupe_factor=2, window_size=7, max_seq_length=48, max_predictions_per_seq=8)
    split = "train[:30]+validation"
    documents = _as_text_file(tmp_path / "corpus.txt", tfds_dir, split, keep_line_breaks)
    assert documents == 37  # 30 + 8, less the empty article
    corpus = TfdsCorpus("bert_tf_test_articles", split=split, data_dir=tfds_dir, keep_line_breaks=keep_line_breaks)
    from_tfds = generate(corpus, output_paths(str(tmp_path / "tfds") + "/", 2), vocab_file, options, progress=False)
    from_file = generate(str(tmp_path / "corpus.txt"), output_paths(str(tmp_path / "file") + "/", 2), vocab_file,
                         options, progress=False)
    for shard in from_file["shards"]:
        assert (tmp_path / "tfds" / shard["path"]).read_bytes() == (tmp_path / "file" / shard["path"]).read_bytes()
    assert from_tfds.pop("tfds") == {"name": "bert_tf_test_articles", "version": "1.0.0", "split": split,
                                     "text_key": "text", "keep_line_breaks": keep_line_breaks,
                                     "data_dir": os.path.join(tfds_dir, "bert_tf_test_articles", "1.0.0")}
    assert from_file.pop("input_files") == [str(tmp_path / "corpus.txt")]
    assert from_tfds == from_file and from_file["documents"] == documents and from_file["instances"] > 50


def test_the_beam_pipeline_reads_a_tfds_split_as_the_local_run_does(tfds_dir, vocab_file, tmp_path):  # noqa: F811
    import apache_beam as beam

    from data_gen.beam import build_pipeline
    from data_gen.generate import Options, generate
    from data_gen.tfds_corpus import TfdsCorpus
    from tests.data_gen.test_beam import _records

    options = Options(dupe_factor=2, window_size=5, max_seq_length=48, max_predictions_per_seq=8)
    corpus = TfdsCorpus("bert_tf_test_articles", data_dir=tfds_dir)
    local = generate(corpus, [str(tmp_path / "local" / "a.tfrecord")], vocab_file, options, progress=False)
    with beam.Pipeline() as pipeline:
        build_pipeline(pipeline, corpus, str(tmp_path / "beam" / "records"), vocab_file, options, num_output_shards=2)
    assert _records((tmp_path / "beam").glob("records-*")) == _records([tmp_path / "local" / "a.tfrecord"])
    on_beam = json.loads((tmp_path / "beam" / "metadata.json").read_text())
    for metadata in (on_beam, local):
        del metadata["shards"], metadata["generator"]
    assert on_beam == local and local["tfds"]["split"] == "train"


def test_the_cli_reads_a_prepared_dataset_and_refuses_what_it_cannot_use(tfds_dir, vocab_file,  # noqa: F811
                                                                         tmp_path):
    """In a process that never defined the dataset's builder: TFDS reads it from its prepared files, as it would
    read wikipedia/20230601.en. Each wrong combination of flags is one line naming the flag."""
    from data_gen.documents import CorpusError
    from data_gen.tfds_corpus import corpus_from_flags

    def run(*flags):
        return forking.python(["-m", "data_gen.create_pretraining_data", *flags, f"--vocab_file={vocab_file}",
                               "--max_seq_length=48", "--max_predictions_per_seq=8", "--dupe_factor=1"], cwd=ROOT,
                              timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))

    done = run("--tfds_name=bert_tf_test_articles", f"--tfds_data_dir={tfds_dir}", "--tfds_split=validation",
               f"--output_file={tmp_path / 'out'}/")
    assert done.returncode == 0, done.stderr[-2000:]
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["tfds"]["split"] == "validation" and metadata["documents"] == 7  # 8, one of them empty
    refused = run("--tfds_name=bert_tf_test_articles", f"--tfds_data_dir={tfds_dir}", "--tfds_text_key=words",
                  f"--output_file={tmp_path / 'refused'}/")
    assert refused.returncode == 1 and not (tmp_path / "refused").exists()
    assert refused.stderr.strip().splitlines() == [
        "create_pretraining_data: error: --tfds_text_key=words: a Tensor feature of bert_tf_test_articles, not text; "
        "its text features: text, title"]

    for flags, message in [
        (dict(input_file="a.txt", tfds_name="x"), "give one corpus"),
        (dict(input_file="a.txt", tfds_split="train"), "--tfds_split without --tfds_name"),
        (dict(tfds_keep_line_breaks=False), "--tfds_keep_line_breaks without --tfds_name"),
        (dict(), "no corpus: give --input_file"),
        (dict(tfds_name="no_such_dataset_here", tfds_data_dir=tfds_dir), "--tfds_name=no_such_dataset_here: no such "
                                                                         "dataset in"),
        (dict(tfds_name="bert_tf_test_articles", tfds_data_dir=tfds_dir, tfds_split="test"),
         "--tfds_split=test: bert_tf_test_articles has no such split"),
        (dict(tfds_name="bert_tf_test_articles", tfds_data_dir=tfds_dir, tfds_text_key="body"),
         "--tfds_text_key=body: not a feature of bert_tf_test_articles; its text features: text, title"),
    ]:
        with pytest.raises(CorpusError) as error:
            corpus_from_flags(**flags)
        assert message in str(error.value) and "\n" not in str(error.value)


def test_build_vocab_learns_from_a_prepared_dataset_what_it_learns_from_the_same_text(tfds_dir, tmp_path):
    """The CLI, in a process that never defined the builder, against the library on the same sentences written as a
    file; without a corpus it says so in one line."""
    from data_gen.vocab import build_vocab

    def run(*flags):
        return forking.python(["-m", "data_gen.build_vocab", "--vocab_size=400", "--num_unused=5", "--min_count=1",
                               *flags], cwd=ROOT, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))

    _as_text_file(tmp_path / "corpus.txt", tfds_dir, "train")
    from_file = build_vocab(str(tmp_path / "corpus.txt"), str(tmp_path / "file.txt"), 400, num_unused=5,
                            min_count=1)
    done = run("--tfds_name=bert_tf_test_articles", f"--tfds_data_dir={tfds_dir}",
               f"--output_file={tmp_path / 'tfds.txt'}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "tfds.txt").read_text() == (tmp_path / "file.txt").read_text()
    assert from_file["vocab_size"] > 300 and from_file["words"] > 2000
    refused = run(f"--output_file={tmp_path / 'none.txt'}")
    assert refused.returncode == 1 and not (tmp_path / "none.txt").exists()
    assert refused.stderr.strip().splitlines() == [
        "build_vocab: error: no corpus: give --input_file (text files, one sentence per line) or --tfds_name (a "
        "prepared TFDS dataset)"]
