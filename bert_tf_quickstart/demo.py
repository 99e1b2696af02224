"""The demo: the exported SavedModels asked questions in a fresh Python process that imports only TensorFlow and
tensorflow-text, as a server would load them. On the built-in corpus the questions are fixed ones; on a user's
corpus they come from its held-out part (a held-out word masked, held-out sentences shuffled)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

from bert_tf_quickstart.word_order import order_sentences, shuffled

MASKED_EXAMPLES = ("Return the [MASK] of the list.", "If the file does not [MASK], an exception is raised.",
                   "This [MASK] is deprecated since version 3.4.")
ORDER_EXAMPLES = ("Return a new dictionary initialized from an optional positional argument.",
                  "dictionary argument new a positional initialized optional Return an from.",
                  "The socket must be bound to an address and listening for connections.",
                  "bound socket for listening The connections address must to an be and.")


def heldout_questions(documents, vocab_file: str, seed: int, count: int = 3):
    """Demo questions from the held-out part of a user's corpus: ([(sentence with one word as [MASK], that word)],
    [(sentence, "original" | "shuffled")]). The masked word is one the vocabulary holds whole (lower-cased), so one
    [MASK] stands for it; two sentences are asked about as written and shuffled."""
    with open(vocab_file, encoding="utf-8") as f:
        vocab = {line.strip() for line in f}
    rng = random.Random(seed)
    sentences = order_sentences(documents)
    masked = []
    for sentence in rng.sample(sentences, len(sentences)):
        words = sentence.split()
        candidates = [i for i, w in enumerate(words) if i and w.isalpha() and len(w) >= 3 and w.lower() in vocab]
        if candidates and len(words) <= 40:
            i = rng.choice(candidates)
            masked.append((" ".join(words[:i] + ["[MASK]"] + words[i + 1:]), words[i]))
            if len(masked) == count:
                break
    order = []
    for sentence in rng.sample(sentences, min(2, len(sentences))):
        order += [(sentence, "original"), (shuffled(sentence.split(), rng), "shuffled")]
    return masked, order


ASK = r'''
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the ops TF Serving links)
export, masked, sentences = json.loads(sys.argv[1])
fills, decisions = [], []
if masked:
    mlm = tf.saved_model.load(export + "/mlm/1").signatures["serving_default"]
    out = mlm(text=tf.constant(masked))
    fills = [[[(t.decode(), float(p)) for t, p in zip(tokens, probs)] for tokens, probs in zip(rows_t[:n], rows_p[:n])]
             for rows_t, rows_p, n in zip(out["top_tokens"].numpy(), out["top_probabilities"].numpy(),
                                           out["num_masks"].numpy())]
if sentences:
    classifier = tf.saved_model.load(export + "/classifier/1").signatures["serving_default"]
    out = classifier(text=tf.constant(sentences))
    decisions = [(label.decode(), probs.tolist()) for label, probs in zip(out["label"].numpy(),
                                                                          out["probabilities"].numpy())]
print(json.dumps({"fill_ins": fills, "decisions": decisions, "modules": sorted(
    m for m in sys.modules if m.split(".")[0] in ("bert_tf", "export", "data_gen"))}))
'''


def ask_saved_models(export_dir: str, masked, order) -> dict:
    """Loads the exported SavedModels in a fresh Python that imports only tensorflow and tensorflow_text and asks
    them the `masked` [(text with [MASK], expected word or None)] and `order` [(sentence, expected label or None)]
    questions."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    masked_texts, sentences = [text for text, _ in masked], [text for text, _ in order]
    out = subprocess.run([sys.executable, "-c", ASK, json.dumps([os.path.abspath(export_dir), masked_texts,
                                                                  sentences])],
                         capture_output=True, text=True, env=env, cwd=os.path.dirname(os.path.abspath(export_dir)),
                         timeout=600)
    if out.returncode:
        raise RuntimeError(f"loading the SavedModels in a fresh process failed:\n{out.stderr[-3000:]}")
    answers = json.loads(out.stdout.strip().splitlines()[-1])
    return dict(answers, masked=masked_texts, sentences=sentences, masked_answers=[a for _, a in masked],
                sentence_labels=[label for _, label in order])


def format_answers(answers: dict) -> str:
    lines = ["Answers from the SavedModels (fresh process, only tensorflow + tensorflow_text imported):"]
    expected = answers.get("masked_answers") or [None] * len(answers["masked"])
    for text, fills, word in zip(answers["masked"], answers["fill_ins"], expected):
        shown = "; ".join(", ".join(f"{token} {p:.2f}" for token, p in mask[:3]) for mask in fills)
        lines.append(f"  {text!r} -> [MASK] = {shown}" + (f" (held-out text: {word})" if word else ""))
    labels = answers.get("sentence_labels") or [None] * len(answers["sentences"])
    for sentence, (label, probabilities), truth in zip(answers["sentences"], answers["decisions"], labels):
        lines.append(f"  word order? {sentence!r} -> {label} (p = {max(probabilities):.2f})"
                     + (f" (it is {truth})" if truth else ""))
    if not answers["masked"] and not answers["sentences"]:
        lines.append("  (the held-out part has no sentence to ask about)")
    return "\n".join(lines)
