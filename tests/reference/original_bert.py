"""The original google-research/bert training step in plain numpy (float64), written for the parity tests.

Written from the equations of the original `modeling.py`, `run_pretraining.py`, `run_classifier.py` and
`optimization.py` (read, not copied) and from nothing in `bert_tf`: the forward pass, its gradient by hand (checked
against finite differences in the tests), the losses, global-norm clipping and `AdamWeightDecayOptimizer` under
the original's warmup + linear decay schedule. Parameters are a dict keyed by the original checkpoint names.
Dropout is left out (the parity tests switch it off on our side).
"""

from __future__ import annotations

import numpy as np

LN_EPS = 1e-12  # tf.contrib.layers.layer_norm's variance epsilon
GELU_C = np.sqrt(2.0 / np.pi)


# --------------------------------------------------------------------------------------------------- pieces
def dense(x, w, b):
    return x @ w + b


def dense_back(dy, x, w):
    """(dx, dw, db) of `x @ w + b`, `x` of any leading shape."""
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    return dy @ w.T, x2.T @ dy2, dy2.sum(0)


def layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt(var + LN_EPS)
    xhat = (x - mean) * inv
    return xhat * gamma + beta, (xhat, inv)


def layer_norm_back(dy, cache, gamma):
    xhat, inv = cache
    dxhat = dy * gamma
    dx = inv * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    lead = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(lead), dy.sum(lead)


def gelu(x):
    """The original's `gelu`: the tanh approximation."""
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))


def gelu_back(dy, x):
    t = np.tanh(GELU_C * (x + 0.044715 * x ** 3))
    return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * GELU_C * (1 + 3 * 0.044715 * x ** 2))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def log_softmax(x):
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


# ---------------------------------------------------------------------------------------------------- model
def encoder_forward(p, cfg, ids, mask, types):
    """`modeling.BertModel`: returns (sequence_output, pooled_output, cache)."""
    batch, seq = ids.shape
    heads, width = cfg["num_attention_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    emb = (p["bert/embeddings/word_embeddings"][ids] + p["bert/embeddings/token_type_embeddings"][types]
           + p["bert/embeddings/position_embeddings"][:seq][None])
    x, ln = layer_norm(emb, p["bert/embeddings/LayerNorm/gamma"], p["bert/embeddings/LayerNorm/beta"])
    cache = {"emb_ln": ln, "layers": []}
    adder = ((1.0 - mask) * -10000.0)[:, None, None, :]  # create_attention_mask_from_input_mask + the -10000 adder

    def split(t):
        return t.reshape(batch, seq, heads, width).transpose(0, 2, 1, 3)

    for i in range(cfg["num_hidden_layers"]):
        n = f"bert/encoder/layer_{i}/"
        q, k, v = (split(dense(x, p[n + f"attention/self/{w}/kernel"], p[n + f"attention/self/{w}/bias"]))
                   for w in ("query", "key", "value"))
        probs = softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(width) + adder)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * width)
        attn = dense(context, p[n + "attention/output/dense/kernel"], p[n + "attention/output/dense/bias"])
        x1, ln1 = layer_norm(attn + x, p[n + "attention/output/LayerNorm/gamma"],
                             p[n + "attention/output/LayerNorm/beta"])
        pre = dense(x1, p[n + "intermediate/dense/kernel"], p[n + "intermediate/dense/bias"])
        inter = gelu(pre)
        out = dense(inter, p[n + "output/dense/kernel"], p[n + "output/dense/bias"])
        x2, ln2 = layer_norm(out + x1, p[n + "output/LayerNorm/gamma"], p[n + "output/LayerNorm/beta"])
        cache["layers"].append(dict(x=x, q=q, k=k, v=v, probs=probs, context=context, ln1=ln1, x1=x1, pre=pre,
                                    inter=inter, ln2=ln2))
        x = x2
    first = x[:, 0]
    pooled = np.tanh(dense(first, p["bert/pooler/dense/kernel"], p["bert/pooler/dense/bias"]))
    cache.update(ids=ids, types=types, first=first, pooled=pooled)
    return x, pooled, cache


