"""SQuAD exact match and F1 as the official evaluation scripts (v1.1 and v2.0) define them, and the v2.0 search for
the best no-answer threshold.

The two scripts differ where an answer normalises to nothing (it is only articles and punctuation, or empty): v2.0
drops such gold answers (a question left with none has the empty answer as its gold) and gives F1 1 when prediction
and gold are both empty, while v1.1 keeps every gold answer as given and gives F1 0 whenever no token is shared, so
an empty prediction against an empty gold scores EM 1 and F1 0 there. `version_2` picks the rules.
"""

from __future__ import annotations

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and the articles a/an/the, collapse whitespace (the official normalisation)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str, version_2: bool = True) -> float:
    """Token-overlap F1 of the normalised strings. v2.0: an empty answer scores 1 only against an empty answer; v1.1:
    no shared token scores 0, empty against empty included."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if version_2 and (not predicted or not expected):
        return float(predicted == expected)
    common = collections.Counter(predicted) & collections.Counter(expected)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


def gold_answers(qa: dict, version_2: bool = True) -> list[str]:
    """The gold texts of one SQuAD question: v2.0 leaves out those that normalise to nothing; a question without
    any (unanswerable) has the empty answer as its gold, in v1.1 too, whose script has no rule for it."""
    texts = [a["text"] for a in qa.get("answers", []) if not version_2 or normalize_answer(a["text"])]
    return texts or [""]


def has_unanswerable(dataset: list) -> bool:
    """Whether any question of a SQuAD JSON file's `data` has no answer (or says `is_impossible`): v1.1's script
    cannot score such data, v2.0's can."""
    return any(qa.get("is_impossible") or not qa.get("answers")
               for article in dataset for paragraph in article["paragraphs"] for qa in paragraph["qas"])


def evaluate(dataset: list, predictions: dict, na_probs: dict | None = None, threshold: float = 1.0,
             version_2: bool = True) -> dict:
    """Official figures in percent: `exact`, `f1`, `total`, and with `version_2` `HasAns_*` / `NoAns_*` for the
    questions with answers and those without, where there are any (False: v1.1's rules and figures).

    `dataset` is the `data` list of a SQuAD JSON file; `predictions` maps question id to answer text. Answers whose
    no-answer score (`na_probs`: question id -> score; v2.0 takes a missing one as 0) exceeds `threshold` count as
    "no answer", right exactly when the question has no answers. Questions without a prediction score 0, as v1.1's
    script scores them (v2.0's needs a prediction for every question).
    """
    exact, f1, has_answer = {}, {}, {}
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qid = qa["id"]
                golds = gold_answers(qa, version_2)
                has_answer[qid] = bool(qa.get("answers"))
                if qid not in predictions:
                    exact[qid] = f1[qid] = 0.0
                elif (version_2 or na_probs is not None) and (na_probs or {}).get(qid, 0.0) > threshold:
                    # "no answer" (v2.0's script takes a missing probability as 0): right if there is none
                    exact[qid] = f1[qid] = float(not has_answer[qid])
                else:
                    exact[qid] = max(exact_match(predictions[qid], g) for g in golds)
                    f1[qid] = max(f1_score(predictions[qid], g, version_2) for g in golds)
    results = _summary(exact, f1, list(exact))
    for prefix, answered in (("HasAns", True), ("NoAns", False)):
        ids = [q for q in exact if has_answer[q] == answered]
        if version_2 and ids:
            results.update({f"{prefix}_{k}": v for k, v in _summary(exact, f1, ids).items()})
    return results


def _summary(exact, f1, ids):
    if not ids:
        return {"exact": 0.0, "f1": 0.0, "total": 0}
    return {"exact": 100.0 * sum(exact[q] for q in ids) / len(ids),
            "f1": 100.0 * sum(f1[q] for q in ids) / len(ids), "total": len(ids)}


def best_threshold(dataset: list, predictions: dict, na_probs: dict, metric: str = "f1") -> tuple[float, float]:
    """(best score, threshold): the no-answer threshold maximising `metric` on this data, as the official v2.0
    script's `find_best_thresh` sweeps it (answers ordered by no-answer score, each one switched to "no answer").
    Where answering no question scores best, the threshold is one below every no-answer score (the lowest - 1),
    which gives that score when applied ("no answer" where the score is above it); the official script reports its
    starting 0.0 there, which would answer the questions whose scores are not above 0."""
    scores, has_answer = {}, {}
    score_fn = f1_score if metric == "f1" else exact_match
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                golds = gold_answers(qa)
                has_answer[qa["id"]] = bool(qa.get("answers"))
                prediction = predictions.get(qa["id"], "")
                scores[qa["id"]] = max(score_fn(prediction, g) for g in golds)
    current = best = float(sum(not has for has in has_answer.values()))  # everything "no answer"
    best_at = None
    for qid in sorted(na_probs, key=na_probs.get):
        if qid not in scores:
            continue
        if has_answer[qid]:
            delta = scores[qid]
        else:
            delta = -1.0 if predictions.get(qid) else 0.0
        current += delta
        if current > best:
            best, best_at = current, na_probs[qid]
    if best_at is None:
        best_at = min((na_probs[qid] for qid in scores if qid in na_probs), default=1.0) - 1.0
    return 100.0 * best / len(scores), best_at
