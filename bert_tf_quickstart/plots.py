"""The plots: the training curves of pretraining and fine-tuning, each accuracy beside its held-out figure."""

from __future__ import annotations

import json
import os

from bert_tf import staging


def read_scalars(event_dir: str) -> dict[str, list[tuple[int, float]]]:
    """The scalars `bert_tf.training` wrote to TensorBoard event files: {name: [(step, value)]}, last write wins."""
    import tensorflow as tf

    values: dict = {}
    for path in sorted(tf.io.gfile.glob(os.path.join(event_dir, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                values.setdefault(value.tag, {})[event.step] = number
    return {tag: sorted(points.items()) for tag, points in values.items()}


def plot_curves(output_dir: str, figures: dict) -> list[str]:
    """PNG plots under `output_dir/plots`; returns their paths. Each accuracy panel shows the training curve and,
    at its last step, the held-out figure of `report.md` (from `figures`, the stages' results) with the number of
    held-out examples behind it, and chance where it is not near zero; every axis is labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir = os.path.join(output_dir, "plots")
    os.makedirs(plots_dir, exist_ok=True)
    scalars = read_scalars(os.path.join(output_dir, "pretrain", "train"))
    p, r = figures["pretrain"], figures["records"]
    train = "training batches"
    # panel: (tag, y label, curve label, held-out figure and its label or None, chance or None)
    panels = [("pretraining_mlm.png", "Masked LM", [
                  ("masked_lm_loss", "masked-LM loss", train, None, None),
                  ("masked_lm_accuracy", "masked-LM accuracy", train,
                   (p["heldout_masked_lm_accuracy"], f"held-out ({r['heldout_masked']} masked positions)"), None)]),
              ("pretraining_nsp.png", "Next sentence", [
                  ("next_sentence_loss", "next-sentence loss", train, None, None),
                  ("next_sentence_accuracy", "next-sentence accuracy", train,
                   (p["heldout_next_sentence_accuracy"], f"held-out ({r['heldout_instances']} instances)"),
                   round(p["next_sentence_chance"], 3))]),
              ("learning_rate.png", "Learning rate (warm-up, linear decay)", [
                  ("learning_rate", "learning rate", None, None, None)])]
    history_path = os.path.join(output_dir, "finetune", "history.json")
    if os.path.exists(history_path):
        with open(history_path, encoding="utf-8") as f:
            history = json.load(f)
        scalars["finetune_loss"] = [(h["step"], h["loss"]) for h in history]
        scalars["finetune_heldout_accuracy"] = [(h["step"], h["heldout_accuracy"]) for h in history]
        t = figures["finetune"]
        panels.append(("finetuning.png", "Fine-tuning (word_order)", [
            ("finetune_loss", "loss", "training batch", None, None),
            ("finetune_heldout_accuracy", "word_order accuracy", "held-out (up to 256 examples), during training",
             (t["heldout_accuracy"], f"held-out, after training ({t['heldout_sentences']} sentences)"), 0.5)]))
    written = []
    for name, title, specs in panels:
        specs = [spec for spec in specs if scalars.get(spec[0])]
        if not specs:
            continue
        figure, axes = plt.subplots(1, len(specs), figsize=(5.5 * len(specs), 3.8), squeeze=False)
        for axis, (tag, ylabel, curve, heldout, chance) in zip(axes[0], specs):
            steps, values = zip(*scalars[tag])
            axis.plot(steps, values, marker="." if len(steps) < 30 else None, label=curve)
            if heldout is not None:
                axis.plot([steps[-1]], [heldout[0]], "o", color="tab:red", markersize=8,
                          label=f"{heldout[1]}: {heldout[0]:.3f}")
            if chance is not None:
                axis.axhline(chance, color="gray", linestyle="--", linewidth=1, label=f"chance ({chance:g})")
            axis.set_xlabel("step")
            axis.set_ylabel(ylabel)
            axis.grid(alpha=0.3)
            if curve or heldout or chance is not None:
                axis.legend(fontsize=8, loc="best")
        figure.suptitle(title)
        figure.tight_layout()
        path = os.path.join(plots_dir, name)
        with staging.staged_file(path, suffix=".png") as tmp:
            figure.savefig(tmp, dpi=80)
        plt.close(figure)
        written.append(path)
    return written
