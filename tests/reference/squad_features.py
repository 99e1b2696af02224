"""The original run_squad.py's SQuAD feature algorithm in plain Python, the independent reference that
tests/tasks/test_squad.py holds `bert_tf.tasks.span_features.span_features` equal to.

It follows google-research/bert run_squad.py's `convert_examples_to_features` (whitespace words, per-word
WordPiece, answer word span -> piece span -> `_improve_answer_span`, doc-stride windows, `_check_is_max_context`),
written for this project's `SquadExample`, with a feature record of its own in the original's form; it was the
library's own feature path before the in-graph one replaced it.
"""

import dataclasses

from bert_tf.tasks.base import DataError
from bert_tf.tokenization import pack_inputs


@dataclasses.dataclass
class SquadFeature:
    example_index: int
    input_word_ids: list[int]
    input_mask: list[int]
    input_type_ids: list[int]
    token_to_word: dict  # feature position -> original word index
    max_context: dict  # feature position -> is this window the token's max-context window
    start_position: int = 0
    end_position: int = 0


def _improve_span(pieces, start, end, tokenizer, answer_text):
    """The tightest piece span that tokenizes to the answer (e.g. "1895" inside "(1895-1943)."), as the original."""
    target = " ".join(tokenizer.tokenize(answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(pieces[new_start:new_end + 1]) == target:
                return new_start, new_end
    return start, end


def _max_context(spans, span_index, position):
    """Whether window `span_index` gives `position` the most context: min(left, right) + 0.01 * length, best."""
    best_score, best_span = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_span = score, index
    return best_span == span_index


def convert_examples(examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64,
                     is_training=False) -> list[SquadFeature]:
    """Examples -> windowed features (one example may give several)."""
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    features = []
    for example_index, example in enumerate(examples):
        query = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.question))[:max_query_length]
        pieces, piece_to_word, word_to_piece = [], [], []
        for word_index, word in enumerate(example.doc_tokens):
            word_to_piece.append(len(pieces))
            for piece in tokenizer.tokenize(word):
                piece_to_word.append(word_index)
                pieces.append(piece)
        answer_start = answer_end = None
        if is_training and not example.is_impossible:
            answer_start = word_to_piece[example.start_word]
            answer_end = (word_to_piece[example.end_word + 1] - 1 if example.end_word < len(example.doc_tokens) - 1
                          else len(pieces) - 1)
            answer_start, answer_end = _improve_span(pieces, answer_start, answer_end, tokenizer,
                                                     example.answer_text)
        room = max_seq_length - len(query) - 3
        if room < 1:
            raise DataError(f"--max_seq_length={max_seq_length} leaves no room for the context after a question of "
                            f"{len(query)} pieces; raise it or lower --max_query_length")
        spans, start = [], 0
        while start < len(pieces):
            length = min(len(pieces) - start, room)
            spans.append((start, length))
            if start + length == len(pieces):
                break
            start += min(length, doc_stride)
        if not spans:  # an empty context: one empty window, where the original makes none (`windows.plan`)
            spans = [(0, 0)]
        piece_ids = tokenizer.convert_tokens_to_ids(pieces)
        first = len(query) + 2  # the window's first position: after [CLS] question [SEP]
        for span_index, (start, length) in enumerate(spans):
            packed = pack_inputs(query, piece_ids[start:start + length], max_seq_length, cls, sep)
            token_to_word = {first + i: piece_to_word[start + i] for i in range(length)}
            max_context = {first + i: _max_context(spans, span_index, start + i) for i in range(length)}
            feature = SquadFeature(example_index, packed["input_word_ids"], packed["input_mask"],
                                   packed["input_type_ids"], token_to_word, max_context)
            if is_training and not example.is_impossible:
                if start <= answer_start and answer_end <= start + length - 1:
                    offset = first - start
                    feature.start_position, feature.end_position = answer_start + offset, answer_end + offset
                # else: the answer is outside this window; the target is [CLS] (position 0), as the original
            features.append(feature)
    return features


