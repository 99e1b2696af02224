"""WordPiece tokenization identical to the original BERT `FullTokenizer`, in Python and in the TF graph.

Two implementations of one set of rules (google-research/bert tokenization.py, paper section 3):

1. clean: drop U+0000, U+FFFD and control characters (categories Cc, Cf except tab/newline/CR); map tab, newline,
   CR and category Zs to a space; put spaces around CJK ideographs;
2. split on whitespace; with `do_lower_case`: lowercase, NFD, drop combining marks (Mn);
3. split on punctuation (ASCII non-alphanumeric printables and every Unicode P* category), keeping it;
4. greedy longest-match-first WordPiece with `##` continuations; a word over 200 characters, or one with a piece
   not in the vocabulary, becomes `[UNK]`.

`FullTokenizer` is the Python API (examples, post-processing). `InGraphTokenizer` does the same in-graph on string
tensors, and `BertTokenizerLayer` (`bert_tf.tokenizer_layer`, also importable from here) is it as a Keras layer for
`tf.data` and exported SavedModels. We do not use tensorflow-text's own normalisers: `BertTokenizer`'s
lower-casing and `FastBertTokenizer`'s normaliser apply NFKC case folding, which the original does not (e.g. U+00B4
`´`, full-width letters, ligatures, `ß`), so step 1-3 are written with core string ops and only step 4 runs on
tensorflow-text's `FastWordpieceTokenizer`. Pure-ASCII lines, on which tensorflow-text's whitespace and punctuation
rules are the original's, are cleaned and lowercased with core ops by the in-graph path without offsets and then
split and WordPiece-tokenized by one end-to-end `FastWordpieceTokenizer` op.
"""

from __future__ import annotations

import functools
import os
import sys
import unicodedata

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.deferred_imports import defer_submodule
from bert_tf.heap import collector_paused

MAX_CHARS_PER_WORD = 200

# Code point blocks the original treats as CJK ideographs (each becomes its own word).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


class VocabError(ValueError):
    """A vocabulary file that cannot serve BERT (missing, empty, without the special tokens)."""


def load_vocab(vocab_file: str) -> dict[str, int]:
    """token -> id, one token per line in id order (the released `vocab.txt` format). A token on several lines maps
    to its last, as in the original's `load_vocab` (some released vocabularies list a token twice)."""
    tokens = _read_tokens(vocab_file)
    vocab = {token: index for index, token in enumerate(tokens)}
    missing = [t for t in ("[UNK]", "[CLS]", "[SEP]") if t not in vocab]
    if missing:
        raise VocabError(f"{vocab_file}: missing required token(s) {', '.join(missing)}; a BERT vocab needs [PAD] "
                         "[UNK] [CLS] [SEP] [MASK] (build_vocab writes them)")
    return vocab


def vocab_tokens(tokens) -> tuple[str, ...]:
    """Tokens in id order (a vocabulary's lines, stripped) -> the same, with every line that a later line repeats
    replaced by a placeholder that no text can produce (it holds spaces, and words never do): a WordPiece model
    built from the list then gives each token its `load_vocab` id, and every other id its line number."""
    tokens = list(tokens)
    last = {token: index for index, token in enumerate(tokens)}
    return tuple(token if last[token] == index else f"[unused: line {index + 1} is repeated later]"
                 for index, token in enumerate(tokens))


def check_case(vocab_file: str, do_lower_case: bool) -> None:
    """A `VocabError` where `do_lower_case` contradicts the vocabulary. With a vocabulary of which lower-casing
    changes no token while over 5 % have lower-case letters (an uncased model's), `do_lower_case` off would turn
    every capitalised word into [UNK] or pieces the model never saw; with a cased model's (lower-casing changes over
    5 % of its tokens), lower-casing and stripping accents would leave those tokens unreachable. A vocabulary of
    scripts without case decides neither. The original checks the same from the checkpoint's name
    (`validate_case_matches_checkpoint`); the vocabulary tells it for any model."""
    uncased = vocab_is_uncased(vocab_file)
    if not do_lower_case and uncased:
        raise VocabError(f"{vocab_file}: an uncased vocabulary (lower-casing changes none of its tokens) with "
                         "do_lower_case off: capitalised words would become [UNK] or pieces the model never saw; "
                         "turn do_lower_case on, or give the cased model's vocab.txt")
    if do_lower_case and uncased is False:
        tokens = [t for t in _read_tokens(vocab_file) if not (t.startswith("[") and t.endswith("]"))]
        raise VocabError(f"{vocab_file}: a cased vocabulary (lower-casing changes {sum(t != t.lower() for t in tokens)}"
                         f" of its {len(tokens)} tokens) with do_lower_case on: lower-casing would leave them "
                         "unreachable; turn do_lower_case off")


