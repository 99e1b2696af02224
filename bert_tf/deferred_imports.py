"""Imports that TensorFlow's start-up makes and bert_tf does not need then, loaded at first use instead.

`import tensorflow` imports Keras, and Keras imports `matplotlib.pyplot` and `matplotlib.patches` if matplotlib is
installed (it is: the quickstart and the section 5 drivers draw their plots with it), for image-gallery helpers that
bert_tf never calls. Those imports, with the matplotlib package under them, are a sizeable part of the start-up of
every process that imports TensorFlow: each command, each test's interpreter. `defer_matplotlib` registers the three
as modules whose code runs when one of their attributes is first asked for: `import matplotlib.pyplot` and `from
matplotlib import patches` still succeed at once, and `plt.subplots` (or any other name) loads the module as if it
were imported then, and what it imports with it. `matplotlib.use` asks for one (and switches the backend of a pyplot
already imported, which asks pyplot for one), so the plotting code's `matplotlib.use("Agg")` loads both, as before.
(The standard library's `importlib.util.LazyLoader` loads at any attribute, `__spec__` included, which the import
statement itself reads.)
"""

import importlib.machinery
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


def defer_submodule(name: str) -> bool:
    """Defers the module `name`, a submodule of packages none of which is imported yet, to its first use; whether it
    did. It is looked for in each package's directory in turn, without running any package's code: where the import
    system finds it if no package on the way changes its own `__path__` when it runs (true of tensorflow-text's). A
    namespace package on the way, or a module that is not a file, is not deferred. The module is not bound as an
    attribute of its package until it runs; `from package import module` finds it all the same.
    (`bert_tf.tokenization.load_tensorflow_text` defers tensorflow-text's Keras layers this way in a process that
    has not loaded Keras, data_gen's main process: they would load it.)"""
    parts = name.split(".")
    with _Deferred._lock:
        if any(".".join(parts[:i]) in sys.modules for i in range(1, len(parts) + 1)):
            return False
        spec = importlib.util.find_spec(parts[0])  # a top-level module's spec: nothing is imported
        for i in range(2, len(parts) + 1):
            if spec is None or spec.origin is None or not spec.submodule_search_locations:
                return False
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i]), spec.submodule_search_locations)
        if spec is None or spec.origin is None or not hasattr(spec.loader, "exec_module"):
            return False
        _install(spec)
        return True


def _install(spec) -> types.ModuleType:
    """The module of `spec` in sys.modules, deferred: its code not run yet."""
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _Deferred
    sys.modules[spec.name] = module
    return module


def defer_matplotlib() -> bool:
    """Defers `matplotlib` and the two modules of it that Keras imports at start-up, `matplotlib.pyplot` and
    `matplotlib.patches`, those of them not imported yet, if matplotlib is installed and pyplot (which imports the
    other two) is not imported yet; whether it did. `import bert_tf` calls this before it imports TensorFlow."""
    names = [name for name in ("matplotlib", "matplotlib.pyplot", "matplotlib.patches") if name not in sys.modules]
    if "matplotlib.pyplot" not in names:
        return False
    package = importlib.util.find_spec("matplotlib")  # a top-level module's spec: nothing is imported
    if package is None or not package.submodule_search_locations:
        return False
    specs = [package if name == "matplotlib" else
             importlib.machinery.PathFinder.find_spec(name, package.submodule_search_locations) for name in names]
    if any(spec is None or not hasattr(spec.loader, "exec_module") for spec in specs):
        return False
    modules = [_install(spec) for spec in specs]
    for module in modules:  # `from matplotlib import patches` finds it without running matplotlib's code
        if module.__name__ != "matplotlib":
            vars(sys.modules["matplotlib"])[module.__name__.rpartition(".")[2]] = module
    return True
