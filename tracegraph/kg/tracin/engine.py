"""The influence driver: Σ_k η_k ⟨∇ℓ(θ_k, train), ∇ℓ(θ_k, test)⟩ for all test triples at once.

Each checkpoint is loaded once; the test factors (or gradients) are computed once per checkpoint;
the training triples are streamed in batches, one pass per checkpoint, and every batch is scored
against every test triple. The [T, M] result lives in RAM when it fits the budget, else in a
memory-mapped file on disk.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.model_io import build_model
from tracegraph.kg.tracin.factors import LOSSES, compute_factors, influence, select_layers
from tracegraph.kg.tracin.reference import _directions, autograd_gradients, vmap_gradients
from tracegraph.runtime.checkpoints import load_checkpoint
from tracegraph.runtime.precision import resolve_precision

METHODS = ("exact", "autograd", "vmap")


@dataclass
class InfluenceOptions:
    method: str = "exact"
    loss: str = "train-loss"
    layers: str | list[str] = "all"
    label_smoothing: float = 0.1
    batch_size: int = 512  # training triples per step
    test_batch_size: int = 256
    precision: str = "fp32"
    memory_budget_bytes: int = 2 * 2**30  # above this the [T, M] matrix goes to a memmap
    scratch_dir: str | None = None


@dataclass
class CheckpointInfo:
    path: str
    epoch: int | None
    lr: float


@dataclass
class InfluenceResult:
    scores: np.ndarray  # [T, M] Σ_k η_k ⟨g_train, g_test⟩ (may be a np.memmap)
    train_self: np.ndarray  # [M]
    test_self: np.ndarray  # [T]
    checkpoints: list[CheckpointInfo] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)


def _check(opts: InfluenceOptions):
    if opts.method not in METHODS:
        raise TracegraphError(f"--method must be one of {', '.join(METHODS)}, not {opts.method!r}")
    if opts.loss not in LOSSES:
        raise TracegraphError(f"--loss must be one of {', '.join(LOSSES)}, not {opts.loss!r}")


def _alloc(T: int, M: int, opts: InfluenceOptions) -> np.ndarray:
    if T * M * 8 <= opts.memory_budget_bytes:
        return np.zeros((T, M), np.float64)
    # does not fit: stream to disk (float32), deleted when the array is garbage-collected
    tmp = tempfile.NamedTemporaryFile(prefix="tracin_", suffix=".f32", dir=opts.scratch_dir, delete=True)
    return np.memmap(tmp, dtype=np.float32, mode="w+", shape=(T, M))


def _fold(block: torch.Tensor, n_a: int, n_b: int, reciprocal: bool) -> torch.Tensor:
    """Direction-level [dirs·n_a, dirs·n_b] -> triple-level [n_a, n_b] (sum over directions)."""
    if not reciprocal:
        return block
    return block.view(2, n_a, 2, n_b).sum((0, 2))


def _self_exact(F, n: int, layers, reciprocal: bool) -> torch.Tensor:
    if not reciprocal:
        return influence(F, F, layers, pairwise=False)
    f, i = F[:n], F[n:]
    return influence(f, f, layers, False) + influence(i, i, layers, False) + 2 * influence(f, i, layers, False)


def compute_influence(
    checkpoints: list[Path],
    train_ids: np.ndarray,
    test_ids: np.ndarray,
    opts: InfluenceOptions,
    device: torch.device,
    progress=None,
    read=None,
) -> InfluenceResult:
    """Influence of every training triple on every test triple, summed over checkpoints.

    ``read(path, map_location) -> checkpoint dict`` reads each checkpoint (default
    ``load_checkpoint``; a :class:`~tracegraph.kg.run.Run` passes its cached ``read_checkpoint``)."""
    _check(opts)
    T, M = len(test_ids), len(train_ids)
    scores = _alloc(T, M, opts)
    train_self = np.zeros(M, np.float64)
    test_self = np.zeros(T, np.float64)
    infos: list[CheckpointInfo] = []
    precision = resolve_precision(opts.precision, device)
    n_batches = (M + opts.batch_size - 1) // opts.batch_size
    task = progress.add_task("influence", total=len(checkpoints) * n_batches, info="") if progress else None
    layers: list[str] = []
    test_t = torch.as_tensor(test_ids, device=device)
    for k, path in enumerate(checkpoints):
        payload = (read or load_checkpoint)(path, device)
        model = build_model(payload, Path(path)).to(device).eval()
        lr = payload.get("lr")
        if lr is None:
            raise TracegraphError(f"{path}: checkpoint records no learning rate; TracIn needs η_k")
        lr = float(lr)
        infos.append(CheckpointInfo(str(path), payload.get("epoch"), lr))
        layers = select_layers(model, opts.layers)
        rec = model.config.reciprocal
        with precision.autocast():
            if opts.method == "exact":
                test_f = [compute_factors(model, *_directions(model, *test_t[s:s + opts.test_batch_size].T),
                                          opts.loss, opts.label_smoothing, layers)
                          for s in range(0, T, opts.test_batch_size)]
                for s, F in zip(range(0, T, opts.test_batch_size), test_f):
                    n = min(opts.test_batch_size, T - s)
                    test_self[s:s + n] += lr * _self_exact(F, n, layers, rec).double().cpu().numpy()
            else:
                test_g = _gradients(model, test_t, opts, layers)
                test_self += lr * (test_g * test_g).sum(1).double().cpu().numpy()
            for b, s in enumerate(range(0, M, opts.batch_size)):
                batch = torch.as_tensor(train_ids[s:s + opts.batch_size], device=device)
                n = len(batch)
                if opts.method == "exact":
                    A = compute_factors(model, *_directions(model, *batch.T), opts.loss, opts.label_smoothing, layers)
                    blocks = []
                    for ts, F in zip(range(0, T, opts.test_batch_size), test_f):
                        nt = min(opts.test_batch_size, T - ts)
                        blocks.append(_fold(influence(A, F, layers), n, nt, rec))
                    block = torch.cat(blocks, 1)
                    tself = _self_exact(A, n, layers, rec)
                else:
                    g = _gradients(model, batch, opts, layers)
                    block = g @ test_g.t()
                    tself = (g * g).sum(1)
                scores[:, s:s + n] += lr * block.t().double().cpu().numpy()
                train_self[s:s + n] += lr * tself.double().cpu().numpy()
                if progress:
                    progress.update(task, advance=1, info=f"checkpoint {k + 1}/{len(checkpoints)}")
        del model
    if progress:
        progress.remove_task(task)
    return InfluenceResult(scores, train_self, test_self, infos, layers)


def _gradients(model, triples: torch.Tensor, opts: InfluenceOptions, layers) -> torch.Tensor:
    if opts.method == "autograd":
        return autograd_gradients(model, triples, opts.loss, opts.label_smoothing, layers)
    return vmap_gradients(model, triples, opts.loss, opts.label_smoothing, layers, chunk_size=64)
