"""tensorflow-text's WordPiece learner (`wordpiece_tokenizer_learner_lib.learn`): the same vocabulary, token for
token, in a fraction of its time.

The learner searches for a count threshold; at each threshold it runs a few iterations, each of which counts every
substring that runs from a piece start of a word (every position in the first iteration, then the starts of the
word's greedy split into the current pieces) to any later position, walks the substrings from the longest down
subtracting each one's remaining count from its prefixes, and keeps those whose remaining count reaches the
threshold. Once every longer substring from the same start has taken its share, what remains of a substring's count
is the count of the piece starts from which it runs to the end of its word. So this module counts those suffixes
directly: one per piece start instead of one per (start, end) pair and the walk over their prefixes. The first
iteration's counts do not depend on the threshold and are made once for the whole search. Everything else (which
words and characters take part, the greedy split, the search, the final order) is tensorflow-text's own functions
or follows its code step for step; `tests/data_gen/test_build_vocab.py` checks the vocabularies are the learner's.
"""

from __future__ import annotations

from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as lib


def learn(word_counts, vocab_size: int, reserved_tokens: list[str], lower_thresh: int) -> list[str]:
    """`lib.learn(word_counts, vocab_size, reserved_tokens, lower_thresh=lower_thresh)` with its other defaults."""
    params = lib.Params(upper_thresh=int(1e7), lower_thresh=lower_thresh, num_iterations=4,
                        max_input_tokens=int(5e6), max_token_length=50, max_unique_chars=1000, vocab_size=vocab_size,
                        slack_ratio=0.05, include_joiner_token=True, joiner="##", reserved_tokens=reserved_tokens)
    word_counts = list(word_counts)
    upper, lower = lib.get_search_threshs(word_counts, params.upper_thresh, params.lower_thresh)
    words = lib.get_input_words(word_counts, params.reserved_tokens, params.max_token_length)
    words = lib.filter_input_words(words, lib.get_allowed_chars(words, params.max_unique_chars),
                                   params.max_input_tokens)
    chars = lib.extract_char_tokens(words)
    first = _suffix_counts(words, None, params)
    slack = max(0.0, params.slack_ratio * params.vocab_size)
    while True:  # lib.learn_binary_search, as a loop
        thresh = (upper + lower) // 2
        vocab = _learn_with_thresh(words, chars, first, thresh, params)
        within = len(vocab) <= params.vocab_size and params.vocab_size - len(vocab) <= slack
        if within or lower >= upper or thresh <= 1:
            return vocab
        if len(vocab) > params.vocab_size:
            lower = thresh + 1
        else:
            upper = thresh - 1


def _learn_with_thresh(words, chars, first, thresh, params) -> list[str]:
    """`lib.learn_with_thresh`: the vocabulary of the pieces whose counts reach `thresh`."""
    tokens = lib.ensure_all_tokens_exist(chars, {}, params.include_joiner_token, params.joiner)
    for iteration in range(params.num_iterations):
        counts = first if iteration == 0 else _suffix_counts(words, tokens, params)
        kept = {}
        for by_token in counts:  # longest first, as the learner walks them (see `_suffix_counts`)
            for token, count in by_token.items():
                if count >= thresh:
                    kept[token] = count
        tokens = lib.ensure_all_tokens_exist(chars, kept, params.include_joiner_token, params.joiner)
    return lib.generate_final_vocabulary(params.reserved_tokens, chars, tokens)


def _suffix_counts(words, tokens, params) -> list[dict[str, int]]:
    """For each piece length, longest first: {piece: count} of the words' suffixes from each piece start, with the
    joiner where the start is not the word's first character. Piece starts: every position without `tokens`, else
    those of the word's greedy longest-match split into `tokens` (a word that does not split is left out). Kept by
    length as the learner keeps them: a word that itself begins with the joiner could spell a piece the same as a
    shorter suffix, and then the shorter one's count is the one kept, which is what walking longest first gives."""
    joiner = params.joiner if params.include_joiner_token else ""
    counts: list[dict[str, int]] = [{} for _ in range(params.max_token_length + 1)]
    for word, count in words:
        if tokens is None:
            starts = range(len(word))
        else:
            ends = lib.get_split_indices(word, tokens, params.include_joiner_token, params.joiner)
            if not ends:
                continue
            starts = [0, *ends[:-1]]
        for start in starts:
            piece = word[start:]
            by_token = counts[len(piece)]
            key = joiner + piece if start else piece
            by_token[key] = by_token.get(key, 0) + count
    return counts[::-1]

