"""The tagging family: one tag per word, as CoNLL-2003 NER (paper section 5.3's task).

`run_ner` fine-tunes on windows of whole words (`bert_tf.tasks.ner`), each word's tag on its first piece; the
exported `TaggerModule` splits words and windows in the graph (`bert_tf.tasks.windows`) and reads each word's
tag from the window that gives it the most context.
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from bert_tf import finetuning
from bert_tf.serving import hold, string_spec, labels_asset
from bert_tf.tasks import ner, task_info, windows
from bert_tf.tasks.base import DataError, Family
from bert_tf.tokenization import pack_inputs_graph
from bert_tf.training import write_lines, write_results


class Tagging(Family):
    kinds = ("tagging",)
    export_kind = "tagger"
    program = "run_ner"
    export_flags = frozenset({"doc_stride"})

    def build_model(self, task, config, dropout_rate: float, dtype=None):
        from bert_tf.models import BertEncoder, BertTokenClassifier

        return BertTokenClassifier(BertEncoder(config, dtype=dtype), num_classes=len(task.labels),
                                   dropout_rate=dropout_rate)

    def serving_module(self, model, info, preprocessor, *, doc_stride, scratch):
        module = TaggerModule(model, preprocessor=preprocessor, tags=info.labels, doc_stride=doc_stride)
        labels_asset(module, info.labels, scratch)
        return module


FAMILY = Tagging()


@dataclasses.dataclass(frozen=True)
class NerOptions(finetuning.FinetuneOptions):
    """`run_ner`'s settings: `label_all_subtokens` trains every word piece on its word's tag (default: the first
    piece only, the others ignored, as the paper)."""

    label_all_subtokens: bool = False


def run_ner(config, vocab_file: str, output_dir: str, options: NerOptions, data_dir: str | None, strategy=None,
            tfds_name: str | None = None) -> dict:
    """Fine-tunes a token tagger on CoNLL-2003-style files; writes `eval_results.txt` (entity-level precision,
    recall, F1 on valid.txt) and `test_predictions.txt` (`word gold predicted` per line). Returns the figures."""
    from bert_tf.tasks import get_task
    from bert_tf.tokenization import FullTokenizer

    strategy = strategy or tf.distribute.get_strategy()
    options.check(strategy.num_replicas_in_sync, output_dir)
    task = get_task("conll2003")
    tokenizer = FullTokenizer(vocab_file, do_lower_case=options.do_lower_case)
    train = task.sentences(data_dir, "train", tfds_name) if options.do_train else None
    if train is not None:
        tags = ner.tag_set(train)
    elif task_info.read(output_dir) is not None:
        tags = list(task_info.read(output_dir).labels)
    else:
        raise DataError(f"{output_dir}: no fine-tuned tagger here (task.json); train one with --do_train")
    splits = {"dev": options.do_eval, "test": options.do_predict}
    data = {}
    for split, wanted in splits.items():
        if wanted:
            sentences = task.sentences(data_dir, split, tfds_name)
            where = f"{tfds_name}:{split}" if tfds_name else os.path.join(data_dir, ner.FILES[split])
            ner.check_tags([s for s in sentences if s.tags], tags, where)
            data[split] = (sentences, ner.encode(sentences, tokenizer, tags, options.max_seq_length))
    os.makedirs(output_dir, exist_ok=True)
    results: dict = {}

    def predict(model, split):
        sentences, (inputs, _, _, spans) = data[split]
        batch_size = options.eval_batch_size if split == "dev" else options.predict_batch_size
        logits = model.predict(inputs, batch_size=batch_size, verbose=0)["logits"]
        return ner.word_tags(logits, spans, sentences, tags)

    def evaluate(model):
        return task.metrics(predict(model, "dev"), [s.tags for s in data["dev"][0]])

    tagged = dataclasses.replace(task, labels=tuple(tags))
    build = lambda: FAMILY.build_model(tagged, config, options.dropout_rate, options.policy)  # noqa: E731
    grid = None
    if options.do_train:
        inputs, labels, weights, _ = ner.encode(train, tokenizer, tags, options.max_seq_length,
                                                options.label_all_subtokens)
        grid = finetuning.grid_search(
            options, output_dir,
            lambda cell, directory: finetuning.fit(build, inputs, {"logits": labels}, options, cell, strategy,
                                                   directory, sample_weights={"logits": weights}),
            lambda m: evaluate(m) if options.do_eval else {}, "f1", build)
        results.update(grid.figures())
        model = grid.model
        finetuning.save(grid, tagged, config, vocab_file, output_dir, options,
                        label_all_subtokens=options.label_all_subtokens)
    else:
        model = finetuning.existing_model(output_dir, build, options)
    if options.do_eval:
        results["dev"] = evaluate(model)
        write_results(os.path.join(output_dir, "eval_results.txt"),
                      {**{f"eval_{k}": v for k, v in results["dev"].items()},
                       **finetuning.global_step(grid, output_dir)})
    if options.do_predict:
        sentences = data["test"][0]
        predicted = predict(model, "test")
        lines = []
        for sentence, tags_out in zip(sentences, predicted):
            lines += [f"{w} {g} {p}" for w, g, p in zip(sentence.words, sentence.tags or ["O"] * len(tags_out),
                                                          tags_out)] + [""]
        write_lines(os.path.join(output_dir, "test_predictions.txt"), lines)
        if all(s.tags for s in sentences):
            results["test"] = task.metrics(predicted, [s.tags for s in sentences])
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
        self.doc_stride = doc_stride or max(1, (preprocessor.seq_length - 2) // 2)
        self.serve = tf.function(self._serve, input_signature=[string_spec("text")])

    def _serve(self, text):
        pre = self.preprocessor
        seq = pre.seq_length
        ids, word_starts, word_ends, _, _ = pre.tokenizer.tokenize_words_with_offsets(text)
        pieces = ids.merge_dims(1, 2)
        example, first, length = windows.plan(pieces.row_lengths(), seq - 2, self.doc_stride)
        inputs = pack_inputs_graph([windows.gather_windows(pieces, example, first, length)], seq, pre._cls,
                                   pre._sep)
        probabilities = tf.nn.softmax(self.model(inputs)["logits"][:, 1:, :], axis=-1)  # [W, seq - 1, tags]
        width = seq - 2
        owner = windows.max_context(example, first, length, width)
        where = tf.where(owner)  # (window, position) pairs: exactly one per piece
        piece = tf.gather_nd(windows.global_index(pieces, example, first, width), where)
        per_piece = tf.scatter_nd(piece[:, None], tf.gather_nd(probabilities, where),
                                  tf.stack([tf.size(pieces.flat_values, out_type=tf.int64),
                                            tf.shape(probabilities, out_type=tf.int64)[-1]]))
        word_probabilities = tf.gather(per_piece, ids.values.row_splits[:-1])  # first piece of every word
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
