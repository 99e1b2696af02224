"""Imports that TensorFlow's start-up makes and bert_tf does not need then, loaded at first use instead.

`import tensorflow` imports Keras, and Keras imports `matplotlib.pyplot` if matplotlib is installed (it is: the
quickstart and the section 5 drivers draw their plots with it), for image-gallery helpers that bert_tf never calls.
That import is a sizeable part of the start-up of every process that imports TensorFlow: each command, each test's
interpreter. `defer_pyplot` registers a module whose code runs when one of its attributes is first asked for:
`import matplotlib.pyplot` still succeeds at once, and `plt.subplots` (or any other name) loads it as if it were
imported then. `matplotlib.use` asks for one (it switches the backend of a pyplot already imported), so the plotting
code's `matplotlib.use("Agg")` loads it, as before. (The standard library's `importlib.util.LazyLoader` loads at any
attribute, `__spec__` included, which the import statement itself reads.)
"""

import importlib.util
import sys
import threading
import types


class _Deferred(types.ModuleType):
    """A module whose code has not run yet: the first attribute it lacks runs it, once. Another thread that asks
    meanwhile waits for it; the module's own code, while it runs, sees a module still being imported (a name not yet
    defined is an AttributeError, as it would be then)."""

    _lock = threading.RLock()

    def __getattr__(self, attribute):
        with _Deferred._lock:
            if type(self) is _Deferred and not vars(self).get("_deferred_running"):
                vars(self)["_deferred_running"] = True
                try:
                    self.__spec__.loader.exec_module(self)
                    self.__class__ = types.ModuleType
                finally:
                    del vars(self)["_deferred_running"]
        return types.ModuleType.__getattribute__(self, attribute)


def defer_pyplot() -> bool:
    """Defers `matplotlib.pyplot` if it is installed and not imported yet; whether it did. `import bert_tf` calls
    this before it imports TensorFlow."""
    name = "matplotlib.pyplot"
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)  # imports the matplotlib package itself (small)
    except ImportError:
        return False
    if spec is None or not hasattr(spec.loader, "exec_module"):
        return False
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _Deferred
    sys.modules[name] = module
    setattr(sys.modules["matplotlib"], "pyplot", module)
    return True
