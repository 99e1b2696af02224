"""Learn a WordPiece vocabulary from a corpus with tensorflow-text's learner (its vocabulary, computed faster:
`data_gen.wordpiece_learner`), on our exact pre-tokenization.

Words are counted after the original BERT basic tokenization (the same in-graph code as `InGraphTokenizer`), so
the learned pieces fit the tokenizer that will use them. The file layout follows the released vocabularies:
`[PAD]`, `[unused0]` ... `[unusedN-1]` (slots users can repurpose without resizing the embeddings), `[UNK]`,
`[CLS]`, `[SEP]`, `[MASK]`, then the learned pieces.
"""

from __future__ import annotations

import collections
import os

from bert_tf.tf_data import without_autotuning
from bert_tf.tokenization import InGraphTokenizer, valid_utf8

import tensorflow as tf
from bert_tf import fileio, staging
from data_gen.documents import CorpusError, FileCorpus, as_corpus, corpus_documents, warn_invalid_utf8


def reserved_tokens(num_unused: int = 99) -> list[str]:
    if num_unused < 0:
        raise ValueError(f"--num_unused={num_unused} must be 0 or more")
    return ["[PAD]"] + [f"[unused{i}]" for i in range(num_unused)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def count_words(corpus, parts, do_lower_case: bool = True, batch_size: int = 1024) -> collections.Counter:
    """Word counts of a corpus's `parts` (`documents.FileCorpus`, `tfds_corpus.TfdsCorpus`) after BERT basic
    tokenization, streamed in batches of lines. Text files are read by TensorFlow's line reader; a TFDS corpus as
    create_pretraining_data reads it, one sentence per line."""
    tokenizer = InGraphTokenizer(vocab=reserved_tokens(0), do_lower_case=do_lower_case)
    # the words, and how many lines had invalid UTF-8 (the tokenizer drops those bytes, as create_pretraining_data)
    split = tf.function(lambda batch: (tokenizer.split_words(batch, with_offsets=False)[0].flat_values,
                                       tf.reduce_sum(tf.cast(~valid_utf8(batch), tf.int64))),
                        autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    if isinstance(corpus, FileCorpus):
        sources = [(part, without_autotuning(tf.data.TextLineDataset(part).batch(batch_size).prefetch(2)))
                   for part in parts]
    else:
        sources = [(None, _batches((line for document in corpus_documents(corpus, parts) for line in document),
                                   batch_size))]
    counts = collections.Counter()
    for path, lines in sources:
        damaged = 0
        for batch in lines:
            words, bad = split(batch)
            counts.update(words.numpy())
            damaged += int(bad)
        if path is not None:
            warn_invalid_utf8(path, damaged)
    return collections.Counter({word.decode("utf-8"): n for word, n in counts.items()})


def _batches(lines, size):
    batch = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield tf.constant(batch)
            batch = []
    if batch:
        yield tf.constant(batch)


def learn_vocab(word_counts, vocab_size: int, num_unused: int = 99, min_count: int = 2) -> list[str]:
    """tensorflow-text's WordPiece learner (`data_gen.wordpiece_learner`) with BERT's reserved tokens first; returns
    the tokens in id order."""
    from data_gen import wordpiece_learner

    reserved = reserved_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise ValueError(f"vocab_size={vocab_size} leaves no room beside {len(reserved)} reserved tokens")
    if not word_counts:
        raise CorpusError("the corpus has no words; check --input_file (one sentence per line) or --tfds_text_key")
    tokens = wordpiece_learner.learn(word_counts.items(), vocab_size, reserved, lower_thresh=min_count)
    # The learner puts reserved tokens first; keep our order for them and drop any duplicate it added.
    learned = [t for t in tokens if t not in set(reserved)]
    return reserved + _within(learned, vocab_size - len(reserved), vocab_size)


def _within(learned: list[str], room: int, vocab_size: int) -> list[str]:
    """The learner's pieces cut to `room`, where its search for a count threshold ended above the size: the
    least frequent pieces of two or more characters go, never a character alone or as a word's continuation
    ("x", "##x"), without which every word holding it would become [UNK] (the learner lists those last, at count
    1). Too little room for the characters is refused."""
    if len(learned) <= room:
        return learned
    chars = {t for t in learned if len(t) == 1}
    needed = chars | {"##" + c for c in chars}
    if len(needed) > room:
        raise ValueError(f"--vocab_size={vocab_size}: the corpus's {len(chars)} characters need {len(needed)} "
                         f"pieces (each alone and as a word's continuation) beside the {vocab_size - room} reserved "
                         f"tokens; give at least {vocab_size - room + len(needed)}"
                         + (", or fewer --num_unused" if vocab_size - room > 5 else ""))
    spare = room - len(needed)
    kept = []
    for token in learned:  # most frequent first after the characters, as the learner orders them
        if token in needed:
            kept.append(token)
        elif spare:
            kept.append(token)
            spare -= 1
    return kept


def write_vocab(tokens: list[str], path: str) -> None:
    """One token per line, written to a temporary name and renamed when complete."""
    path = os.fspath(path)
    fileio.makedirs(fileio.dirname(fileio.absolute(path)))
    staging.write_text(path, "".join(token + "\n" for token in tokens))


def build_vocab(input_files, output_file, vocab_size=30522, do_lower_case=True, num_unused=99, min_count=2):
    """A corpus -> `vocab.txt`; returns a summary dict (words counted, vocabulary size). `input_files`:
    `--input_file`'s files and globs, or a corpus (`documents.as_corpus`: a TFDS dataset, `tfds_corpus`)."""
    corpus = as_corpus(input_files)
    parts = corpus.parts()
    counts = count_words(corpus, parts, do_lower_case)
    tokens = learn_vocab(counts, vocab_size, num_unused, min_count)
    write_vocab(tokens, output_file)
    return {"files": len(parts), "distinct_words": len(counts), "words": sum(counts.values()),
            "vocab_size": len(tokens)}
