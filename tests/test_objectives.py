"""The paper's pretraining objectives (Table 5): "No NSP" trains masked LM alone, on records whose B always
follows A."""

import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.test_pretraining import _batch


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_no_nsp_has_no_next_sentence_head_and_its_loss_is_the_masked_lm_loss(tiny_config):
    import keras

    from bert_tf import BertPretrainer

    config = dataclasses.replace(tiny_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertPretrainer(config, next_sentence=False)
    assert model.objective == "mlm" and BertPretrainer(config).objective == "mlm_nsp"
    assert not [w.path for w in model.weights if "seq_relationship" in w.path]
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    x, y = _batch(config)
    outputs = model(x)
    assert set(outputs) == {"mlm_logits"}
    # the original's masked-LM loss, in float64 from the logits: sum(w * ce) / (sum(w) + 1e-5)
    logits = outputs["mlm_logits"].numpy().astype(np.float64)
    ce = -np.take_along_axis(_log_softmax(logits), y["masked_lm_ids"][..., None], -1)[..., 0]
    weights = y["masked_lm_weights"]
    expected = (ce * weights).sum() / (weights.sum() + 1e-5)
    labels = {key: y[key] for key in ("masked_lm_ids", "masked_lm_weights")}  # no next-sentence labels needed
    loss = float(model.compute_loss(x, labels, outputs))
    assert loss == pytest.approx(expected, rel=1e-5)
    logs = model.train_step((x, labels))
    assert "next_sentence_accuracy" not in logs and float(logs["loss"]) == pytest.approx(expected, rel=1e-5)
    again = BertPretrainer.from_config(model.get_config())
    assert again.objective == "mlm" and len(again.weights) == len(model.weights)


def test_no_nsp_records_and_pretraining_end_to_end(minilm_dir, tmp_path):
    """create_pretraining_data --random_next_sentence=false: every B follows its A in the corpus (label 0) and the
    records parse with the original schema. Pretraining them with the BERT objective is refused (its NSP head would
    have nothing to learn); --objective=mlm trains, its released-model checkpoint has no NSP head, and resuming its
    output directory with the BERT objective is refused, naming the objective."""
    from bench.common import docstring_lines
    from bert_tf import BertConfig, checkpoints
    from bert_tf.pretraining import DataError, PretrainingOptions, pretraining_dataset, run_pretraining
    from data_gen.generate import Options, generate

    lines = [line for line in docstring_lines() if line.strip()][:400]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join("\n".join(lines[i:i + 5]) + "\n\n" for i in range(0, len(lines), 5)))
    vocab = os.path.join(minilm_dir, "vocab.txt")
    records = str(tmp_path / "records" / "r.tfrecord")
    generate([str(corpus)], [records], vocab, Options(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1,
                                                      random_next_sentence=False), progress=False)
    count = 0
    for x, y in pretraining_dataset([records], 32, 5, 16, is_training=False):
        assert not y["next_sentence_labels"].numpy().any()
        count += len(y["next_sentence_labels"])
    assert count > 50

    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    options = PretrainingOptions(max_seq_length=32, max_predictions_per_seq=5, train_batch_size=8,
                                 num_train_steps=2, num_warmup_steps=0, save_checkpoints_steps=2)
    with pytest.raises(DataError, match="--random_next_sentence=false .* pretrain them with --objective=mlm"):
        run_pretraining(config, records, str(tmp_path / "bert"), options)
    assert not (tmp_path / "bert").exists()
    mlm = dataclasses.replace(options, objective="mlm")
    results = run_pretraining(config, records, str(tmp_path / "mlm"), mlm)
    assert results["train"]["step"] == 2 and "next_sentence_accuracy" not in results["train"]
    names = dict(tf.train.list_variables(os.path.join(results["train"]["export"], "bert_model.ckpt")))
    assert "cls/predictions/output_bias" in names and not [n for n in names if "seq_relationship" in n]
    paired = str(tmp_path / "paired" / "r.tfrecord")  # the same corpus with random next sentences
    generate([str(corpus)], [paired], vocab, Options(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1),
             progress=False)
    with pytest.raises(checkpoints.CheckpointError, match="objective 'mlm' there, 'mlm_nsp' here"):
        run_pretraining(config, paired, str(tmp_path / "mlm"), dataclasses.replace(options, num_train_steps=4))
