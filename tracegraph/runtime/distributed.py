"""Running on several processes or devices with PyTorch's own machinery.

``torchrun`` + ``torch.distributed`` (NCCL on GPUs, Gloo on CPUs), DistributedDataParallel.

Nothing here knows about graphs. The pieces:

* :func:`init_distributed` — detects ``torchrun`` from its environment (``WORLD_SIZE``, ``RANK``,
  ``LOCAL_RANK``), picks the device (``cuda:LOCAL_RANK`` or CPU) and backend, and initialises the
  default process group with a *timeout* (``TRACEGRAPH_DIST_TIMEOUT`` seconds, default 300), so a
  rank that stops answering makes the others fail instead of waiting forever. When a worker exits
  non-zero, torchrun itself stops the others; :func:`recorded` writes the failing rank's exception
  where torchrun reports it ("Root Cause (first observed failure)").
* :class:`ShardedBatchSampler` — every rank draws the *same* seeded global batch order as a
  single process and keeps its strided share of each global batch, so the union over ranks of
  step i is exactly the single-process batch i (see docs/scaling.md for why not the stock
  ``DistributedSampler`` order).
* sharding (:func:`shard_range`, :func:`batch_aligned_shard`) and object collectives
  (:func:`gather_to_main`, :func:`all_gather`, :func:`broadcast_object`).

Global-batch BatchNorm is in :mod:`tracegraph.runtime.sync_batchnorm`; several devices without
``torchrun`` in :mod:`tracegraph.runtime.devices`.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import logging
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.distributed as dist
from torch import nn

from tracegraph.errors import TracegraphError

TIMEOUT_ENV = "TRACEGRAPH_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 300.0
log = logging.getLogger("tracegraph")


# ---------------------------------------------------------------------------------------------
# process group


@dataclass(frozen=True)
class DistContext:
    """Where this process runs: its rank among the processes, its device and backend.

    Attributes:
        rank: Global rank (0 outside torchrun).
        world_size: Number of processes (1 outside torchrun).
        local_rank: Rank on this machine.
        device: The device this process computes on.
        backend: ``"nccl"`` or ``"gloo"`` under torchrun; None for a single process.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    backend: str | None = None

    @property
    def active(self) -> bool:
        """True under torchrun with more than one process."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the process that writes files and logs."""
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """Whether this process is one of several started by ``torchrun`` (``WORLD_SIZE`` > 1)."""
    return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def env_rank() -> int:
    """This process's rank from the ``RANK`` environment variable (0 outside torchrun)."""
    return int(os.environ.get("RANK", "0")) if launched_by_torchrun() else 0


def is_main_process() -> bool:
    """Rank 0, or not distributed at all (usable before the process group exists)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return env_rank() == 0


def timeout_seconds() -> float:
    """The collective timeout in seconds: ``TRACEGRAPH_DIST_TIMEOUT``, default 300.

    Raises:
        TracegraphError: If the variable is set to something other than a positive number.
    """
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None or raw == "":
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise TracegraphError(f"{TIMEOUT_ENV}={raw!r}: must be a positive number of seconds")
    return value


def init_distributed(device_spec: str | None = "auto") -> DistContext:
    """Set up this process's context, initialising ``torch.distributed`` under torchrun.

    Outside torchrun (or with one process) nothing is initialised and the device is
    ``resolve_device(device_spec)``. Under torchrun the device is ``cuda:LOCAL_RANK`` when the spec
    asks for CUDA (``auto`` on a GPU machine, ``cuda``, ``cuda:N``), else CPU; the backend is NCCL on
    CUDA and Gloo on CPU; collectives time out after :func:`timeout_seconds`. Calling it again is
    harmless.

    Args:
        device_spec: A device name, or ``"auto"``/None for CUDA when available.

    Returns:
        The process's :class:`DistContext`.

    Raises:
        TracegraphError: If the device is unknown or unavailable, or the timeout setting is invalid.
    """
    from tracegraph.runtime.precision import resolve_device

    if not launched_by_torchrun():
        return DistContext(device=resolve_device(device_spec))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    base = resolve_device(device_spec)
    if base.type == "cuda":
        if base.index is not None and base.index != local_rank:
            log.warning(
                f"--device {device_spec} ignored under torchrun: rank {rank} uses cuda:{local_rank} (LOCAL_RANK)"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        timeout = timeout_seconds()
        # NCCL only honours the timeout when it watches its collectives asynchronously
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        dist.init_process_group(
            backend=backend,
            timeout=datetime.timedelta(seconds=timeout),
            device_id=device if device.type == "cuda" else None,
        )
        atexit.register(_destroy)
        _quiet_other_ranks(rank)
        if rank == 0:
            log.info(
                f"torch.distributed: {world} processes, backend {backend}, collective timeout {timeout:g}s "
                f"({TIMEOUT_ENV})"
            )
    return DistContext(rank, world, local_rank, device, dist.get_backend())


def _destroy() -> None:
    if dist.is_available() and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - interpreter shutdown after a failure; nothing to save
            pass


class _OtherRank(logging.Filter):
    """On ranks other than 0: drop INFO and below, prefix the rest with the rank."""

    def __init__(self, rank: int):
        super().__init__()
        self.rank = rank

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return False
        if not getattr(record, "_rank_prefixed", False):
            record.msg = f"[rank {self.rank}] {record.msg}"
            record._rank_prefixed = True
        return True


def _quiet_other_ranks(rank: int) -> None:
    """Logs and progress bars from rank 0 only; other ranks still report warnings and errors."""
    if rank != 0:
        os.environ["TRACEGRAPH_PROGRESS"] = "0"
        log.addFilter(_OtherRank(rank))


def _collective_failure(e: BaseException) -> bool:
    msg = str(e)
    return isinstance(e, dist.DistError) or any(
        k in msg for k in ("Connection closed by peer", "Timed out", "timed out", "NCCL", "gloo", "c10d")
    )


def recorded(fn: Callable) -> Callable:
    """Wrap an entry point so that a failing rank's exception is reported under torchrun.

    torchrun prints the recorded exception as the root cause; a collective that failed because a
    peer vanished or timed out is also explained in the log. Outside torchrun ``fn`` runs unchanged.

    Args:
        fn: The entry point to wrap.

    Returns:
        The wrapped function.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not launched_by_torchrun():
            return fn(*args, **kwargs)
        from torch.distributed.elastic.multiprocessing.errors import record

        try:
            return record(fn)(*args, **kwargs)
        except Exception as e:
            if not _collective_failure(e):
                raise
            log.error(
                f"rank {env_rank()}: a collective failed ({type(e).__name__}: {str(e).splitlines()[0][:300]}). "
                f"Another rank probably died or stopped answering (timeout {timeout_seconds():g}s, "
                f"{TIMEOUT_ENV}); torchrun reports the first failure."
            )
            raise

    return wrapper


