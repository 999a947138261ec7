"""Knowledge graphs, one subpackage per stage.

``data`` (read), ``model`` (ConvE: train, evaluate, predict), ``explain`` (TracIn and other
methods, filtering, faithfulness), ``demo``.

The entry point for Python users is the run object: ``tracegraph.open_run`` / ``tracegraph.train``
(:mod:`tracegraph.kg.api`, :mod:`tracegraph.kg.run`). (``tracegraph.kg.model.train`` is the training module, not a function.)
"""


def load_model(model_dir_or_checkpoint, device="cpu"):
    """Load a trained ConvE in eval mode with its id maps (see :mod:`tracegraph.kg.model.model_io`).

    Args:
        model_dir_or_checkpoint: A run directory (its best, else final, else last checkpoint) or a
            checkpoint file.
        device: Where the model is loaded.

    Returns:
        A :class:`~tracegraph.kg.model.model_io.LoadedModel`.

    Raises:
        DataError: If there is no checkpoint, or it or the id maps are malformed.
    """
    from tracegraph.kg.model.model_io import load_model as _load

    return _load(model_dir_or_checkpoint, device=device)


def open_run(path, device="cpu"):
    """Open a trained run directory as a :class:`tracegraph.kg.run.Run`.

    Args:
        path: A run directory or one of its checkpoint files.
        device: Where the model is scored.

    Returns:
        The run.
    """
    from tracegraph.kg.api import open_run as _open

    return _open(path, device)