def lower_case_for(vocab_file: str, do_lower_case: bool | None) -> bool | None:
    """The `do_lower_case` a model with this vocabulary reads its text with: `do_lower_case` where given, held to the
    vocabulary (`check_case`), else as the vocabulary tells it (`vocab_is_uncased`; None where it tells neither)."""
    if do_lower_case is None:
        return vocab_is_uncased(vocab_file)
    check_case(vocab_file, do_lower_case)
    return do_lower_case


def vocab_is_uncased(vocab_file: str) -> bool | None:
    """True for an uncased model's vocabulary (lower-casing changes none of its tokens while over 5 % have lower-case
    letters), False for a cased one's (lower-casing changes over 5 %), None where it tells neither (a script
    without case, CJK, Arabic, ...). Bracketed special tokens are left out."""
    tokens = [t for t in _read_tokens(vocab_file) if not (t.startswith("[") and t.endswith("]"))]
    cased = sum(t != t.lower() for t in tokens)  # "ℝ" is upper case, but lower-casing leaves it as it is
    lower = sum(t != t.upper() for t in tokens)  # a script without case (CJK, Arabic, ...) has few of these
    if not cased and lower > 0.05 * len(tokens):
        return True
    if cased > 0.05 * len(tokens):
        return False
    return None


def _read_tokens(vocab_file: str) -> list[str]:
    """A vocabulary file's tokens, one per line, stripped, trailing empty lines dropped."""
    vocab_file = os.fspath(vocab_file)
    try:
        with fileio.open(vocab_file) as f:
            tokens = [line.rstrip("\n").rstrip("\r") for line in f]
    except FileNotFoundError:
        raise VocabError(f"{vocab_file}: vocab file not found") from None
    except IsADirectoryError:
        raise VocabError(f"{vocab_file}: a directory; give the vocab.txt file in it") from None
    except UnicodeDecodeError as e:
        raise VocabError(f"{vocab_file}: not UTF-8 ({e})") from None
    while tokens and tokens[-1] == "":
        tokens.pop()
    if not tokens:
        raise VocabError(f"{vocab_file}: the vocabulary is empty; build one with build_vocab")
    return [token.strip() for token in tokens]


