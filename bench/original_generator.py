"""Reference for the data_gen benchmark: the original generator's algorithm and execution model, re-written here.

google-research/bert's create_pretraining_data.py cannot be fetched at run time, so this module follows its
structure step for step, to measure what users of it pay: one process, the Python `FullTokenizer` on every line,
every document and every instance held in memory, a global shuffle, masking with Python's `random`, and one
`tf.train.Example` object per instance. Same flags, same record schema.
"""

import collections
import random

from bert_tf.tokenization import FullTokenizer

import tensorflow as tf


def create_instances(input_files, tokenizer, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
                     max_predictions_per_seq, rng):
    all_documents = [[]]
    for path in input_files:
        with open(path, encoding="utf-8", errors="ignore") as f:
            for line in f:
                line = line.strip()
                if not line:
                    all_documents.append([])
                tokens = tokenizer.tokenize(line)
                if tokens:
                    all_documents[-1].append(tokens)
    all_documents = [d for d in all_documents if d]
    rng.shuffle(all_documents)
    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(dupe_factor):
        for index in range(len(all_documents)):
            instances.extend(_from_document(all_documents, index, max_seq_length, short_seq_prob, masked_lm_prob,
                                            max_predictions_per_seq, vocab_words, rng))
    rng.shuffle(instances)
    return instances


def _from_document(docs, index, max_seq_length, short_seq_prob, masked_lm_prob, max_predictions, vocab_words, rng):
    document = docs[index]
    max_num_tokens = max_seq_length - 3
    target = rng.randint(2, max_num_tokens) if rng.random() < short_seq_prob else max_num_tokens
    instances, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for s in chunk[:a_end] for t in s]
            tokens_b = []
            is_random = len(chunk) == 1 or rng.random() < 0.5
            if is_random:
                for _ in range(10):
                    other = rng.randint(0, len(docs) - 1)
                    if other != index:
                        break
                random_document = docs[other]
                for s in random_document[rng.randint(0, len(random_document) - 1):]:
                    tokens_b.extend(s)
                    if len(tokens_b) >= target - len(tokens_a):
                        break
                i -= len(chunk) - a_end
            else:
                tokens_b = [t for s in chunk[a_end:] for t in s]
            while len(tokens_a) + len(tokens_b) > max_num_tokens:
                longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
                if rng.random() < 0.5:
                    del longer[0]
                else:
                    longer.pop()
            if tokens_a and tokens_b:
                tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, positions, labels = _mask(tokens, masked_lm_prob, max_predictions, vocab_words, rng)
                instances.append((tokens, segment_ids, is_random, positions, labels))
            chunk, length = [], 0
        i += 1
    return instances


def _mask(tokens, masked_lm_prob, max_predictions, vocab_words, rng):
    candidates = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    rng.shuffle(candidates)
    output = list(tokens)
    count = min(max_predictions, max(1, int(round(len(tokens) * masked_lm_prob))))
    picked = sorted(candidates[:count])
    for index in picked:
        if rng.random() < 0.8:
            output[index] = "[MASK]"
        elif rng.random() >= 0.5:
            output[index] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
    return output, picked, [tokens[i] for i in picked]


def write(instances, tokenizer, max_seq_length, max_predictions, output_file):
    with tf.io.TFRecordWriter(output_file) as writer:
        for tokens, segment_ids, is_random, positions, labels in instances:
            ids = tokenizer.convert_tokens_to_ids(tokens)
            mask = [1] * len(ids)
            pad = max_seq_length - len(ids)
            label_ids = tokenizer.convert_tokens_to_ids(labels)
            weights = [1.0] * len(label_ids)
            extra = max_predictions - len(positions)
            features = collections.OrderedDict(
                input_ids=ids + [0] * pad, input_mask=mask + [0] * pad, segment_ids=segment_ids + [0] * pad,
                masked_lm_positions=positions + [0] * extra, masked_lm_ids=label_ids + [0] * extra,
                next_sentence_labels=[int(is_random)])
            feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v)) for k, v in features.items()}
            feature["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(value=weights + [0.0] * extra))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def run(input_files, output_file, vocab_file, max_seq_length=128, max_predictions=20, dupe_factor=5,
        short_seq_prob=0.1, masked_lm_prob=0.15, seed=12345, do_lower_case=True):
    tokenizer = FullTokenizer(vocab_file, do_lower_case)
    rng = random.Random(seed)
    instances = create_instances(input_files, tokenizer, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
                                 max_predictions, rng)
    write(instances, tokenizer, max_seq_length, max_predictions, output_file)
    return len(instances)
