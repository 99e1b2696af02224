"""Python's cyclic garbage collector and the hundreds of thousands of long-lived objects TensorFlow's modules make.

Importing TensorFlow and Keras allocates enough objects to trigger the collector hundreds of times, and its oldest-
generation collections, there and in the rest of the process, walk all of those objects again: a large share of the
import's time, and of the time of any allocation-heavy Python work after it (building Keras models, data_gen's
lists). `collector_paused` runs the import without collections; its objects are then all young, and the collections
after it that promote them to the oldest generation walk them a few times in all, where the import ran hundreds,
several of them over everything made so far (its cyclic garbage, a few thousand objects, is collected then). The
commands, which own their process, move what exists once their modules are imported to the collector's permanent
generation (`gc.freeze`, in `bert_tf.cli.start`), which no collection visits; a library import does not, since
reference cycles among objects of the caller's made before it would then never be freed.
"""

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """Within the block the cyclic collector does not run; afterwards it is as it was (a caller's `gc.disable()`
    stays)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