# ------------------------------------------------------------------------------------------------ character rules
def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def to_unicode(text) -> str:
    """str as is; bytes decoded as UTF-8 with invalid bytes dropped, as the original `convert_to_unicode` does."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise TypeError(f"expected str or bytes, got {type(text).__name__}")


class _CharTable(dict):
    """A `str.translate` table filled in per code point on first sight (`rule(cp)`: a string to put in its place,
    None to drop it), so that a character's rules run once per process instead of once per occurrence. It keeps at
    most `LIMIT` code points (text rarely has more kinds); the rest are looked up every time."""

    LIMIT = 1 << 16

    def __init__(self, rule):
        super().__init__()
        self.rule = rule

    def __missing__(self, cp):
        try:
            value = self.rule(cp)
        except LookupError as e:  # str.translate would read it as "no mapping" and keep the character
            raise RuntimeError(f"the tokenizer's rule for U+{cp:04X} failed: {e!r}") from e
        if len(self) < self.LIMIT:
            self[cp] = value
        return value


def _clean_rule(cp: int):
    ch = chr(cp)
    if cp == 0 or cp == 0xFFFD or _is_control(ch):
        return None
    if _is_whitespace(ch):
        return " "
    return f" {ch} " if _is_cjk(cp) else ch


_CLEAN = _CharTable(_clean_rule)  # step 1
_NO_MARKS = _CharTable(lambda cp: None if unicodedata.category(chr(cp)) == "Mn" else chr(cp))  # step 2's accents
_PUNCTUATION_APART = _CharTable(lambda cp: f" {chr(cp)} " if _is_punctuation(chr(cp)) else chr(cp))  # step 3


def basic_tokenize(text, do_lower_case: bool = True) -> list[str]:
    """Steps 1-3: cleaned, optionally lower-cased and accent-stripped words and punctuation marks."""
    words = to_unicode(text).translate(_CLEAN).split()
    if do_lower_case:  # word by word, as the original (lower() and NFD see one whitespace-free word at a time)
        words = [unicodedata.normalize("NFD", word.lower()).translate(_NO_MARKS) for word in words]
    return " ".join(words).translate(_PUNCTUATION_APART).split()


def wordpiece_tokenize(word: str, vocab, unk_token: str = "[UNK]") -> list[str]:
    """Step 4 on one word: greedy longest match first, `##` for continuations, all-or-[UNK]."""
    if len(word) > MAX_CHARS_PER_WORD:
        return [unk_token]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


class FullTokenizer:
    """Text to WordPiece tokens and ids, exactly as the original BERT `FullTokenizer`.

    Args:
      vocab_file: `vocab.txt`, one token per line; must contain [UNK], [CLS] and [SEP].
      do_lower_case: True for uncased models (lowercase and strip accents), False for cased ones.
    """

    def __init__(self, vocab_file, do_lower_case: bool = True):
        self.vocab_file = os.fspath(vocab_file)
        self.do_lower_case = do_lower_case
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}

    def tokenize(self, text) -> list[str]:
        return [piece for word in basic_tokenize(text, self.do_lower_case)
                for piece in wordpiece_tokenize(word, self.vocab)]

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        unk = self.vocab["[UNK]"]
        return [self.vocab.get(token, unk) for token in tokens]

    def convert_ids_to_tokens(self, ids) -> list[str]:
        try:
            return [self.inv_vocab[int(i)] for i in ids]
        except KeyError as e:
            raise ValueError(f"id {e.args[0]} has no token in the vocabulary (ids 0-{max(self.inv_vocab)}; a line "
                             "that a later line repeats has none)") from None


# ------------------------------------------------------------------------------------------------------ packing
def truncate_pair(tokens_a: list, tokens_b: list | None, max_tokens: int) -> None:
    """In place, as the original: drop one token at a time from the end of the longer list until both fit."""
    tokens_b = tokens_b if tokens_b is not None else []
    while len(tokens_a) + len(tokens_b) > max_tokens:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def pack_inputs(ids_a, ids_b=None, seq_length=128, cls_id=None, sep_id=None, pad_id=0, vocab=None):
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated longest-first and padded to `seq_length`.

    Returns the three model inputs as lists of ints: `input_word_ids`, `input_mask`, `input_type_ids`.
    Pass `cls_id`/`sep_id` or a `vocab` dict to look them up.
    """
    if cls_id is None or sep_id is None:
        cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
    # An empty B is no B, as the original's `if tokens_b:` has it, before truncation and after it.
    a, b = list(ids_a), (list(ids_b) if ids_b else None)
    truncate_pair(a, b, seq_length - (3 if b is not None else 2))
    ids = [cls_id] + a + [sep_id]
    types = [0] * len(ids)
    if b:
        ids += b + [sep_id]
        types += [1] * (len(b) + 1)
    pad = seq_length - len(ids)
    return {"input_word_ids": ids + [pad_id] * pad, "input_mask": [1] * len(ids) + [0] * pad,
            "input_type_ids": types + [0] * pad}


# ---------------------------------------------------------------------------------------------------- in-graph
def _class(ranges) -> str:
    return "".join(f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in ranges)


_CJK = f"[{_class(CJK_RANGES)}]"
_PUNCT = r"[!-/:-@\[-`{-~\p{P}]"
# Characters removed before splitting: NUL and U+FFFD and controls other than tab/newline/CR.
_REMOVED = r"[\x{0}-\x{8}\x{B}\x{C}\x{E}-\x{1F}\x{7F}-\x{9F}\x{FFFD}\p{Cf}]"
# The original maps tab/newline/CR and Zs to spaces and then splits with Python's str.split(), which also splits at
# U+001C-U+001F, U+0085 (all removed above as controls) and U+2028/U+2029 (kept, so they split here).
_SPACE = r"[\t\n\r\p{Zs}\x{2028}\x{2029}]"
# The same without U+0020, for mapping whitespace to spaces: Zs lists the space itself, and with it RE2 would rewrite
# every space as a space, a no-op that would be the costliest regex step on English text.
_SPACE_BUT_SPACE = r"[\t\n\r\x{A0}\x{1680}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}\x{2028}\x{2029}]"
# Valid UTF-8 as ICU (and Python) decode it: no encoded surrogates, nothing past U+10FFFF, no overlong forms.
_VALID_UTF8 = r"[\x{0}-\x{D7FF}\x{E000}-\x{10FFFF}]*"