# ---------------------------------------------------------------------------------------------
# collectives (no-ops on one process)


def barrier() -> None:
    """Wait until every rank gets here (nothing to wait for with one process)."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over all ranks, in place.

    Args:
        t: This rank's tensor; it is overwritten with the sum.

    Returns:
        ``t``, now holding the sum over ranks.
    """
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_gather(obj: Any) -> list:
    """Collect every rank's ``obj`` on every rank, in rank order (objects are pickled).

    Args:
        obj: This rank's picklable object.

    Returns:
        One object per rank; ``[obj]`` with one process.
    """
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def gather_to_main(obj: Any) -> list | None:
    """Collect every rank's ``obj`` on rank 0, in rank order (objects are pickled).

    Args:
        obj: This rank's picklable object.

    Returns:
        One object per rank on rank 0 (``[obj]`` with one process); None on the other ranks.
    """
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return [obj]
    out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


def broadcast_object(obj: Any) -> Any:
    """Send rank 0's ``obj`` to every rank.

    Args:
        obj: The object on rank 0; ignored on the other ranks.

    Returns:
        Rank 0's object.
    """
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


@torch.no_grad()
def broadcast_module_state(module: nn.Module) -> None:
    """Copy rank 0's parameters and buffers into every rank's module, in place.

    Args:
        module: The module, with the same structure on every rank.
    """
    if dist.is_initialized() and dist.get_world_size() > 1:
        for t in module.state_dict().values():
            dist.broadcast(t, src=0)


# ---------------------------------------------------------------------------------------------
# sharding


def shard_range(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """The contiguous, balanced slice ``[lo, hi)`` of ``n`` items that ``rank`` processes.

    Shard sizes differ by at most one.

    Args:
        n: Number of items.
        rank: This shard's index, ``0 <= rank < world_size``.
        world_size: Number of shards.

    Returns:
        ``(lo, hi)``.
    """
    return n * rank // world_size, n * (rank + 1) // world_size


def batch_aligned_shard(n: int, batch: int, rank: int, world_size: int) -> tuple[int, int]:
    """The contiguous slice ``[lo, hi)`` of ``n`` items that ``rank`` processes, made of whole batches.

    Every rank processes exactly the batches a single process would, so results per item are
    bitwise identical to a single-process run.

    Args:
        n: Number of items.
        batch: Batch size; the batches are ``[0, batch)``, ``[batch, 2 * batch)``, ...
        rank: This shard's index, ``0 <= rank < world_size``.
        world_size: Number of shards.

    Returns:
        ``(lo, hi)``, clipped to ``n``.
    """
    nb = math.ceil(n / batch) if n else 0
    b0, b1 = shard_range(nb, rank, world_size)
    return min(b0 * batch, n), min(b1 * batch, n)


class ShardedBatchSampler(torch.utils.data.Sampler):
    """Rank ``rank``'s share of each *global* batch of ``batch_sampler``: items r, r+N, r+2N, ….

    Every rank iterates the same ``batch_sampler`` (same seeded generator, so the same order; it
    reshuffles every epoch as the generator advances, and the generator is checkpointed), so the
    ranks' shards are disjoint, their union at step i is the single-process batch i, and all
    ranks take the same number of steps. Local sizes differ by at most one.
    """

    def __init__(self, batch_sampler: Sequence, rank: int, world_size: int):
        self.batch_sampler, self.rank, self.world_size = batch_sampler, rank, world_size

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.batch_sampler:
            yield list(batch)[self.rank :: self.world_size]

    def __len__(self) -> int:
        return len(self.batch_sampler)


# ---------------------------------------------------------------------------------------------
# BatchNorm with global batch statistics


def rank_seed(*keys: int) -> int:
    """A seed derived from integers (e.g. seed, epoch, rank).

    Independent streams per rank that do not depend on what ran before, so a resumed run draws the
    same numbers.
    """
    import numpy as np

    return int(np.random.SeedSequence([int(k) % 2**32 for k in keys]).generate_state(1)[0])
