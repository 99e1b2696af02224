"""seqeval's entity-level precision, recall and F1 (overall and per entity type, with each type's support) and its
token accuracy on 500 random tag sequences: the golden values that tests/tasks/test_ner.py holds
`bert_tf.tasks.metrics.entity_report` equal to, in seqeval_scores.json.

seqeval (the common Python port of conlleval's chunk rules) is not installed with the tests: it pulls scikit-learn,
whose import Keras then adds to every TensorFlow start-up. To regenerate the values:

    pip install seqeval==1.2.2 && python -m tests.reference.seqeval_scores
"""

import json
import os
import random

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seqeval_scores.json")
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "E-LOC", "S-PER"]  # IOB1, IOB2 and IOBES mixed


def cases(count=500, seed=0):
    """[(gold, predicted)]: 1 to 4 sentences of 1 to 11 tags each, the prediction a random tag per position."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        gold = [[rng.choice(TAGS) for _ in range(rng.randrange(1, 12))] for _ in range(rng.randrange(1, 5))]
        out.append((gold, [[rng.choice(TAGS) for _ in sentence] for sentence in gold]))
    return out


def main():
    from importlib.metadata import version

    from seqeval.metrics import accuracy_score, classification_report, f1_score, precision_score, recall_score

    def by_type(gold, predicted):
        report = classification_report(gold, predicted, output_dict=True, zero_division=0)
        return {kind: {"precision": r["precision"], "recall": r["recall"], "f1": r["f1-score"],
                       "gold": int(r["support"])}
                for kind, r in report.items() if not kind.endswith(" avg")}

    scores = [{"precision": precision_score(gold, predicted, zero_division=0),
               "recall": recall_score(gold, predicted, zero_division=0),
               "f1": f1_score(gold, predicted, zero_division=0),
               "accuracy": accuracy_score(gold, predicted),
               "by_type": by_type(gold, predicted)} for gold, predicted in cases()]
    with open(PATH, "w", encoding="utf-8") as f:  # one case a line
        f.write(f'{{"seqeval": "{version("seqeval")}", "scores": [\n'
                + ",\n".join(json.dumps(score, separators=(",", ": ")) for score in scores) + "\n]}\n")

if __name__ == "__main__":
    main()