def drop_invalid_utf8(text):
    """Strings -> the same with the bytes of invalid UTF-8 dropped, as the original's `convert_to_unicode` (errors=
    "ignore") does. Nearly all text is valid, and RE2's check costs far less than ICU's repair, so a batch is
    repaired only when some line needs it."""
    valid = tf.reduce_all(valid_utf8(text))
    return tf.cond(valid, lambda: tf.identity(text),
                   lambda: tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore"))


def valid_utf8(text):
    """Strings -> bool, which of them are valid UTF-8 as ICU and Python decode it (the rest `drop_invalid_utf8`
    repairs)."""
    return tf.strings.regex_full_match(text, _VALID_UTF8)


def _fast_wordpiece(vocab: tuple, max_bytes_per_word: int, no_pretokenization: bool):
    """tensorflow-text's WordPiece tokenizer of `vocab`, or None where it cannot be built (one that splits words
    itself, from a vocabulary without a token free of punctuation). Eagerly, the same one for the same arguments:
    building one is the slow part of making a layer, and a process often makes several tokenizers of one vocabulary
    (features, evaluation, the serving export). In a graph, a new one each time (its model is a constant of that
    graph)."""
    if not tf.executing_eagerly():
        return _build_fast_wordpiece(vocab, max_bytes_per_word, no_pretokenization)
    return _cached_fast_wordpiece(vocab, max_bytes_per_word, no_pretokenization)


def load_tensorflow_text():
    """The `tensorflow_text` module, imported at first use (processes that never tokenize in-graph skip it) and
    without garbage collections (`bert_tf.heap`): one of them could be a full collection over TensorFlow's
    objects. In a process that has not loaded Keras (data_gen's main process, `data_gen.keras_free`), the package's
    Keras layers (`tensorflow_text.keras`), which would load it, are deferred to their first use."""
    if "tensorflow_text" not in sys.modules:  # the pause is process-wide: only for the import itself
        with collector_paused():
            if "keras" not in sys.modules:
                defer_submodule("tensorflow_text.python.keras")
            import tensorflow_text  # noqa: F401
    return sys.modules["tensorflow_text"]


def _build_fast_wordpiece(vocab, max_bytes_per_word, no_pretokenization):
    """The model is compiled by tensorflow-text's builder and handed over as a uint8 tensor made from its bytes:
    given the vocabulary instead, the tokenizer makes that tensor from a Python list of the model's million bytes,
    which takes longer than compiling it."""
    tf_text = load_tensorflow_text()
    from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder as builder

    try:
        model = builder.build_fast_wordpiece_model(list(vocab), max_bytes_per_word, "##", "[UNK]",
                                                   no_pretokenization, False)  # no detokenization
    except RuntimeError:
        if no_pretokenization:
            raise
        return None
    return tf_text.FastWordpieceTokenizer(model_buffer=tf.constant(np.frombuffer(model, np.uint8)),
                                          token_out_type=tf.int64)


_cached_fast_wordpiece = functools.lru_cache(maxsize=8)(_build_fast_wordpiece)


class InGraphTokenizer:
    """In-graph WordPiece tokenizer: string tensor [batch] -> ragged int64 ids [batch, (pieces)] (`tokenize`).

    Same output as `FullTokenizer` (tested token for token against it and against HF `tokenizers`). With
    `tokenize_with_offsets` it also returns byte offsets [start, end) of every piece in the input string: the input
    characters the piece's normalised bytes came from (`_Alignment`), as HF `tokenizers` reports them, and the
    characters normalisation removed right after them.

    It needs TensorFlow and tensorflow-text only; `BertTokenizerLayer` (`bert_tf.tokenizer_layer`) is the same
    tokenizer as a Keras layer, for models, `tf.data` and SavedModels. data_gen's main process tokenizes with this
    class and never loads Keras (`data_gen.keras_free`).

    Args:
      vocab_file: `vocab.txt` path; its contents are read once and kept (`vocab`, and the layer's config), so
        neither the tokenizer nor a SavedModel containing the layer needs the file afterwards.
      do_lower_case: as in `FullTokenizer`.
      vocab: the tokens in id order, instead of `vocab_file`.
    """

    def __init__(self, vocab_file=None, do_lower_case=True, vocab=None):
        if vocab is None:
            if vocab_file is None:
                raise ValueError(f"{type(self).__name__} needs vocab_file (or vocab, a list of tokens)")
            load_vocab(vocab_file)  # its checks
            vocab = _read_tokens(vocab_file)
        # Set past the layer's attribute tracking, which would wrap the tokens one by one: a vocabulary holds no
        # variables or layers to track.
        object.__setattr__(self, "vocab", vocab_tokens(vocab))
        self.do_lower_case = do_lower_case
        with tf.init_scope():  # the model buffers must outlive any tf.function that happens to build the layer
            self._wordpiece = _fast_wordpiece(self.vocab, 4 * MAX_CHARS_PER_WORD, True)
            # Pure-ASCII lines, cleaned and lowercased: splitting at whitespace and punctuation (its definition on
            # ASCII is the original's, and ASCII has no CJK) plus WordPiece in one op, faster than our regex
            # steps; a character is a byte, so the byte limit is the original's 200-character limit. None if every
            # token has punctuation (special tokens only): then all lines take the general path.
            self._ascii_wordpiece = _fast_wordpiece(self.vocab, MAX_CHARS_PER_WORD, False)

    def _normalize(self, tokens):
        """Step 2 on strings: drop controls; lowercase, NFD and strip marks if uncased.

        Lower-casing whole whitespace tokens (or lines), never punctuation-split pieces, keeps Python's context rule
        for the final sigma as the original has it (`ΟΣ.Α` -> `οσ.α` but `ΟΣ` -> `ος`)."""
        tf_text = load_tensorflow_text()
        norm = tf.strings.regex_replace(tokens, _REMOVED, "")
        if self.do_lower_case:
            norm = tf.strings.lower(norm, encoding="utf-8")
            norm = tf.strings.regex_replace(tf_text.normalize_utf8(norm, "NFD"), r"\p{Mn}", "")
        return norm

    def _ascii_and_other_lines(self, lines):
        """Lines [batch] -> (indices of the printable-ASCII lines, those lines normalised, indices of the others,
        those lines normalised with invalid UTF-8 dropped). Printable ASCII (with tab, newline, CR: most English
        text) has nothing for the control removal, UTF-8 repair, NFD and mark stripping to change, so those lines
        skip them and use the ASCII lower-casing; an ASCII line with a control character takes the general path."""
        lines = tf.reshape(lines, [-1])
        is_ascii = tf.strings.regex_full_match(lines, r"[\t\n\r\x20-\x7E]*")
        ascii_index, other_index = tf.where(is_ascii)[:, 0], tf.where(~is_ascii)[:, 0]
        ascii_lines = tf.gather(lines, ascii_index)
        if self.do_lower_case:
            ascii_lines = tf.strings.lower(ascii_lines)
        other = drop_invalid_utf8(tf.gather(lines, other_index))
        return ascii_index, ascii_lines, other_index, self._normalize(other)

    def _normalize_lines(self, lines):
        """`_normalize` on whole lines, with invalid UTF-8 dropped."""
        ascii_index, ascii_lines, other_index, other = self._ascii_and_other_lines(lines)
        return tf.dynamic_stitch([tf.cast(ascii_index, tf.int32), tf.cast(other_index, tf.int32)],
                                 [ascii_lines, other])

    def _split_normalized(self, lines):
        """Steps 1 (spaces) and 3 on normalised lines -> words ragged [batch, (words)]: the same result as splitting
        first, because whitespace blocks the final-sigma context of lower-casing just as the original's per-token
        lower-casing does, and normalisation creates no whitespace (punctuation and CJK it may create are split
        here, as in the original)."""
        spaced = tf.strings.regex_replace(lines, _SPACE_BUT_SPACE, " ")
        spaced = tf.strings.regex_replace(spaced, f"({_PUNCT}|{_CJK})", r" \1 ")
        return tf.strings.split(spaced)  # the only whitespace left is ASCII space

    def split_words(self, text, with_offsets=True):
        """Steps 1-3: normalised words ragged [batch, (words)], and their start and end offsets in input bytes
        (None, None with `with_offsets=False`, which takes a faster path). The input's bytes once invalid UTF-8 is
        dropped (`drop_invalid_utf8`), as it is before splitting: valid input's own; a caller that cuts text at
        these offsets cuts the dropped text (the raw-text exports do)."""
        if not with_offsets:  # fast path, whole lines at a time
            return self._split_normalized(self._normalize_lines(text)), None, None
        words, starts, ends, _ = self._split_words_aligned(text)
        return words, starts, ends

    def _split_words_aligned(self, text):
        """`split_words` with offsets, and a function (words' flat index, byte offsets into the normalised word)
        -> byte offsets into the input, for the pieces of the words (`_Alignment`)."""
        text = drop_invalid_utf8(text)
        # tf-text's regex split stops at NUL; U+0001 is removed like NUL and has the same length, so offsets hold.
        text = tf.strings.regex_replace(text, r"\x00", "\x01")
        # Whitespace tokens (CJK ideographs are tokens of their own) of the *input*, so offsets point into it.
        tokens, starts, ends = _regex_split_with_offsets(text, f"{_SPACE}+|{_CJK}", _CJK)
        flat = tokens.flat_values
        norm = self._normalize(flat)
        words, word_starts, word_ends = _regex_split_with_offsets(norm, _PUNCT, _PUNCT)
        alignment = _Alignment(flat, norm, self._normalize, self.do_lower_case)
        token = row_ids(words)
        token_start = tf.gather(starts.flat_values, token)
        start = token_start + alignment.to_input(token, word_starts.flat_values, end=False)
        end = token_start + alignment.to_input(token, word_ends.flat_values, end=True)

        def to_input(word, offsets, end):  # offsets into the normalised word -> into the input
            return (tf.gather(token_start, word)
                    + alignment.to_input(tf.gather(token, word), tf.gather(word_starts.flat_values, word) + offsets,
                                         end=end))

        merged = merge_words(tokens.with_flat_values(words))  # [batch, (tokens), (words)] -> [batch, (words)]
        return merged, merged.with_flat_values(start), merged.with_flat_values(end), to_input

    def tokenize_words_with_offsets(self, text):
        """strings [batch] -> (ids [batch, (words), (pieces)], word starts, word ends [batch, (words)], piece
        starts, piece ends [batch, (words), (pieces)]), offsets in input bytes; words as the basic tokenizer splits
        them (whitespace, punctuation, CJK), each with at least one piece. A piece spans the input characters its
        normalised bytes came from (as HF `tokenizers` reports them): one character may be in several pieces (a
        Hangul syllable's letters); characters normalisation removed (controls, stripped accents) belong to the
        piece and word before them in their whitespace token (HF leaves them out; text cut at these offsets keeps a
        word's trailing marks), and to none at the token's start. A word over 200 characters is one `[UNK]` over
        the whole word."""
        text = tf.convert_to_tensor(text, tf.string)
        words, starts, ends, to_input = self._split_words_aligned(text)
        flat, too_long = _cap_long_words(words.flat_values)
        ids, piece_starts, piece_ends = self._wordpiece.tokenize_with_offsets(flat)
        word = row_ids(ids)
        long_piece = tf.gather(too_long, word)
        start = tf.where(long_piece, tf.gather(starts.flat_values, word),
                         to_input(word, piece_starts.flat_values, end=False))
        end = tf.where(long_piece, tf.gather(ends.flat_values, word), to_input(word, piece_ends.flat_values, end=True))
        by_word = words.with_flat_values(ids)
        return by_word, starts, ends, by_word.with_flat_values(start), by_word.with_flat_values(end)

    def tokenize_with_offsets(self, text):
        """strings [batch] -> (ids, starts, ends), each ragged [batch, (pieces)], offsets in input bytes."""
        ids, _, _, starts, ends = self.tokenize_words_with_offsets(text)
        return merge_words(ids), merge_words(starts), merge_words(ends)

    def tokenize(self, text):
        """strings [batch] -> ragged int64 ids [batch, (pieces)] (skips the offset bookkeeping)."""
        text = tf.convert_to_tensor(text, tf.string)
        if self._ascii_wordpiece is None:
            return self._wordpiece_words(self.split_words(text, with_offsets=False)[0])
        ascii_index, ascii_lines, other_index, other = self._ascii_and_other_lines(text)
        ascii_ids = self._ascii_wordpiece.tokenize(ascii_lines)

        def with_other_lines():  # the general path for the other lines, then every line back in its place
            other_ids = self._wordpiece_words(self._split_normalized(other))
            order = tf.math.invert_permutation(tf.concat([ascii_index, other_index], 0))
            return tf.gather(tf.concat([ascii_ids, other_ids], 0), order)

        # a batch of printable ASCII only (most English batches) runs none of the general path's ops
        return tf.cond(tf.size(other_index) > 0, with_other_lines, lambda: ascii_ids)

    def _wordpiece_words(self, words):
        """Words ragged [batch, (words)] -> ids ragged [batch, (pieces)]."""
        flat, _ = _cap_long_words(words.flat_values)
        return merge_words(words.with_flat_values(self._wordpiece.tokenize(flat)))


def __getattr__(name):
    """`BertTokenizerLayer`, importable from here too: it lives in `bert_tf.tokenizer_layer`, which imports Keras,
    and this module does not."""
    if name == "BertTokenizerLayer":
        from bert_tf.tokenizer_layer import BertTokenizerLayer

        return BertTokenizerLayer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Alignment:
    """Where the bytes of normalised whitespace tokens came from in the input tokens.

    Normalisation (step 2) maps each input character to zero or more characters on its own: removal, lower-casing
    (whose one context rule, the final sigma, keeps the length), NFD and mark stripping. So the byte lengths of the
    characters normalised one by one add up to the token's normalised bytes, and byte b of the normalised token came
    from the input character whose share covers it. Tokens that normalisation changed at most by ASCII lower-casing
    map byte for byte and skip the per-character work (most English tokens). Where NFD reorders combining marks it
    keeps (a few Mc viramas), a piece boundary inside such a run can shift by a mark; a token whose shares do not
    add up (none known) maps every offset to its ends.

    Args:
      raw: input tokens [n]; norm: the same normalised [n]; normalize: step 2 on strings; lower: `do_lower_case`.
    """

    def __init__(self, raw, norm, normalize, lower: bool):
        self.raw_length = tf.cast(tf.strings.length(raw), tf.int64)
        self.same = tf.equal(norm, tf.strings.lower(raw) if lower else raw)  # ASCII-only lower-casing
        changed = tf.where(~self.same)[:, 0]
        chars = tf.strings.unicode_decode(tf.gather(raw, changed), "UTF-8")  # code points; the input is valid UTF-8
        # each distinct character normalised once (a text has a few hundred), none made into a string of its own
        distinct, which = tf.unique(chars.flat_values)
        alone = tf.strings.unicode_encode(distinct[:, None], "UTF-8")
        norm_bytes = tf.gather(tf.cast(tf.strings.length(normalize(alone)), tf.int64), which)
        code = tf.cast(chars.flat_values, tf.int64)
        raw_bytes = 1 + tf.cast(code >= 0x80, tf.int64) + tf.cast(code >= 0x800, tf.int64) + tf.cast(
            code >= 0x10000, tf.int64)  # UTF-8's length of each
        self.norm_end = tf.cumsum(norm_bytes)  # over all changed tokens' characters: sorted
        self.raw_end = tf.concat([tf.cumsum(raw_bytes), [0]], 0)
        self.raw_start = tf.concat([self.raw_end[:-1] - raw_bytes, [0]], 0)
        norm_ends, raw_ends = tf.concat([[0], self.norm_end], 0), tf.concat([[0], self.raw_end[:-1]], 0)
        first, after = chars.row_splits[:-1], chars.row_splits[1:]
        self.last_char = tf.concat([after - 1, [0]], 0)
        self.norm_base = tf.concat([tf.gather(norm_ends, first), [0]], 0)
        self.raw_base = tf.concat([tf.gather(raw_ends, first), [0]], 0)
        adds_up = tf.equal(tf.gather(norm_ends, after) - tf.gather(norm_ends, first),
                           tf.cast(tf.strings.length(tf.gather(norm, changed)), tf.int64))
        self.adds_up = tf.concat([adds_up, [False]], 0)
        # each token's row among the changed ones; the unchanged point past them, at the sentinels above
        self.slot = tf.where(self.same, tf.size(changed, out_type=tf.int64),
                             tf.cumsum(tf.cast(~self.same, tf.int64)) - 1)

    def to_input(self, token, offsets, end: bool):
        """Byte offsets into normalised tokens (int64 [k], token index [k]) -> into the input tokens: a start to the
        start of the character it came from; an end to the end of the character its last byte came from, and past
        the characters normalisation removed right after it in the token (a word's trailing marks, stripped when
        lower-casing, are part of the word a caller cuts from the input)."""
        slot = tf.gather(self.slot, token)
        position = tf.gather(self.norm_base, slot) + offsets
        char = tf.searchsorted(self.norm_end, position, side="left" if end else "right", out_type=tf.int64)
        if end:  # where the byte ends its character: the last character before the next one with bytes
            last = tf.searchsorted(self.norm_end, position, side="right", out_type=tf.int64) - 1
            char = tf.maximum(char, tf.minimum(last, tf.gather(self.last_char, slot)))
        mapped = tf.gather(self.raw_end if end else self.raw_start, char) - tf.gather(self.raw_base, slot)
        fallback = tf.gather(self.raw_length, token) if end else tf.zeros_like(offsets)
        return tf.where(tf.gather(self.same, token), offsets,
                        tf.where(tf.gather(self.adds_up, slot), mapped, fallback))


def _regex_split_with_offsets(strings, delimiter: str, keep: str):
    """`tf_text.regex_split_with_offsets` on strings [n] -> (pieces, starts, ends) ragged [n, (pieces)], without the
    run-time validation of the row splits its op has just made: ~200 ops per call in every graph that tokenizes,
    to trace and optimise, for none of the op's own work. The op and its pattern groups are tf-text's own."""
    load_tensorflow_text()
    from tensorflow_text.python.ops.regex_split_ops import gen_regex_split_ops

    pieces, starts, ends, splits = gen_regex_split_ops.regex_split_with_offsets(strings, f"({delimiter})", f"({keep})")
    return tuple(tf.RaggedTensor.from_row_splits(values, splits, validate=False) for values in (pieces, starts, ends))


def row_ids(ragged):
    """`ragged.value_rowids()`, the row of each value, in a handful of ops (TensorFlow's repeats the row numbers
    through ~70 ops, which every graph that tokenizes would trace and optimise per call site): a count of the rows
    that start at each value, summed up to it."""
    splits = ragged.row_splits
    size = splits[-1]
    starts = splits[1:-1]  # where rows 1, 2, ... start; several at one value where rows are empty
    return tf.cumsum(tf.math.unsorted_segment_sum(tf.ones_like(starts), starts, size + 1)[:size])


def merge_words(pieces):
    """[batch, (words), (pieces)] -> [batch, (pieces)]: `merge_dims(1, 2)` without its run-time validation of row
    splits that the tokenizer has just made (an assertion, hence a conditional, in the graph per call)."""
    splits = tf.gather(pieces.values.row_splits, pieces.row_splits)
    return tf.RaggedTensor.from_row_splits(pieces.flat_values, splits, validate=False)


def _cap_long_words(words):
    """Words over MAX_CHARS_PER_WORD characters become "[UNK]", as in the original; returns (words, which ones)."""
    too_long = tf.strings.length(words, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
    return tf.where(too_long, tf.constant("[UNK]"), words), too_long


def pack_inputs_graph(segments, seq_length, cls_id, sep_id, pad_id=0):
    """In-graph packing of 1 or 2 ragged id segments [batch, (ids)] into the three model inputs [batch, seq_length].

    Truncation is the original's longest-first (one token at a time from the longer segment), computed in closed
    form (see the comment in the code), tested against the loop. The packing is dense arithmetic on positions
    (each output position reads its segment's token, a [CLS]/[SEP] or padding): concatenating ragged tensors would
    put a dozen run-time assertions, each a conditional, into every serving graph.
    """
    budget = tf.cast(seq_length, tf.int64) - 1 - len(segments)  # seq_length may be a tensor (exported packers)
    if len(segments) == 1:
        keep = [tf.minimum(segments[0].row_lengths(), budget)]
    else:
        la, lb = segments[0].row_lengths(), segments[1].row_lengths()
        # one assertion: rows of A and B are pairs; 1 row against n would otherwise broadcast to n plausible pairs
        with tf.control_dependencies([tf.debugging.assert_equal(
                tf.size(la), tf.size(lb), message="the two texts of a pair must come in batches of the same size")]):
            la = tf.identity(la)
        n = tf.cast(budget, tf.int64)
        # The loop pops the longer side (ties: B), so the sides meet at ceil(n/2) for A and floor(n/2) for B unless
        # one is already shorter than its share and is kept whole. A row whose B is empty packs A alone, with the
        # one-segment budget, as the original's `if tokens_b:`.
        keep_a = tf.where(la + lb <= n, la, tf.where(la >= lb, n - tf.minimum(lb, n // 2), tf.minimum(la, n - n // 2)))
        keep_a = tf.where(lb > 0, keep_a, tf.minimum(la, n + 1))
        keep_b = tf.minimum(lb, n - keep_a)
        keep = [keep_a, keep_b]
    keep = [tf.maximum(kept, 0) for kept in keep]
    position = tf.zeros_like(keep[0])[:, None] + tf.range(tf.cast(seq_length, tf.int64))  # [batch, seq_length]
    word_ids = tf.where(position == 0, tf.cast(cls_id, tf.int64), tf.cast(pad_id, tf.int64))
    type_ids = tf.zeros_like(word_ids)
    start = tf.ones_like(keep[0])  # where the current segment begins in each row: after [CLS], then after a [SEP]
    for index, (segment, kept) in enumerate(zip(segments, keep)):
        offset = position - start[:, None]  # [batch, seq_length]: the index into this segment's row
        inside = (offset >= 0) & (offset < kept[:, None])
        values = tf.concat([tf.cast(segment.values, tf.int64), tf.zeros([1], tf.int64)], axis=0)  # never empty
        last = tf.shape(values, out_type=tf.int64)[0] - 1
        flat = tf.where(inside, tf.cast(segment.row_starts(), tf.int64)[:, None] + offset, last)
        # B and its [SEP] only where B kept a piece (truncation may empty it, and then the original leaves it out)
        present = (kept > 0) if index else tf.ones_like(kept, tf.bool)
        word_ids = tf.where(inside, tf.gather(values, flat), word_ids)
        word_ids = tf.where((offset == kept[:, None]) & present[:, None], tf.cast(sep_id, tf.int64), word_ids)
        if index:
            type_ids = tf.where((offset >= 0) & (offset <= kept[:, None]) & present[:, None], tf.ones_like(type_ids),
                                type_ids)
        start = start + tf.where(present, kept + 1, 0)
    mask = position < start[:, None]
    return {"input_word_ids": tf.cast(word_ids, tf.int32), "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32)}


if "keras" in sys.modules:  # registered with Keras, so that a saved layer loads after importing this module alone
    from bert_tf import tokenizer_layer  # noqa: E402,F401
