"""Reproducibility: one seed for Python, NumPy and torch, and RNG state capture for resume."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's random number generators.

    Args:
        seed: The seed (NumPy receives it modulo 2**32).
    """
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def seed_torch(seed: int) -> None:
    """Seed torch's CPU generator, and every GPU's once CUDA is in use: cheap enough for every batch.

    ``torch.manual_seed`` seeds the same generators, and queues the seed for each backend not yet
    started (CUDA, XPU, MTIA) with the caller's formatted stack: 0.15-1.5 ms a call, the deeper the
    stack the more, about a sixth of a small model's training step on a CPU. A run seeds with
    :func:`seed_everything` before it starts CUDA, so the queue is needed there only.

    Args:
        seed: The seed.
    """
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def rng_state() -> dict:
    """All RNG states as tensors/plain types, so a checkpoint stays weights_only-loadable."""
    np_state = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {
        "python": _python_state_to_tensor((version, internal, None)),
        "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64)),
        "numpy_pos": int(np_state[2]),
        # normal draws come in pairs; the second waits here (Python: gauss(), NumPy: legacy normals)
        "numpy_has_gauss": int(np_state[3]),
        "numpy_gauss": float(np_state[4]),
        "torch": torch.get_rng_state(),
    }
    if gauss_next is not None:
        state["python_gauss"] = float(gauss_next)
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore the random number generator states saved by :func:`rng_state`.

    Args:
        state: The saved states; CUDA states are restored only when CUDA is available.
    """
    version, internal, _ = _tensor_to_python_state(state["python"])
    random.setstate((version, internal, state.get("python_gauss")))
    keys = state["numpy_keys"].numpy().astype(np.uint32)
    # states saved without the pending normal draw (older checkpoints) had none recorded
    np.random.set_state(
        (
            "MT19937",
            keys,
            int(state["numpy_pos"]),
            int(state.get("numpy_has_gauss", 0)),
            float(state.get("numpy_gauss", 0.0)),
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _python_state_to_tensor(st) -> torch.Tensor:
    version, internal, gauss = st
    # version 3, 625 ints; the pending gauss() value is stored beside it (rng_state)
    return torch.tensor([version, *internal], dtype=torch.int64)


def _tensor_to_python_state(t: torch.Tensor):
    vals = [int(v) for v in t.tolist()]
    return (vals[0], tuple(vals[1:]), None)
