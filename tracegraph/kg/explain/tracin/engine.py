"""The influence driver: Σ_k η_k ⟨∇ℓ(θ_k, train), ∇ℓ(θ_k, test)⟩ for all test triples at once.

Each checkpoint is loaded once; the test factors (or gradients) are computed once per checkpoint;
the training triples are streamed in batches, one pass per checkpoint, and every batch is scored
against every test triple. The [T, M] result lives in RAM when it fits the budget, else in a
memory-mapped file on disk.

On a GPU the pass is kept free of host syncs: the influence is accumulated in a device buffer
(float64) when it fits, copied back once at the end; the next checkpoint is read from disk while
the current one is scored; training batches are as large as the N-wide score gradients allow.
Every product runs with TF32 off: the result is exact fp32 arithmetic, as the tests claim.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.model_io import build_model
from tracegraph.kg.explain.tracin.factors import LOSSES, compute_factors, influence, select_layers
from tracegraph.kg.explain.tracin.reference import _directions, autograd_gradients, vmap_gradients
from tracegraph.runtime.checkpoints import load_checkpoint
from tracegraph.runtime.precision import exact_fp32, resolve_precision

ENGINES = ("exact", "autograd", "vmap")
# the TracIn loss convention everywhere (explain, fidelity, necessity, the Python API): ℓ = −s, what
# removing a training triple changes in a KvsAll retrain (docs/explaining.md, "How to choose")
DEFAULT_LOSS = "logit"


@dataclass
class InfluenceOptions:
    """How TracIn is computed: the engine, the loss convention, the layers counted, batching and memory.

    Attributes:
        engine: ``exact`` (per-layer factors, no per-example gradient built), ``autograd`` or ``vmap``
            (flattened per-triple gradients: the slow references).
        loss: the loss convention ℓ: ``logit`` (−s, the default), ``score`` (softplus(−s)) or
            ``train-loss`` (the 1-N training loss).
        layers: ``all``, ``last:N``, or parameter names (a list or a comma-separated string).
        label_smoothing: the label smoothing of ``train-loss`` (unused by the other losses).
        batch_size: training triples per step; 0: automatic (:func:`auto_batch_size`).
        test_batch_size: test triples per factor batch (``exact`` engine).
        precision: ``fp32`` (exact) or a lower precision the device supports.
        memory_budget_bytes: the largest ``[T, M]`` float64 result kept in RAM; above it the
            result is a float32 memory-mapped file.
        device_budget_bytes: on a GPU, the largest ``[T, M]`` float64 sum kept on the device.
        scratch_dir: where the memory-mapped result is created; None: the system's temporary folder.
    """

    engine: str = "exact"
    loss: str = DEFAULT_LOSS
    layers: str | list[str] = "all"
    label_smoothing: float = 0.1
    batch_size: int = 0  # training triples per step; 0 = auto (512 on CPU, up to 4096 on a GPU)
    test_batch_size: int = 256
    precision: str = "fp32"
    memory_budget_bytes: int = 2 * 2**30  # above this the [T, M] matrix goes to a memmap
    device_budget_bytes: int = 4 * 2**30  # GPU: accumulate [T, M] on the device up to this size
    scratch_dir: str | None = None


@dataclass
class CheckpointInfo:
    """One checkpoint summed over: its file, its epoch (None when it records none), its learning rate η_k."""

    path: str
    epoch: int | None
    lr: float


@dataclass
class InfluenceResult:
    """What :func:`compute_influence` returns.

    Attributes:
        scores: ``[T, M]`` Σ_k η_k ⟨∇ℓ_k(train), ∇ℓ_k(test)⟩, one row per test triple: float64 in
            memory, or a float32 ``np.memmap`` when larger than the memory budget.
        train_self: ``[M]`` float64 Σ_k η_k ‖∇ℓ_k(train)‖² of each training triple.
        test_self: ``[T]`` float64 Σ_k η_k ‖∇ℓ_k(test)‖² of each test triple.
        checkpoints: the checkpoints summed, in order, with their learning rates.
        layers: the parameter names whose gradients counted.
    """

    scores: np.ndarray  # [T, M] Σ_k η_k ⟨g_train, g_test⟩ (may be a np.memmap)
    train_self: np.ndarray  # [M]
    test_self: np.ndarray  # [T]
    checkpoints: list[CheckpointInfo] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)


def check_influence_options(opts: InfluenceOptions) -> None:
    """Raise TracegraphError naming the parameter when ``engine`` or ``loss`` is not one of the known names.

    Args:
        opts: the options checked (only ``engine`` and ``loss``).

    Raises:
        TracegraphError: ``engine`` not in :data:`ENGINES` or ``loss`` not one of the loss conventions.
    """
    if opts.engine not in ENGINES:
        raise TracegraphError(f"engine must be one of {', '.join(ENGINES)}, not {opts.engine!r}")
    if opts.loss not in LOSSES:
        raise TracegraphError(f"loss must be one of {', '.join(LOSSES)}, not {opts.loss!r}")


def _alloc(T: int, M: int, opts: InfluenceOptions) -> np.ndarray:
    if T * M * 8 <= opts.memory_budget_bytes:
        return np.zeros((T, M), np.float64)
    # does not fit: stream to disk (float32), deleted when the array is garbage-collected
    tmp = tempfile.NamedTemporaryFile(prefix="tracin_", suffix=".f32", dir=opts.scratch_dir, delete=True)
    return np.memmap(tmp, dtype=np.float32, mode="w+", shape=(T, M))


def auto_batch_size(num_entities: int, device: torch.device) -> int:
    """Training triples per step: 512 on a CPU; on a GPU, fewer and larger steps.

    On a GPU launches and syncs are the cost, so the batch is as large as the ``[2·batch, N]``
    float32 score gradients of the 1-N loss allow within about 512 MiB, between 256 and 4096.

    Args:
        num_entities: N, the model's number of entities.
        device: where the influence is computed.

    Returns:
        The batch size.
    """
    if device.type != "cuda":
        return 512
    return int(min(4096, max(256, 2**29 // (8 * max(num_entities, 1)))))


class _Accumulator:
    """Σ_k η_k · block into the [T, M] result, on the device when it fits, else into the host array.

    On the device the sum is copied back once at the end; in the host array each block is copied.
    """

    def __init__(self, out: np.ndarray, device: torch.device, budget: int):
        self.out = out
        T, M = out.shape
        self.buf = (
            torch.zeros(T, M, dtype=torch.float64, device=device)
            if (device.type == "cuda" and T * M * 8 <= budget)
            else None
        )

    def add(self, cols: slice, block: torch.Tensor) -> None:  # block: [T, n]
        if self.buf is not None:
            self.buf[:, cols] += block.double()
        else:
            self.out[:, cols] += block.double().cpu().numpy().astype(self.out.dtype, copy=False)

    def finish(self) -> np.ndarray:
        if self.buf is not None:
            for s in range(0, self.out.shape[0], 4096):  # a memmap is written in slabs
                self.out[s : s + 4096] = self.buf[s : s + 4096].cpu().numpy()
        return self.out


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

    Args:
        checkpoints: the checkpoint files, each recording its learning rate η_k.
        train_ids: ``[M, 3]`` training triples as ids.
        test_ids: ``[T, 3]`` test triples as ids.
        opts: how the influence is computed.
        device: where the gradients are computed.
        progress: a rich progress display to report to; None: silent.
        read: ``read(path, map_location) -> checkpoint dict`` reads each checkpoint; None:
            ``load_checkpoint`` (a :class:`~tracegraph.kg.model.store.RunStore` passes its cached
            ``read_checkpoint``).

    Returns:
        The :class:`InfluenceResult`: ``scores`` ``[T, M]``, both self-influences, the checkpoints, the layers.

    Raises:
        TracegraphError: an unknown engine or loss, a checkpoint without a learning rate, or bad ``layers``.
    """
    check_influence_options(opts)
    with exact_fp32(), ThreadPoolExecutor(1) as reader:
        return _compute(checkpoints, train_ids, test_ids, opts, device, progress, reader, read or load_checkpoint)


