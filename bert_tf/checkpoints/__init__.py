"""Loading and writing BERT weights: original TF1 checkpoints (google-research/bert), HF safetensors, keras-hub
presets, our own training checkpoints, and conversion between them; Model Garden / TF Hub encoders are read.

One name map serves every format (`names`: `variable_map(model)` lists each of our variables with its original TF1
name, `hf_name` derives the HF one). Loading is all-or-nothing: every value is read and shape-checked before any
variable is assigned, so a bad checkpoint raises one `CheckpointError` naming the variable and leaves the model
untouched. One module per format (`original`, `hf`, `kerashub`, `model_garden`, `ours`: `restore_weights`
initialises a model from any of them) and `conversion` (behind convert_checkpoint); the names below are the package's API:
`checkpoints.load_original(...)`, `checkpoints.restore_weights(...)`.
"""

from bert_tf.checkpoints.conversion import FORMATS, INPUT_FORMATS, convert, output_format
from bert_tf.checkpoints.hf import load_hf, read_hf, restore_hf, save_hf
from bert_tf.checkpoints.kerashub import load_keras_hub, save_keras_hub
from bert_tf.checkpoints.model_garden import load_model_garden
from bert_tf.checkpoints.names import CheckpointError, Slot, hf_name, variable_map
from bert_tf.checkpoints.original import load_original, read_original, restore_original, save_original
from bert_tf.checkpoints.ours import restore_fitting, restore_weights

__all__ = ["CheckpointError", "FORMATS", "INPUT_FORMATS", "Slot", "convert", "hf_name", "load_hf", "load_keras_hub",
           "load_model_garden", "load_original", "output_format", "read_hf", "read_original", "restore_fitting",
           "restore_hf", "restore_original", "restore_weights", "save_hf", "save_keras_hub", "save_original",
           "variable_map"]
