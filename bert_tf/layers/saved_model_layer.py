"""`SavedModelLayer`: Keras 3's `TFSMLayer` whose weights any Keras optimizer can train.

`TFSMLayer(trainable=True)` wraps the SavedModel's variables (gradients reach them) but names each after
`tf.Variable.name`, which always ends in ":0"; optimizers with slots (Adam, AdamW, SGD with momentum) name theirs
after the weight and fail to build ("'..._kernel:0_momentum' is not a valid scope name", Keras 3.15, on any
SavedModel, Keras's own `model.export()` included). This layer names the weights without the ":0" and is otherwise
`TFSMLayer`: the same arguments, and the same saving (a `.keras` file refers to the SavedModel's path and holds the
fine-tuned values; reloading it needs `safe_mode=False`, as for `TFSMLayer`).
"""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="bert_tf")
class SavedModelLayer(keras.layers.TFSMLayer):
    """`keras.layers.TFSMLayer` with weights named so that optimizers with slots can build (see the module)."""

    def _add_existing_weight(self, weight):
        variable = keras.Variable(initializer=weight, trainable=weight.trainable, dtype=weight.dtype,
                                  shape=weight.shape, name=weight.name.split(":")[0].replace("/", "_"))
        self._track_variable(variable)