def encoder_backward(p, cfg, cache, d_seq, d_pooled):
    """Gradients of every `bert/...` parameter given the gradients of the two outputs."""
    g = {}
    heads = cfg["num_attention_heads"]
    batch, seq, hidden = d_seq.shape
    width = hidden // heads
    d_seq = d_seq.copy()
    if d_pooled is not None:
        dz = d_pooled * (1 - cache["pooled"] ** 2)
        d_first, g["bert/pooler/dense/kernel"], g["bert/pooler/dense/bias"] = dense_back(
            dz, cache["first"], p["bert/pooler/dense/kernel"])
        d_seq[:, 0] += d_first
    else:  # the pooler is not in the loss (span and tagging heads): the original leaves it without a gradient
        g["bert/pooler/dense/kernel"] = g["bert/pooler/dense/bias"] = None

    def merge(t):
        return t.transpose(0, 2, 1, 3).reshape(batch, seq, hidden)

    dx = d_seq
    for i in reversed(range(cfg["num_hidden_layers"])):
        n, c = f"bert/encoder/layer_{i}/", cache["layers"][i]
        d_sum2, g[n + "output/LayerNorm/gamma"], g[n + "output/LayerNorm/beta"] = layer_norm_back(
            dx, c["ln2"], p[n + "output/LayerNorm/gamma"])
        d_inter, g[n + "output/dense/kernel"], g[n + "output/dense/bias"] = dense_back(
            d_sum2, c["inter"], p[n + "output/dense/kernel"])
        d_x1, g[n + "intermediate/dense/kernel"], g[n + "intermediate/dense/bias"] = dense_back(
            gelu_back(d_inter, c["pre"]), c["x1"], p[n + "intermediate/dense/kernel"])
        d_x1 = d_x1 + d_sum2
        d_sum1, g[n + "attention/output/LayerNorm/gamma"], g[n + "attention/output/LayerNorm/beta"] = \
            layer_norm_back(d_x1, c["ln1"], p[n + "attention/output/LayerNorm/gamma"])
        d_context, g[n + "attention/output/dense/kernel"], g[n + "attention/output/dense/bias"] = dense_back(
            d_sum1, c["context"], p[n + "attention/output/dense/kernel"])
        d_ctx = d_context.reshape(batch, seq, heads, width).transpose(0, 2, 1, 3)
        probs, q, k, v = c["probs"], c["q"], c["k"], c["v"]
        d_probs = d_ctx @ v.transpose(0, 1, 3, 2)
        d_v = probs.transpose(0, 1, 3, 2) @ d_ctx
        d_scores = probs * (d_probs - (d_probs * probs).sum(-1, keepdims=True)) / np.sqrt(width)
        d_q, d_k = d_scores @ k, d_scores.transpose(0, 1, 3, 2) @ q
        d_x = d_sum1  # the residual
        for name, d in (("query", d_q), ("key", d_k), ("value", d_v)):
            d_in, g[n + f"attention/self/{name}/kernel"], g[n + f"attention/self/{name}/bias"] = dense_back(
                merge(d), c["x"], p[n + f"attention/self/{name}/kernel"])
            d_x = d_x + d_in
        dx = d_x
    d_emb, g["bert/embeddings/LayerNorm/gamma"], g["bert/embeddings/LayerNorm/beta"] = layer_norm_back(
        dx, cache["emb_ln"], p["bert/embeddings/LayerNorm/gamma"])
    for table, index in (("word_embeddings", cache["ids"]), ("token_type_embeddings", cache["types"])):
        grad = np.zeros_like(p[f"bert/embeddings/{table}"])
        np.add.at(grad, index.reshape(-1), d_emb.reshape(-1, hidden))
        g[f"bert/embeddings/{table}"] = grad
    position = np.zeros_like(p["bert/embeddings/position_embeddings"])
    position[:seq] = d_emb.sum(0)
    g["bert/embeddings/position_embeddings"] = position
    return g


