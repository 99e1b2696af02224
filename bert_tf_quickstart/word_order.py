"""The fine-tuning task the quickstart makes from any corpus without hand labels, `word_order`: is a sentence as
written, or are its words shuffled? Its examples, its TSV files (the `word_order` task of `bert_tf.tasks` reads
them) and the held-out accuracy curve drawn while it trains."""

from __future__ import annotations

import random

from bert_tf.finetuning import predict
from bert_tf.training import write_lines


def word_order_examples(documents, count: int, seed: int) -> list[tuple[str, str]]:
    """(label, sentence): a sentence of the corpus as written ("original") or with its words shuffled
    ("shuffled"), half each. Telling them apart needs the grammar that masked-LM pretraining learns."""
    rng = random.Random(seed)
    sentences = order_sentences(documents)
    examples = []
    for i in range(count):
        words = rng.choice(sentences).split()
        examples.append(("shuffled", shuffled(words, rng)) if i % 2 else ("original", " ".join(words)))
    rng.shuffle(examples)
    return examples


def order_sentences(documents) -> list[str]:
    """The sentences whose word order can be asked about: four or more distinct words."""
    return [s for d in documents for s in d if len(set(s.split())) >= 4]


def shuffled(words: list[str], rng: random.Random) -> str:
    """`words` in another order (shuffled until it differs), joined."""
    mixed = words[:]
    while mixed == words:
        rng.shuffle(mixed)
    return " ".join(mixed)


def write_tsv(path: str, examples) -> None:
    """(label, sentence) examples as the `word_order` task's TSV: a header, tabs in sentences made spaces."""
    write_lines(path, ["label\tsentence"] + [f"{label}\t{sentence.replace(chr(9), ' ')}"
                                               for label, sentence in examples])


class DevCurve:
    """Held-out accuracy after every loop of fine-tuning steps (kept in `history` for the plot), and a progress
    bar: a `progress(model, step, scalars)` for `run_classifier`."""

    def __init__(self, data_dir, vocab_file, max_seq_length, total):
        from tqdm import tqdm

        from bert_tf.tasks.classification import encode, label_array
        from bert_tf.tasks import get_task

        task = get_task("word_order")
        examples = task.examples(data_dir, "dev")[:256]
        self.features = encode(examples, vocab_file, True, max_seq_length)
        self.labels = label_array(task, examples, "word_order dev")
        self.history = []
        self.bar = tqdm(total=total, desc="run_classifier", unit=" steps")

    def __call__(self, model, step, scalars):
        self.bar.update(step - self.bar.n)
        logits = predict(model, self.features, 256)["logits"]
        accuracy = float((logits.argmax(-1) == self.labels).mean())
        self.history.append({"step": step, "heldout_accuracy": accuracy, "loss": float(scalars.get("loss", "nan"))})
        self.bar.set_postfix(heldout_acc=f"{accuracy:.3f}")
