"""A learned weighted sum of layers (ELMo's scalar mix), for the paper's feature-based "weighted sum" rows (Table 7)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_tf")
class ScalarMix(keras.layers.Layer):
    """`gamma * sum_j softmax(s)_j * h_j` over a list of `num_layers` same-shaped tensors h_j.

    The scalars s_j start at 0 (equal weights: the mean of the layers) and gamma at 1; both are trainable, so a model
    trained on frozen BERT features learns which layers to weigh. The weights are softmax-normalised: they stay
    positive and sum to 1, and gamma sets the overall scale.

    Args:
      num_layers: how many tensors the layer mixes.
    """

    def __init__(self, num_layers, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = num_layers

    def build(self, input_shape=None):
        self.scalars = self.add_weight(shape=(self.num_layers,), initializer="zeros", name="scalars")
        self.gamma = self.add_weight(shape=(), initializer="ones", name="gamma")

    def weights_of_layers(self):
        """The normalised weight of each layer (softmax of the scalars)."""
        return ops.softmax(self.scalars)

    def call(self, layers):
        if len(layers) != self.num_layers:
            raise ValueError(f"ScalarMix of {self.num_layers} layers got {len(layers)}")
        weights = ops.cast(self.weights_of_layers(), layers[0].dtype)
        mixed = sum(weights[j] * layer for j, layer in enumerate(layers))
        return ops.cast(self.gamma, layers[0].dtype) * mixed

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers)
        return config
