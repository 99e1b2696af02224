"""The paper's feature-based combinations of an encoder's layers (section 5.3, Table 7), as one Keras layer."""

import keras
from keras import ops

from bert_tf.layers.scalar_mix import ScalarMix

# The paper's Table 7 rows, then the plain (unweighted) sums.
COMBINATIONS = ("embeddings", "second_to_last_hidden", "last_hidden", "weighted_sum_last_four", "concat_last_four",
                "weighted_sum_all", "sum_last_four", "sum_all")


@keras.saving.register_keras_serializable(package="bert_tf")
class FeatureCombination(keras.layers.Layer):
    """One of the paper's feature-based combinations (Table 7) of a `BertEncoder`'s outputs, for a model trained on
    frozen BERT features: `embeddings` (the embedding output, layer 0: after its LayerNorm, as the original's
    `embedding_output`), the `last_hidden` or `second_to_last_hidden` layer, `concat_last_four` (layers -4 to -1,
    in that order), the learned `weighted_sum_last_four` and `weighted_sum_all` (of the encoder's layers, the
    paper's "all 12 layers"; a `ScalarMix`), and the plain `sum_last_four` and `sum_all`.

    Call it on the encoder's output dict; it returns [batch, seq, hidden] (four times hidden for the concat).

    Args:
      combination: one of `COMBINATIONS`.
      num_layers: the encoder's number of layers (the weighted sum of all mixes that many).
    """

    def __init__(self, combination, num_layers, **kwargs):
        super().__init__(**kwargs)
        if combination not in COMBINATIONS:
            raise ValueError(f"combination={combination!r}: choose one of {', '.join(COMBINATIONS)}")
        if num_layers < (4 if "four" in combination else 2 if "second" in combination else 1):
            raise ValueError(f"combination={combination!r} needs more than {num_layers} layer(s)")
        self.combination = combination
        self.num_layers = num_layers
        self.mix = None
        if combination.startswith("weighted_sum"):
            self.mix = ScalarMix(4 if combination.endswith("four") else num_layers, dtype=self.dtype_policy,
                                 name="scalar_mix")

    def build(self, input_shape=None):
        if self.mix is not None:
            self.mix.build()

    def call(self, outputs):
        layers = list(outputs["encoder_outputs"])
        if len(layers) != self.num_layers:
            raise ValueError(f"FeatureCombination for {self.num_layers} layers got {len(layers)}")
        chosen = {"embeddings": lambda: outputs["embedding_output"],
                  "last_hidden": lambda: layers[-1],
                  "second_to_last_hidden": lambda: layers[-2],
                  "concat_last_four": lambda: ops.concatenate(layers[-4:], axis=-1),
                  "weighted_sum_last_four": lambda: self.mix(layers[-4:]),
                  "weighted_sum_all": lambda: self.mix(layers),
                  "sum_last_four": lambda: sum(layers[-4:]),
                  "sum_all": lambda: sum(layers)}
        return chosen[self.combination]()

    def get_config(self):
        config = super().get_config()
        config.update(combination=self.combination, num_layers=self.num_layers)
        return config
