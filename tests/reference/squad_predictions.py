"""The original run_squad.py's `write_predictions` in plain Python, the reference that tests/tasks/test_squad.py
holds `bert_tf.tasks.squad.postprocess` equal to.

It follows google-research/bert's algorithm: per window, the `n_best_size` largest start and end logits (a stable
sort, so equal logits keep position order); every (start, end) pair of them that lies in the window's context, starts
where the window is the piece's max-context window, ends at or after its start and spans at most
`max_answer_length` pieces; for SQuAD 2.0 the null answer at the lowest [CLS] score over the windows; all sorted
stably by start + end logit; the n-best texts mapped back onto the original words by `get_final_text`, repeats
skipped; the null answer added when it did not make the cut; softmax probabilities; and for 2.0 the null odds
(null score - best non-null score) against the threshold. It reads the features of tests/reference/
squad_features.py (the original's dicts) and the original's `get_final_text` of tests/reference/squad_final_text.py.

Where the original fails (2.0, no non-null answer among the n-best: it reads a field of None), this takes the best
non-null score as -1e9, as `postprocess` documents.
"""

import collections
import math

from tests.reference.squad_final_text import final_text


def _best_indexes(logits, n):
    ranked = sorted(enumerate(logits), key=lambda pair: pair[1], reverse=True)
    return [index for index, _ in ranked[:n]]


def _softmax(scores):
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    return [value / sum(exps) for value in exps]


def write_predictions(examples, features, start_logits, end_logits, tokenizer, n_best_size, max_answer_length,
                      version_2, null_threshold, do_lower_case=True):
    """(predictions, best non-null texts, n-best lists, null odds) by question id."""
    by_example = collections.defaultdict(list)
    for index, feature in enumerate(features):
        by_example[feature.example_index].append(index)
    predictions, best_texts, nbest_lists, odds = {}, {}, {}, {}
    for example_index, example in enumerate(examples):
        prelim = []  # (window, start, end, start logit, end logit)
        score_null, null_window, null_start, null_end = 1e6, 0, 0.0, 0.0
        for window in by_example[example_index]:
            feature = features[window]
            starts = [float(x) for x in start_logits[window]]
            ends = [float(x) for x in end_logits[window]]
            if version_2 and starts[0] + ends[0] < score_null:
                score_null, null_window, null_start, null_end = starts[0] + ends[0], window, starts[0], ends[0]
            for start in _best_indexes(starts, n_best_size):
                for end in _best_indexes(ends, n_best_size):
                    if start >= len(feature.input_word_ids) or end >= len(feature.input_word_ids):
                        continue
                    if start not in feature.token_to_word or end not in feature.token_to_word:
                        continue
                    if not feature.max_context.get(start, False):
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    prelim.append((window, start, end, starts[start], ends[end]))
        if version_2:
            prelim.append((null_window, 0, 0, null_start, null_end))
        prelim = sorted(prelim, key=lambda p: p[3] + p[4], reverse=True)
        seen, nbest = set(), []
        for window, start, end, start_logit, end_logit in prelim:
            if len(nbest) >= n_best_size:
                break
            if start > 0:
                feature = features[window]
                tokens = tokenizer.convert_ids_to_tokens(feature.input_word_ids[start:end + 1])
                tok_text = " ".join(tokens).replace(" ##", "").replace("##", "")
                tok_text = " ".join(tok_text.strip().split())
                words = example.doc_tokens[feature.token_to_word[start]:feature.token_to_word[end] + 1]
                text = final_text(tok_text, " ".join(words), do_lower_case)
                if text in seen:
                    continue
            else:
                text = ""
            seen.add(text)
            nbest.append({"text": text, "start_logit": start_logit, "end_logit": end_logit})
        if version_2 and "" not in seen:
            nbest.append({"text": "", "start_logit": null_start, "end_logit": null_end})
        if not nbest:
            nbest.append({"text": "empty", "start_logit": 0.0, "end_logit": 0.0})
        probabilities = _softmax([entry["start_logit"] + entry["end_logit"] for entry in nbest])
        best = next((entry for entry in nbest if entry["text"]), None)
        nbest_lists[example.qas_id] = [{"text": entry["text"], "probability": probability,
                                        "start_logit": entry["start_logit"], "end_logit": entry["end_logit"]}
                                       for entry, probability in zip(nbest, probabilities)]
        best_texts[example.qas_id] = best["text"] if best else ""
        if version_2:
            diff = score_null - best["start_logit"] - best["end_logit"] if best else score_null - -1e9
            odds[example.qas_id] = diff
            predictions[example.qas_id] = "" if diff > null_threshold else best_texts[example.qas_id]
        else:
            predictions[example.qas_id] = nbest[0]["text"]
    return predictions, best_texts, nbest_lists, odds