def _compute(checkpoints, train_ids, test_ids, opts, device, progress, reader, read) -> InfluenceResult:
    T, M = len(test_ids), len(train_ids)
    scores = _Accumulator(_alloc(T, M, opts), device, opts.device_budget_bytes)
    train_self = torch.zeros(M, dtype=torch.float64, device=device)
    test_self = np.zeros(T, np.float64)
    infos: list[CheckpointInfo] = []
    precision = resolve_precision(opts.precision, device)
    layers: list[str] = []
    test_t = torch.as_tensor(test_ids, device=device)
    train_t = torch.as_tensor(train_ids, device=device)  # one upload; batches are slices
    task = None
    pending = reader.submit(read, checkpoints[0], "cpu") if checkpoints else None
    for k, path in enumerate(checkpoints):
        payload = pending.result()
        if k + 1 < len(checkpoints):  # read the next checkpoint while this one is scored
            pending = reader.submit(read, checkpoints[k + 1], "cpu")
        model = build_model(payload, Path(path)).to(device).eval()
        lr = payload.get("lr")
        if lr is None:
            raise TracegraphError(f"{path}: checkpoint records no learning rate; TracIn needs η_k")
        lr = float(lr)
        infos.append(CheckpointInfo(str(path), payload.get("epoch"), lr))
        layers = select_layers(model, opts.layers)
        rec = model.config.reciprocal
        bs = opts.batch_size or auto_batch_size(model.config.num_entities, device)
        if progress and task is None:
            task = progress.add_task("influence", total=len(checkpoints) * -(-M // bs), info="")
        with precision.autocast():
            if opts.engine == "exact":
                test_f = [
                    compute_factors(
                        model,
                        *_directions(model, *test_t[s : s + opts.test_batch_size].T),
                        opts.loss,
                        opts.label_smoothing,
                        layers,
                    )
                    for s in range(0, T, opts.test_batch_size)
                ]
                for s, F in zip(range(0, T, opts.test_batch_size), test_f):
                    n = min(opts.test_batch_size, T - s)
                    test_self[s : s + n] += lr * _self_exact(F, n, layers, rec).double().cpu().numpy()
            else:
                test_g = _gradients(model, test_t, opts, layers)
                test_self += lr * (test_g * test_g).sum(1).double().cpu().numpy()
            for s in range(0, M, bs):
                batch = train_t[s : s + bs]
                n = len(batch)
                if opts.engine == "exact":
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
                scores.add(slice(s, s + n), lr * block.t())
                train_self[s : s + n] += lr * tself.double()
                if progress:
                    progress.update(task, advance=1, info=f"checkpoint {k + 1}/{len(checkpoints)}")
        del model
    if progress and task is not None:
        progress.remove_task(task)
    return InfluenceResult(scores.finish(), train_self.cpu().numpy(), test_self, infos, layers)


def _gradients(model, triples: torch.Tensor, opts: InfluenceOptions, layers) -> torch.Tensor:
    if opts.engine == "autograd":
        return autograd_gradients(model, triples, opts.loss, opts.label_smoothing, layers)
    return vmap_gradients(model, triples, opts.loss, opts.label_smoothing, layers, chunk_size=64)
