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


def _records(tmp_path, minilm_dir, count, name="records", random_next_sentence=False):
    """(corpus lines, records path): `count` docstring lines in documents of 5, as seq-32 records."""
    from bench.common import docstring_lines
    from data_gen.generate import Options, generate

    lines = [line for line in docstring_lines() if line.strip()][:count]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join("\n".join(lines[i:i + 5]) + "\n\n" for i in range(0, len(lines), 5)))
    records = str(tmp_path / name / "r.tfrecord")
    generate([str(corpus)], [records], os.path.join(minilm_dir, "vocab.txt"),
             Options(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1,
                     random_next_sentence=random_next_sentence), progress=False)
    return lines, records


def test_no_nsp_has_no_next_sentence_head_and_its_loss_is_the_masked_lm_loss(tiny_config):
    import keras

    from bert_tf import BertPretrainer

    config = dataclasses.replace(tiny_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertPretrainer(config, objective="mlm")
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
    from bert_tf import BertConfig, checkpoints
    from bert_tf.pretraining import DataError, PretrainingOptions, pretraining_dataset, run_pretraining

    _, records = _records(tmp_path, minilm_dir, 400)
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
    _, paired = _records(tmp_path, minilm_dir, 400, "paired", random_next_sentence=True)  # the same corpus
    with pytest.raises(checkpoints.CheckpointError, match="objective 'mlm' there, 'mlm_nsp' here"):
        run_pretraining(config, paired, str(tmp_path / "mlm"), dataclasses.replace(options, num_train_steps=4))


def _prefix_case(config, seed=0):
    """A batch (the last row padded) and a copy whose tokens after a random position t of each row differ."""
    rng = np.random.default_rng(seed)
    batch, seq = 4, 12
    ids = rng.integers(5, config.vocab_size, (batch, seq)).astype("int32")
    mask = np.ones((batch, seq), "int32")
    mask[-1, 9:] = 0
    x = {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
    cut = rng.integers(0, 8, batch)
    later = np.arange(seq)[None, :] > cut[:, None]
    changed = dict(x, input_word_ids=np.where(later, (ids + 7) % config.vocab_size, ids) * mask)
    return x, changed, cut


@pytest.mark.parametrize("causal", [True, False])
def test_a_causal_encoder_keeps_every_prefix_bit_identical(tiny_config, causal):
    """LTR & No NSP (Table 5): changing tokens t+1..n leaves every output at positions <= t bit-identical, in every
    layer and through the LM head; the bidirectional encoder fails the same test."""
    from bert_tf import BertPretrainer

    config = dataclasses.replace(tiny_config, causal_attention=causal)
    model = BertPretrainer(config, objective="ltr" if causal else "mlm")
    x, changed, cut = _prefix_case(config)
    if not causal:
        x, changed = ({**d, "masked_lm_positions": np.zeros((4, 1), "int32")} for d in (x, changed))
    a, b = model.encoder({k: x[k] for k in x if k != "masked_lm_positions"}), \
        model.encoder({k: changed[k] for k in changed if k != "masked_lm_positions"})
    outputs = [(a["embedding_output"], b["embedding_output"])] + list(zip(a["encoder_outputs"], b["encoder_outputs"]))
    if causal:
        outputs.append((model(x)["lm_logits"], model(changed)["lm_logits"]))
    same = [all(np.array_equal(p.numpy()[row, :cut[row] + 1], q.numpy()[row, :cut[row] + 1]) for row in range(4))
            for p, q in outputs]
    if causal:
        assert all(same)
        assert not np.array_equal(outputs[-1][0].numpy(), outputs[-1][1].numpy())  # later positions did change
    else:
        assert same[0] and not any(same[1:])  # embeddings are per position; attention mixes in later tokens


def test_ltr_loss_is_the_next_token_cross_entropy(tiny_config):
    import keras

    from bert_tf import BertPretrainer

    config = dataclasses.replace(tiny_config, causal_attention=True, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    model = BertPretrainer(config, objective="ltr")
    assert model.objective == "ltr" and not [w.path for w in model.weights if "seq_relationship" in w.path]
    x, _, _ = _prefix_case(config)
    ids, mask = x["input_word_ids"], x["input_mask"]
    y = {"lm_ids": np.pad(ids[:, 1:], [[0, 0], [0, 1]]), "lm_weights": np.pad(mask[:, 1:], [[0, 0], [0, 1]])
         .astype("float32")}
    logits = model(x)["lm_logits"].numpy().astype(np.float64)
    assert logits.shape == ids.shape + (config.vocab_size,)
    # position t predicts token t + 1, where that token is real: sum(ce) / (count + 1e-5), in float64
    ce = -np.take_along_axis(_log_softmax(logits[:, :-1]), ids[:, 1:, None].astype(int), -1)[..., 0]
    expected = (ce * mask[:, 1:]).sum() / (mask[:, 1:].sum() + 1e-5)
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    assert float(model.compute_loss(x, y, model(x))) == pytest.approx(expected, rel=1e-5)
    logs = model.train_step((x, y))
    assert set(logs) == {"loss", "lm_accuracy", "lm_loss"} and float(logs["loss"]) == pytest.approx(expected, rel=1e-5)
    again = BertPretrainer.from_config(model.get_config())
    assert again.objective == "ltr" and again.encoder.bert_config.causal_attention
    with pytest.raises(ValueError, match="objective='ltr' needs an encoder with causal_attention=True"):
        BertPretrainer(tiny_config, objective="ltr")
    with pytest.raises(ValueError, match="objective='mlm' needs an encoder with causal_attention=False"):
        BertPretrainer(config, objective="mlm")


def test_ltr_records_pretraining_and_fine_tuning_end_to_end(minilm_dir, tmp_path):
    """--objective=ltr trains on records made with --random_next_sentence=false, with the masked pieces put back (each
    restored segment is a stretch of the tokenized corpus, no [MASK] left); records that pair A with random Bs are
    refused; its released model's bert_config.json says causal_attention, so fine-tuning from it builds a causal
    encoder (the prefix test on the fine-tuned model) whose pooled output reads the last real token; resuming its
    output directory with another objective is refused."""
    from bert_tf import BertClassifier, BertConfig, BertEncoder, checkpoints
    from bert_tf.pretraining import DataError, PretrainingOptions, pretraining_dataset, run_pretraining
    from bert_tf.tokenization import FullTokenizer

    lines, records = _records(tmp_path, minilm_dir, 300)
    tokenizer = FullTokenizer(os.path.join(minilm_dir, "vocab.txt"))
    stream = " " + " ".join(str(i) for line in lines for i in tokenizer.convert_tokens_to_ids(
        tokenizer.tokenize(line))) + " "
    special = {tokenizer.vocab[t] for t in ("[CLS]", "[SEP]", "[MASK]")}
    checked = 0
    for x, y in pretraining_dataset([records], 32, 5, 16, is_training=False, objective="ltr"):
        assert set(x) == {"input_word_ids", "input_mask", "input_type_ids"} and set(y) == {"lm_ids", "lm_weights"}
        for ids, mask, next_ids, weights in zip(x["input_word_ids"].numpy(), x["input_mask"].numpy(),
                                                y["lm_ids"].numpy(), y["lm_weights"].numpy()):
            real = list(ids[:mask.sum()])
            assert tokenizer.vocab["[MASK]"] not in real and list(next_ids[:len(real) - 1]) == real[1:]
            assert list(weights) == [1.0] * (len(real) - 1) + [0.0] * (32 - len(real) + 1)
            segment = []
            for piece in real[1:] + [tokenizer.vocab["[SEP]"]]:
                if piece in special:
                    if segment:
                        assert " " + " ".join(map(str, segment)) + " " in stream
                        checked += 1
                    segment = []
                else:
                    segment.append(piece)
    assert checked > 50

    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    options = PretrainingOptions(max_seq_length=32, max_predictions_per_seq=5, train_batch_size=8, eval_batch_size=8,
                                 num_train_steps=2, num_warmup_steps=0, save_checkpoints_steps=2, do_eval=True,
                                 max_eval_steps=2, objective="ltr")
    results = run_pretraining(config, records, str(tmp_path / "ltr"), options)
    assert results["train"]["step"] == 2 and {"lm_loss", "lm_accuracy"} <= set(results["eval"])
    export = results["train"]["export"]
    tuned_config = BertConfig.from_json_file(os.path.join(export, "bert_config.json"))
    assert tuned_config.causal_attention
    classifier = BertClassifier(BertEncoder(tuned_config), num_classes=2)
    checkpoints.restore_weights(classifier, os.path.join(export, "bert_model.ckpt"))
    x, changed, cut = _prefix_case(tuned_config)
    a, b = classifier.encoder(x), classifier.encoder(changed)
    for row in range(4):
        assert np.array_equal(a["sequence_output"].numpy()[row, :cut[row] + 1],
                              b["sequence_output"].numpy()[row, :cut[row] + 1])
    last = x["input_mask"].sum(1) - 1
    pooled = classifier.encoder.pooler.dense(a["sequence_output"].numpy()[np.arange(4), last]).numpy()
    np.testing.assert_allclose(a["pooled_output"].numpy(), pooled, rtol=1e-6, atol=1e-6)

    _, paired = _records(tmp_path, minilm_dir, 300, "paired", random_next_sentence=True)
    with pytest.raises(DataError, match="random B.*--random_next_sentence=false"):
        run_pretraining(config, paired, str(tmp_path / "other"), options)
    with pytest.raises(checkpoints.CheckpointError, match="objective 'ltr' there, 'mlm' here"):
        run_pretraining(config, records, str(tmp_path / "ltr"), dataclasses.replace(options, objective="mlm",
                                                                                     num_train_steps=4))
