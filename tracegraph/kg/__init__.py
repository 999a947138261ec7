"""Knowledge graphs, one subpackage per stage: ``data`` (read), ``model`` (ConvE: train, evaluate,
predict), ``explain`` (TracIn and other methods, filtering, faithfulness), ``demo``.

The entry point for Python users is the run object: ``tracegraph.open_run`` / ``tracegraph.train``
(:mod:`tracegraph.kg.api`, :mod:`tracegraph.kg.run`). (``tracegraph.kg.model.train`` is the training module, not a function.)
"""


def load_model(model_dir_or_checkpoint, device="cpu"):
    """Load a trained ConvE in eval mode with its id maps (see :mod:`tracegraph.kg.model.model_io`)."""
    from tracegraph.kg.model.model_io import load_model as _load

    return _load(model_dir_or_checkpoint, device=device)


def open_run(path, device="cpu"):
    """Open a trained run directory as a :class:`tracegraph.kg.run.Run`."""
    from tracegraph.kg.api import open_run as _open

    return _open(path, device)