def _softmax_cross_entropy(logits, labels):
    """Per-example loss and d(loss_i)/d(logits_i) of the original's `-sum(one_hot * log_softmax)`."""
    log_probs = log_softmax(logits)
    rows = np.arange(len(labels))
    grad = np.exp(log_probs)
    grad[rows, labels] -= 1.0
    return -log_probs[rows, labels], grad


def pretraining_loss_and_grads(p, cfg, batch):
    """`run_pretraining.model_fn`'s total loss (masked LM + next sentence) and the gradient of every parameter."""
    seq_out, pooled, cache = encoder_forward(p, cfg, batch["input_ids"], batch["input_mask"], batch["segment_ids"])
    b, m = batch["masked_lm_positions"].shape
    hidden = seq_out.shape[-1]
    rows = np.repeat(np.arange(b), m)
    cols = batch["masked_lm_positions"].reshape(-1)
    h = seq_out[rows, cols]  # gather_indexes
    pre = dense(h, p["cls/predictions/transform/dense/kernel"], p["cls/predictions/transform/dense/bias"])
    act = gelu(pre)
    t, ln = layer_norm(act, p["cls/predictions/transform/LayerNorm/gamma"],
                       p["cls/predictions/transform/LayerNorm/beta"])
    table = p["bert/embeddings/word_embeddings"]
    logits = t @ table.T + p["cls/predictions/output_bias"]
    weights = batch["masked_lm_weights"].reshape(-1)
    per_position, d_logits = _softmax_cross_entropy(logits, batch["masked_lm_ids"].reshape(-1))
    denominator = weights.sum() + 1e-5
    mlm_loss = (weights * per_position).sum() / denominator
    d_logits *= (weights / denominator)[:, None]

    nsp_w, nsp_b = p["cls/seq_relationship/output_weights"], p["cls/seq_relationship/output_bias"]
    nsp_logits = pooled @ nsp_w.T + nsp_b
    nsp_per_example, d_nsp = _softmax_cross_entropy(nsp_logits, batch["next_sentence_labels"].reshape(-1))
    nsp_loss = nsp_per_example.mean()
    d_nsp /= b

    g = {"cls/predictions/output_bias": d_logits.sum(0),
         "cls/seq_relationship/output_weights": d_nsp.T @ pooled, "cls/seq_relationship/output_bias": d_nsp.sum(0)}
    d_table = d_logits.T @ t
    d_t = d_logits @ table
    d_act, g["cls/predictions/transform/LayerNorm/gamma"], g["cls/predictions/transform/LayerNorm/beta"] = \
        layer_norm_back(d_t, ln, p["cls/predictions/transform/LayerNorm/gamma"])
    d_h, g["cls/predictions/transform/dense/kernel"], g["cls/predictions/transform/dense/bias"] = dense_back(
        gelu_back(d_act, pre), h, p["cls/predictions/transform/dense/kernel"])
    d_seq = np.zeros_like(seq_out)
    np.add.at(d_seq, (rows, cols), d_h.reshape(-1, hidden))
    g.update(encoder_backward(p, cfg, cache, d_seq, d_nsp @ nsp_w))
    g["bert/embeddings/word_embeddings"] = g["bert/embeddings/word_embeddings"] + d_table  # the tied decoder
    return mlm_loss + nsp_loss, g


def classifier_loss_and_grads(p, cfg, batch):
    """`run_classifier.create_model`'s loss (mean cross-entropy of `output_weights`/`output_bias` on the pooled
    output) and the gradient of every parameter."""
    seq_out, pooled, cache = encoder_forward(p, cfg, batch["input_ids"], batch["input_mask"], batch["segment_ids"])
    logits = pooled @ p["output_weights"].T + p["output_bias"]
    per_example, d_logits = _softmax_cross_entropy(logits, batch["label_ids"])
    d_logits /= len(per_example)
    g = {"output_weights": d_logits.T @ pooled, "output_bias": d_logits.sum(0)}
    g.update(encoder_backward(p, cfg, cache, np.zeros_like(seq_out), d_logits @ p["output_weights"]))
    return per_example.mean(), g


