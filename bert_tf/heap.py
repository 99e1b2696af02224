"""Python's cyclic garbage collector and the hundreds of thousands of long-lived objects TensorFlow's modules make.

Importing TensorFlow and Keras allocates enough objects to trigger the collector hundreds of times, and its oldest-
generation collections, there and in the rest of the process, walk all of those objects again: a large share of the
import's time, and of the time of any allocation-heavy Python work after it (building Keras models, data_gen's
lists). `collector_paused` runs the import without collections, and then (`promote`) moves every object the
collector tracks to its oldest generation in one step, without walking them (`gc.freeze` and `gc.unfreeze`, each a
splice of the collector's lists): left young, the import's hundreds of thousands of objects would be walked by the
first young collection after it, then again by each older one on their way up (BENCHMARKS.md, "Pretraining data
generation", has the cost). In the oldest generation they wait for the first full collection, which walks them once
and frees the few thousand objects of cyclic garbage the import leaves; CPython runs it after some tens of thousands
of new long-lived objects (it does not count those `gc.unfreeze` moved, which would otherwise put it off), and
later full collections rarely. The commands, which own their process, move what exists once their modules are
imported to the collector's permanent generation (`gc.freeze`, in `bert_tf.cli.start`), which no collection visits;
a library import does not, since reference cycles among objects of the caller's made before it would then never be
freed. Where the caller has frozen objects already, the move is left out: `gc.unfreeze` would hand the caller's
frozen objects back to the collector.
"""

import contextlib
import gc


@contextlib.contextmanager
def collector_paused(promote: bool = False):
    """Within the block the cyclic collector does not run; afterwards it is as it was (a caller's `gc.disable()`
    stays). With `promote`, every object it tracks is then in its oldest generation, unless the caller has frozen
    some (finding out walks the frozen objects: for the import of TensorFlow, not for imports that add a few
    thousand objects to it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if promote and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()
