"""The tagging family: one tag per word, as CoNLL-2003 NER (paper section 5.3's task).

`run_ner` and the exported `TaggerModule` make their features with the same in-graph function
(`bert_tf.tasks.tag_features`): windows of word pieces with a stride, each word's tag read at its first piece from
the window that gives it the most context. `run_ner` takes the words of its files as they are; the export splits
raw text into words with the model's tokenizer (whitespace, punctuation, CJK characters).
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from bert_tf import fileio, finetuning
from bert_tf.config import check_fits
from bert_tf.models import INPUT_NAMES
from bert_tf.serving import hold, string_spec, labels_asset
from bert_tf.tasks import ner, tag_features, task_info, windows
from bert_tf.tasks.base import DataError, Family
from bert_tf.tokenization import drop_invalid_utf8
from bert_tf.training import write_lines, write_results


class Tagging(Family):
    kinds = ("tagging",)
    export_kind = "tagger"
    program = "run_ner"
    export_flags = frozenset({"doc_stride"})

    def build_model(self, task, config, dropout_rate: float, dtype=None, feature_based: str | None = None,
                    lstm_units: int = 768):
        from bert_tf.models import BertEncoder, BertFeatureTagger, BertTokenClassifier

        if feature_based:
            return BertFeatureTagger(BertEncoder(config, dtype=dtype), num_classes=len(task.labels),
                                     combination=feature_based, lstm_units=lstm_units, dropout_rate=dropout_rate)
        return BertTokenClassifier(BertEncoder(config, dtype=dtype), num_classes=len(task.labels),
                                   dropout_rate=dropout_rate)

    def serving_module(self, model, info, preprocessor, *, doc_stride, scratch):
        module = TaggerModule(model, preprocessor=preprocessor, tags=info.labels,
                              doc_stride=info.doc_stride if doc_stride is None else doc_stride)
        labels_asset(module, info.labels, scratch)
        return module


FAMILY = Tagging()


@dataclasses.dataclass(frozen=True)
class NerOptions(finetuning.FinetuneOptions):
    """`run_ner`'s settings: `label_all_subtokens` trains every word piece on its word's tag (default: the first
    piece only, the others ignored, as the paper); `doc_stride` is the step between the windows of a row longer
    than `max_seq_length - 2` pieces (default: half a window); `document_context` encodes each document of the data
    as one row, every sentence with the words around it, as the paper (None: where the data marks documents, or
    without training as the model was trained; True: refuse data that marks none; False: each sentence alone)."""

    label_all_subtokens: bool = False
    doc_stride: int | None = None
    document_context: bool | None = None
    feature_based: str | None = None  # a FeatureCombination: the paper's probe on frozen features (Table 7)
    lstm_units: int = 768

    def check(self, replicas: int, output_dir: str | None = None) -> None:
        super().check(replicas, output_dir)
        from bert_tf.layers.feature_combination import COMBINATIONS

        if self.feature_based is not None and self.feature_based not in COMBINATIONS:
            raise ValueError(f"--feature_based={self.feature_based!r}: expected one of {', '.join(COMBINATIONS)}")
        if self.lstm_units < 1:
            raise ValueError(f"--lstm_units={self.lstm_units} must be at least 1")
        if self.lstm_units != NerOptions.lstm_units and not self.feature_based:
            raise ValueError(f"--lstm_units={self.lstm_units} sizes the probe of --feature_based, which is not set; "
                             "give --feature_based=<combination>, or drop --lstm_units to fine-tune")
        if self.doc_stride is not None and not 0 < self.doc_stride <= self.max_seq_length - 2:
            raise ValueError(f"--doc_stride={self.doc_stride}: must be between 1 and --max_seq_length - 2 "
                             f"({self.max_seq_length - 2})")

    @property
    def stride(self) -> int:
        """The stride to train with."""
        return self.doc_stride or tag_features.default_stride(self.max_seq_length)


def run_ner(config, vocab_file: str, output_dir: str, options: NerOptions, data_dir: str | None, strategy=None,
            tfds_name: str | None = None) -> dict:
    """Fine-tunes a token tagger on CoNLL-2003-style files; writes `eval_results.txt` (on valid.txt, what conlleval
    reports: entity-level precision, recall and F1, token accuracy, and each entity type's figures),
    `test_predictions.txt` (`word gold predicted` per line) and, where test.txt has tags, `test_results.txt` (its
    figures as for valid.txt). Returns the overall figures."""
    from bert_tf.tasks import get_task

    strategy = strategy or tf.distribute.get_strategy()
    options.check(strategy.num_replicas_in_sync, output_dir)
    check_fits(config, vocab_file, options.max_seq_length, do_lower_case=options.do_lower_case)
    task = get_task("conll2003")
    train = task.sentences(data_dir, "train", tfds_name) if options.do_train else None
    stride = options.stride
    documents = options.document_context
    if train is not None:
        tags = ner.tag_set(train)
    elif (info := task_info.read(output_dir)) is not None:
        tags = list(info.labels)
        stride = options.doc_stride or info.doc_stride or stride
        # the model's own probe and labelling: a flag that says otherwise is refused, not left unread
        if options.feature_based is not None:
            finetuning.refuse_other_than_saved(output_dir, "feature_based", options.feature_based,
                                               info.feature_based or "none (fine-tuned)")
        if options.lstm_units != NerOptions.lstm_units:
            finetuning.refuse_other_than_saved(output_dir, "lstm_units", options.lstm_units, info.lstm_units)
        if options.label_all_subtokens:
            finetuning.refuse_other_than_saved(output_dir, "label_all_subtokens", True, info.label_all_subtokens)
        if info.label_all_subtokens is not None:
            options = dataclasses.replace(options, label_all_subtokens=info.label_all_subtokens)
        if documents is None:  # as trained; until task.json version 4, taggers were trained on sentences alone
            documents = info.document_context if info.version >= 4 else False
    else:
        raise DataError(f"{output_dir}: no fine-tuned tagger here (task.json); train one with --do_train")
    documents = documents is not False  # None: wherever the data marks documents
    encoder = tag_features.SentenceEncoder(vocab_file, options.do_lower_case, tags, options.max_seq_length, stride,
                                           options.label_all_subtokens)

    def source(split):  # for messages
        return f"--tfds_name={tfds_name} ({split})" if tfds_name else os.path.join(data_dir, ner.FILES[split])

    def encode(sentences, split):
        if options.document_context and not ner.marks_documents(sentences):
            raise DataError(f"--document_context: {source(split)} marks no documents (no -DOCSTART- line; TFDS's "
                            "conll2003 drops them), so every sentence would be encoded alone; give the CoNLL files, "
                            "or --nodocument_context")
        return encoder(sentences, document_context=documents)

    splits = {"dev": options.do_eval, "test": options.do_predict}
    data = {}
    for split, wanted in splits.items():
        if wanted:
            sentences = task.sentences(data_dir, split, tfds_name)
            ner.check_tags([s for s in sentences if s.tags], tags, source(split))
            data[split] = (sentences, encode(sentences, split))
    fileio.makedirs(output_dir)
    results: dict = {}

    def predict(model, split):
        encoded = data[split][1]
        batch_size = options.eval_batch_size if split == "dev" else options.predict_batch_size
        return encoded.word_tags(finetuning.predict(model, encoded.inputs, batch_size)["logits"], tags)

    def evaluate(model):
        return task.metrics(predict(model, "dev"), [s.tags for s in data["dev"][0]])

    tagged = dataclasses.replace(task, labels=tuple(tags))
    build = lambda: FAMILY.build_model(tagged, config, options.dropout_rate, options.policy,  # noqa: E731
                                       feature_based=options.feature_based, lstm_units=options.lstm_units)
    grid = None
    if options.do_train:
        encoded = encode(train, "train")
        inputs, labels, weights = encoded.inputs, {"logits": encoded.labels}, {"logits": encoded.weights}
        del encoded  # so that each array is held by its dict alone, and leaves memory as it becomes a tensor
        inputs, labels, weights = (finetuning.as_tensors(data) for data in (inputs, labels, weights))
        grid = finetuning.grid_search(
            options, output_dir,
            lambda cell, directory: finetuning.fit(build, inputs, labels, options, cell, strategy, directory,
                                                   sample_weights=weights),
            lambda m: evaluate(m) if options.do_eval else {}, "f1", build,
            finetuning.training_data(tagged.name, inputs, labels, weights))
        results.update(grid.figures())
        model = grid.model
        finetuning.save(grid, tagged, config, vocab_file, output_dir, options,
                        label_all_subtokens=options.label_all_subtokens, doc_stride=stride,
                        document_context=documents and ner.marks_documents(train),
                        feature_based=options.feature_based,
                        lstm_units=options.lstm_units if options.feature_based else None)
    else:
        model = finetuning.existing_model(output_dir, build, options, config, vocab_file)
    step = finetuning.global_step(grid, output_dir)
    if options.do_eval:
        report = task.report(predict(model, "dev"), [s.tags for s in data["dev"][0]])
        results["dev"] = {k: report[k] for k in task.metric_names}
        write_results(os.path.join(output_dir, "eval_results.txt"), {**{f"eval_{k}": v for k, v in report.items()},
                                                                     **step})
    if options.do_predict:
        sentences = data["test"][0]
        predicted = predict(model, "test")
        lines = []
        for sentence, tags_out in zip(sentences, predicted):
            lines += [f"{w} {g} {p}" for w, g, p in zip(sentence.words, sentence.tags or ["O"] * len(tags_out),
                                                          tags_out)] + [""]
        write_lines(os.path.join(output_dir, "test_predictions.txt"), lines)
        if all(s.tags for s in sentences):
            report = task.report(predicted, [s.tags for s in sentences])
            results["test"] = {k: report[k] for k in task.metric_names}
            write_results(os.path.join(output_dir, "test_results.txt"),
                          {**{f"test_{k}": v for k, v in report.items()}, **step})
    return results


# ------------------------------------------------------------------------------------------------- serving
class TaggerModule(tf.Module):
    """Word tags on raw text (see the module docstring): a word's tag is read at its first piece, from the window
    that gives that piece the most context."""

    def __init__(self, model, preprocessor, tags, doc_stride=None, name="tagger"):
        super().__init__(name=name)
        hold(self, "model", model)
        self.preprocessor = preprocessor
        self.tag_names = tf.constant(list(tags))
        self.doc_stride = doc_stride or tag_features.default_stride(preprocessor.seq_length)
        self.serve = tf.function(self._serve, autograph=False, input_signature=[string_spec("text")])

    def _serve(self, text):
        pre = self.preprocessor
        text = drop_invalid_utf8(text)  # what the tokenizer reads, so that its offsets are into this text
        ids, word_starts, word_ends, _, _ = pre.tokenizer.tokenize_words_with_offsets(text)
        features = tag_features.tag_windows(ids, pre.seq_length, self.doc_stride, pre._cls, pre._sep)
        probabilities = tf.nn.softmax(self.model({k: features[k] for k in INPUT_NAMES})["logits"], axis=-1)
        word_probabilities = tf.gather_nd(probabilities, tf.stack([features["read_window"].flat_values,
                                                                   features["read_position"].flat_values], axis=1))
        best = tf.argmax(word_probabilities, axis=-1)
        by_word = word_starts.with_flat_values
        byte_start, byte_end = word_starts.to_tensor(0), word_ends.to_tensor(0)
        char = windows.char_offsets(text, tf.concat([byte_start, byte_end], axis=1))
        present = tf.sequence_mask(word_starts.row_lengths(), tf.shape(byte_start)[1])
        count = tf.shape(byte_start, out_type=tf.int64)[1]
        return {"tags": by_word(tf.gather(self.tag_names, best)).to_tensor(""),
                "scores": by_word(tf.reduce_max(word_probabilities, axis=-1)).to_tensor(0.0),
                "words": tf.where(present, tf.strings.substr(tf.broadcast_to(text[:, None], tf.shape(byte_start)),
                                                             byte_start, byte_end - byte_start), ""),
                "start": tf.where(present, char[:, :count], -1),
                "end": tf.where(present, char[:, count:], -1),
                "num_words": word_starts.row_lengths()}

    def signatures(self) -> dict:
        return {"serving_default": self.serve}