# ------------------------------------------------------------------------------------------------ optimizer
def learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    """`optimization.create_optimizer`'s rate at `global_step` = `step` (the updates made so far)."""
    rate = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)  # polynomial_decay, power 1, end 0
    if num_warmup_steps and step < num_warmup_steps:
        rate = init_lr * step / num_warmup_steps
    return rate


def no_decay(name):
    """`exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]`, matched anywhere in the name."""
    return any(part in name for part in ("LayerNorm", "layer_norm", "bias"))


class AdamWeightDecay:
    """`AdamWeightDecayOptimizer` after `tf.clip_by_global_norm(grads, 1.0)`, as `create_optimizer` builds it."""

    def __init__(self, init_lr, num_train_steps, num_warmup_steps, weight_decay_rate=0.01, beta_1=0.9,
                 beta_2=0.999, epsilon=1e-6, clip_norm=1.0):
        self.schedule = (init_lr, num_train_steps, num_warmup_steps)
        self.weight_decay_rate, self.beta_1, self.beta_2, self.epsilon = weight_decay_rate, beta_1, beta_2, epsilon
        self.clip_norm = clip_norm
        self.step = 0
        self.m, self.v = {}, {}

    def apply(self, params, grads):
        present = {name: g for name, g in grads.items() if g is not None}
        norm = np.sqrt(sum((g ** 2).sum() for g in present.values()))
        scale = self.clip_norm / max(norm, self.clip_norm)
        rate = learning_rate(self.step, *self.schedule)
        for name, grad in present.items():
            grad = grad * scale
            m = self.beta_1 * self.m.get(name, 0.0) + (1 - self.beta_1) * grad
            v = self.beta_2 * self.v.get(name, 0.0) + (1 - self.beta_2) * grad ** 2
            update = m / (np.sqrt(v) + self.epsilon)
            if self.weight_decay_rate and not no_decay(name):
                update = update + self.weight_decay_rate * params[name]
            params[name] = params[name] - rate * update
            self.m[name], self.v[name] = m, v
        self.step += 1
        return params


class Lamb(AdamWeightDecay):
    """LAMB (You et al., 2019, Algorithm 2) after the same clipping and under the same schedule as `AdamWeightDecay`,
    for the `lamb` option (not the original's optimizer; written from the paper, and from Model Garden's description
    of which variables it leaves out): bias-corrected moments, the Adam direction plus the weight decay, scaled by the
    layer's ||w|| / ||direction|| (1 where a norm is 0); LayerNorm and bias variables get neither decay nor scaling."""

    def apply(self, params, grads):
        grads = {name: g for name, g in grads.items() if g is not None}
        norm = np.sqrt(sum((g ** 2).sum() for g in grads.values()))
        scale = self.clip_norm / max(norm, self.clip_norm)
        rate = learning_rate(self.step, *self.schedule)
        t = self.step + 1
        for name, grad in grads.items():
            grad = grad * scale
            m = self.beta_1 * self.m.get(name, 0.0) + (1 - self.beta_1) * grad
            v = self.beta_2 * self.v.get(name, 0.0) + (1 - self.beta_2) * grad ** 2
            direction = (m / (1 - self.beta_1 ** t)) / (np.sqrt(v / (1 - self.beta_2 ** t)) + self.epsilon)
            trust = 1.0
            if not no_decay(name):
                direction = direction + self.weight_decay_rate * params[name]
                w, d = np.linalg.norm(params[name]), np.linalg.norm(direction)
                trust = w / d if w > 0 and d > 0 else 1.0
            params[name] = params[name] - rate * trust * direction
            self.m[name], self.v[name] = m, v
        self.step += 1
        return params
