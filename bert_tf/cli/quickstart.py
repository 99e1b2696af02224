"""The main job, interim version: a tiny BERT learns a synthetic language with masked LM + NSP, is saved in the
original TF1 checkpoint format and as a `.keras` file, and is reloaded from both with identical outputs.

No downloads. It shows the model, both pretraining heads, `model.fit` and the checkpoint round trip working on a
fresh machine in about a minute. The full pipeline (own vocabulary, pretraining data, fine-tuning, export) replaces
the synthetic data as those stages land.

The synthetic language: segment A is an arithmetic progression of word ids (start and step drawn per example);
segment B continues it (NSP label 0) or is another progression (label 1, "random next"). A masked word is
predictable from its neighbours, so MLM accuracy far above chance (1/95) shows the encoder attends in both
directions.
"""

import os
import time

import numpy as np
from absl import app, flags, logging

flags.DEFINE_string("output_dir", "runs/quickstart", "Where the checkpoints and config are written.")
flags.DEFINE_integer("train_steps", 1500, "Training steps.")
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_integer("random_seed", 12345, "Seed for data and initialisation.")

SPECIAL = 5  # ids 0-4: [PAD] [UNK] [CLS] [SEP] [MASK]
CLS, SEP, MASK = 2, 3, 4


def synthetic_batches(num, batch_size, seq_len=23, max_predictions=4, vocab_size=100, seed=0):
    """`num` batches of (inputs, labels) for BertPretrainer: progression pairs with 80/10/10 masking."""
    rng = np.random.default_rng(seed)
    words = vocab_size - SPECIAL
    half = (seq_len - 3) // 2
    total = num * batch_size
    start, step = rng.integers(0, words, total), rng.integers(1, 6, total)
    is_random = rng.integers(0, 2, total)
    a = (start[:, None] + step[:, None] * np.arange(half)) % words + SPECIAL
    other_start, other_step = rng.integers(0, words, total), rng.integers(1, 6, total)
    b_cont = (start[:, None] + step[:, None] * np.arange(half, 2 * half)) % words + SPECIAL
    b_rand = (other_start[:, None] + other_step[:, None] * np.arange(half)) % words + SPECIAL
    b = np.where(is_random[:, None] == 1, b_rand, b_cont)
    ids = np.concatenate([np.full((total, 1), CLS), a, np.full((total, 1), SEP), b, np.full((total, 1), SEP)], 1)
    types = np.concatenate([np.zeros((total, half + 2)), np.ones((total, half + 1))], 1)
    candidates = np.array([i for i in range(ids.shape[1]) if ids[0, i] not in (CLS, SEP)])
    positions = np.sort(np.stack([rng.choice(candidates, max_predictions, replace=False) for _ in range(total)]), 1)
    labels = np.take_along_axis(ids, positions, 1)
    roll = rng.random(positions.shape)
    replacement = np.where(roll < 0.8, MASK, np.where(roll < 0.9, rng.integers(SPECIAL, vocab_size, roll.shape),
                                                      labels))
    np.put_along_axis(ids, positions, replacement, 1)
    inputs = {"input_word_ids": ids.astype("int32"), "input_mask": np.ones_like(ids, "int32"),
              "input_type_ids": types.astype("int32"), "masked_lm_positions": positions.astype("int32")}
    targets = {"mlm_logits": labels.astype("int32"), "nsp_logits": is_random.astype("int32")}
    return inputs, targets


def run_demo(output_dir, train_steps=1500, batch_size=32, seed=12345):
    """Trains, saves and reloads; returns a dict of the figures it printed."""
    import keras

    from bert_tf import BertConfig, BertEncoder, BertPretrainer, checkpoints

    keras.utils.set_random_seed(seed)
    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=256, max_position_embeddings=64, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertPretrainer(BertEncoder(config))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=keras.optimizers.Adam(2e-3), loss={"mlm_logits": loss, "nsp_logits": loss},
                  metrics={"mlm_logits": ["accuracy"], "nsp_logits": ["accuracy"]})
    x, y = synthetic_batches(train_steps, batch_size, vocab_size=config.vocab_size, seed=seed)
    dev_x, dev_y = synthetic_batches(8, 64, vocab_size=config.vocab_size, seed=seed + 1)
    logging.info("training BERT (%d layers, H=%d) for %d steps", config.num_hidden_layers, config.hidden_size,
                 train_steps)
    start = time.time()
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=2 if os.environ.get("CI") else 1)
    scores = model.evaluate(dev_x, dev_y, batch_size=64, return_dict=True, verbose=0)
    mlm_acc, nsp_acc = scores["mlm_logits_accuracy"], scores["nsp_logits_accuracy"]

    os.makedirs(output_dir, exist_ok=True)
    prefix = checkpoints.save_original(model, os.path.join(output_dir, "bert_model.ckpt"))
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    keras_path = os.path.join(output_dir, "bert_pretrainer.keras")
    model.save(keras_path + ".tmp.keras")
    os.replace(keras_path + ".tmp.keras", keras_path)
    from_tf1 = checkpoints.load_original(prefix, os.path.join(output_dir, "bert_config.json"), model="pretrainer")
    from_keras = keras.saving.load_model(keras_path)
    probe = {k: v[:64] for k, v in dev_x.items()}
    reference = model(probe)["mlm_logits"].numpy()
    same = all(np.array_equal(reference, m(probe)["mlm_logits"].numpy()) for m in (from_tf1, from_keras))
    figures = {"mlm_accuracy": mlm_acc, "nsp_accuracy": nsp_acc, "mlm_chance": 1 / (config.vocab_size - SPECIAL),
               "reload_identical": same, "seconds": time.time() - start, "checkpoint": prefix}
    print(f"quickstart: MLM accuracy {mlm_acc:.3f} (chance {figures['mlm_chance']:.3f}), NSP accuracy "
          f"{nsp_acc:.3f} (chance 0.5); reloaded from TF1 checkpoint and .keras: "
          f"{'identical' if same else 'DIFFERENT'}; {figures['seconds']:.0f} s; wrote {output_dir}")
    return figures


def main(argv):
    del argv
    f = flags.FLAGS
    figures = run_demo(f.output_dir, f.train_steps, f.batch_size, f.random_seed)
    if not figures["reload_identical"]:
        raise SystemExit("quickstart: reloaded model differs from the trained one")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
