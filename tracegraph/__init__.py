"""tracegraph: ConvE link prediction with exact TracIn explanations, and GT-SSL on geometric trees.

The Python API is one run object (:mod:`tracegraph.kg.run`)::

    import tracegraph
    run = tracegraph.open_run("runs/umls")            # or tracegraph.train(train=..., output_dir=...)
    run.predict("steroid", "interacts_with", k=10)    # a pandas DataFrame
"""

__version__ = "0.1.0"

# Imported on first use: the CLI starts by importing this package, and torch/pandas are slow to load.
_LAZY = {
    "open_run": "tracegraph.kg.api",
    "train": "tracegraph.kg.api",
    "import_pykeen": "tracegraph.kg.api",
    "import_checkpoint": "tracegraph.kg.api",
    "Run": "tracegraph.kg.run",
    "Evaluation": "tracegraph.kg.run",
    "IdMap": "tracegraph.kg.data.idmap",
    "load_model": "tracegraph.kg",
    "TracIn": "tracegraph.kg.explain.tracin.influence",
    "RunStore": "tracegraph.kg.model.store",
    "errors": "tracegraph.errors",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name])
        return module if module.__name__.endswith("." + name) else getattr(module, name)
    raise AttributeError(f"module 'tracegraph' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LAZY])


__all__ = [
    "open_run",
    "train",
    "import_pykeen",
    "import_checkpoint",
    "Run",
    "Evaluation",
    "IdMap",
    "load_model",
    "TracIn",
    "RunStore",
    "__version__",
]
