"""The official SQuAD scoring, v1.1 and v2.0, in plain Python: the independent reference that tests/tasks/test_squad.py
holds `bert_tf.tasks.squad_eval` equal to.

Written from the rules of the two official scripts (`evaluate-v1.1.py`, `evaluate-v2.0.py`; read, not copied) and
from nothing in `bert_tf`. Their normalisation is the same: lower case, delete every ASCII punctuation character,
turn each whole word a/an/the into a space, collapse whitespace. v1.1 scores each question against all its answer
texts as given, with F1 0 whenever prediction and gold share no token; a question without a prediction counts as 0.
v2.0 keeps the answers that normalise to something (none left: the gold is the empty answer), scores empty against
empty as F1 1, calls a question answerable when its answer list is not empty, replaces the score of a question whose
no-answer probability exceeds the threshold by whether it is unanswerable, and finds the best threshold by walking
the questions in order of that probability.
"""

import collections
import re
import string


def normalize(text):
    lowered = text.lower()
    kept = "".join(c for c in lowered if c not in string.punctuation)
    spaced = re.sub(r"\b(a|an|the)\b", " ", kept)
    return " ".join(spaced.split())


def _overlap_f1(predicted_tokens, gold_tokens):
    shared = sum((collections.Counter(predicted_tokens) & collections.Counter(gold_tokens)).values())
    if shared == 0:
        return 0.0
    precision = shared / len(predicted_tokens)
    recall = shared / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def v1_1(dataset, predictions):
    """{'exact_match', 'f1'} in percent, as evaluate-v1.1.py prints them."""
    em_sum = f1_sum = count = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                count += 1
                if qa["id"] not in predictions:
                    continue
                guess = predictions[qa["id"]]
                golds = [answer["text"] for answer in qa["answers"]]
                em_sum += max(float(normalize(guess) == normalize(gold)) for gold in golds)
                f1_sum += max(_overlap_f1(normalize(guess).split(), normalize(gold).split()) for gold in golds)
    return {"exact_match": 100.0 * em_sum / count, "f1": 100.0 * f1_sum / count}


def _v2_scores(dataset, predictions):
    exact, f1, answerable = {}, {}, {}
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answerable[qa["id"]] = len(qa["answers"]) > 0
                golds = [answer["text"] for answer in qa["answers"] if normalize(answer["text"])] or [""]
                if qa["id"] not in predictions:
                    continue
                guess = predictions[qa["id"]]
                guess_tokens = normalize(guess).split() if guess else []
                exact[qa["id"]] = max(float(normalize(gold) == normalize(guess)) for gold in golds)
                best = 0.0
                for gold in golds:
                    gold_tokens = normalize(gold).split() if gold else []
                    if not gold_tokens or not guess_tokens:
                        score = float(gold_tokens == guess_tokens)
                    else:
                        score = _overlap_f1(guess_tokens, gold_tokens)
                    best = max(best, score)
                f1[qa["id"]] = best
    return exact, f1, answerable


def v2_0(dataset, predictions, na_probs=None, threshold=1.0):
    """{'exact', 'f1', 'total'} and the HasAns_ / NoAns_ figures, as evaluate-v2.0.py prints them (every question
    needs a prediction there)."""
    exact, f1, answerable = _v2_scores(dataset, predictions)
    na_probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    for scores in (exact, f1):
        for qid in scores:
            if na_probs[qid] > threshold:
                scores[qid] = float(not answerable[qid])

    def figures(ids):
        return {"exact": 100.0 * sum(exact[q] for q in ids) / len(ids),
                "f1": 100.0 * sum(f1[q] for q in ids) / len(ids), "total": len(ids)}

    out = figures(list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [q for q, has in answerable.items() if has == wanted]
        if ids:
            out.update({f"{prefix}_{key}": value for key, value in figures(ids).items()})
    return out


def v2_0_best_threshold(dataset, predictions, na_probs, metric="f1"):
    """(best score in percent, threshold), as evaluate-v2.0.py's search over the no-answer probabilities."""
    exact, f1, answerable = _v2_scores(dataset, predictions)
    scores = f1 if metric == "f1" else exact
    running = best = float(sum(not has for has in answerable.values()))
    best_at = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores:
            continue
        if answerable[qid]:
            running += scores[qid]
        elif predictions[qid]:
            running -= 1
        if running > best:
            best, best_at = running, na_probs[qid]
    return 100.0 * best / len(scores), best_at
