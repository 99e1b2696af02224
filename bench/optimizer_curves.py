"""Fine-tuning loss curves of the original BERT optimizer and Keras's bias-corrected AdamW, side by side.

Runs the quickstart's fine-tuning stage (`word_order` from its pretrained model) once per optimizer with the same
data, seed and schedule, records each step's training loss, and plots both to `docs/img/optimizer_curves.png`.

  python -m bert_tf_quickstart --output_dir=runs/quickstart     # first: the pretrained model and the data
  python -m bench.optimizer_curves --quickstart_dir=runs/quickstart
"""

from __future__ import annotations

import bert_tf  # noqa: F401

import json
import os
import tempfile

from absl import app, flags

flags.DEFINE_string("quickstart_dir", "runs/quickstart", "Output directory of a finished quickstart run.")
flags.DEFINE_string("output", "docs/img/optimizer_curves.png", "Where the plot goes.")
flags.DEFINE_float("learning_rate", None, "Peak learning rate (default: the quickstart's).")
flags.DEFINE_float("num_train_epochs", None, "Epochs (default: the quickstart's).")

OPTIMIZERS = ("original_adamw", "adamw")


def curves(quickstart_dir: str, learning_rate: float | None, epochs: float | None) -> dict:
    """{optimizer: (step losses, held-out accuracy)} from the quickstart's fine-tuning data and model."""
    from bert_tf.config import BertConfig
    from bert_tf.finetuning import FinetuneOptions
    from bert_tf.tasks.classification import run_classifier
    from bert_tf_quickstart.options import QuickstartOptions
    from bert_tf.tasks import get_task

    defaults = QuickstartOptions()
    model_dir = os.path.join(quickstart_dir, "pretrain", "bert_model")
    data_dir = os.path.join(quickstart_dir, "finetune", "data")
    config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
    out = {}
    for optimizer in OPTIMIZERS:
        rate = learning_rate or defaults.finetune_learning_rate
        options = FinetuneOptions(do_train=True, do_eval=True, max_seq_length=defaults.max_seq_length,
                                  train_batch_sizes=32, learning_rates=(rate,), iterations_per_loop=1,
                                  num_train_epochs=epochs or defaults.finetune_epochs,
                                  init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
                                  random_seed=defaults.random_seed, optimizer=optimizer)
        losses = []  # one loop of one step each: its loss is the step's
        with tempfile.TemporaryDirectory() as scratch:
            results = run_classifier(get_task("word_order"), config, os.path.join(model_dir, "vocab.txt"), scratch,
                                     options, data_dir=data_dir,
                                     progress=lambda model, step, scalars: losses.append(scalars["loss"]))
        out[optimizer] = (losses, results["dev"]["accuracy"])
        print(f"{optimizer}: {len(losses)} steps, last-50 mean loss "
              f"{sum(losses[-50:]) / len(losses[-50:]):.4f}, held-out accuracy "
              f"{results['dev']['accuracy']:.4f}", flush=True)
    return out


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4))
    for optimizer, (losses, accuracy) in results.items():
        smooth = np.convolve(losses, np.ones(10) / 10, mode="valid")
        ax.plot(np.arange(len(smooth)) + 10, smooth, label=f"{optimizer} (held-out accuracy {accuracy:.3f})")
    ax.set_xlabel("fine-tuning step")
    ax.set_ylabel("training loss (10-step mean)")
    ax.set_title("word_order fine-tuning: the original optimizer vs bias-corrected AdamW")
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path + ".tmp.png", dpi=100)
    os.replace(path + ".tmp.png", path)
    data = os.path.splitext(path)[0] + ".json"
    with open(data + ".tmp", "w", encoding="utf-8") as f:
        json.dump({k: {"step_losses": v[0], "heldout_accuracy": v[1]} for k, v in results.items()}, f)
    os.replace(data + ".tmp", data)


def main(argv):
    del argv
    f = flags.FLAGS
    plot(curves(f.quickstart_dir, f.learning_rate, f.num_train_epochs), f.output)
    print(f"wrote {f.output}")


if __name__ == "__main__":
    app.run(main)
