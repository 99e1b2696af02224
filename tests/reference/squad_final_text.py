"""The original run_squad.py's `get_final_text` in plain Python, the reference that tests/tasks/test_squad.py holds
`bert_tf.tasks.squad.final_text` equal to.

It follows google-research/bert's algorithm step by step: the original words tokenized by the BasicTokenizer and
joined with spaces; the prediction found in them; both texts stripped of their spaces with a map from each kept
character back to its position; the prediction's first and last character carried through the maps onto the
original text; the original words unchanged wherever a step fails. It was the library's own `final_text` before
the faster one replaced it. It tokenizes with the library's `basic_tokenize`, so it checks the alignment alone;
the tokenizer has its own tests (tests/test_tokenization.py, against HF `tokenizers` and the in-graph path).
"""

import collections

from bert_tf.tokenization import basic_tokenize


def _strip_spaces(text):
    kept, positions = [], collections.OrderedDict()
    for index, char in enumerate(text):
        if char == " ":
            continue
        positions[len(kept)] = index
        kept.append(char)
    return "".join(kept), positions


def final_text(pred_text, orig_text, do_lower_case):
    tokenized = " ".join(basic_tokenize(orig_text, do_lower_case))
    start = tokenized.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_stripped, orig_positions = _strip_spaces(orig_text)
    tok_stripped, tok_positions = _strip_spaces(tokenized)
    if len(orig_stripped) != len(tok_stripped):
        return orig_text
    tok_to_stripped = {index: stripped for stripped, index in tok_positions.items()}
    if start not in tok_to_stripped or end not in tok_to_stripped:
        return orig_text
    orig_start = orig_positions.get(tok_to_stripped[start])
    orig_end = orig_positions.get(tok_to_stripped[end])
    if orig_start is None or orig_end is None:
        return orig_text
    return orig_text[orig_start:orig_end + 1]
