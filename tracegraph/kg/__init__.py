"""Knowledge graphs: data, ConvE, training, evaluation, TracIn, filtering."""


def load_model(model_dir_or_checkpoint, device="cpu"):
    """Load a trained ConvE in eval mode with its id maps (see :mod:`tracegraph.kg.model_io`)."""
    from tracegraph.kg.model_io import load_model as _load

    return _load(model_dir_or_checkpoint, device=device)
