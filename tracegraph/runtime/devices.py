"""Several devices of one machine without ``torchrun``: ``--devices cuda:0,cuda:1``.

Each device works on its own balanced shard in its own thread; CUDA kernels release the GIL, so
the devices work concurrently.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import torch

from tracegraph.errors import TracegraphError
from tracegraph.runtime.distributed import shard_range


def parse_devices(spec: str | Sequence[str] | None) -> list[torch.device]:
    """Parse a device list such as ``"cuda:0,cuda:1"``, checking that each device exists.

    ``cpu`` may repeat (``cpu,cpu`` runs the multi-device code path on a machine without GPUs).

    Args:
        spec: Comma-separated names or a list of names; None for no list.

    Returns:
        The devices in the order given (empty for None).

    Raises:
        TracegraphError: If the list is empty, a device is unknown or missing, or a CUDA device repeats.
    """
    from tracegraph.runtime.precision import resolve_device

    if spec is None:
        return []
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not names:
        raise TracegraphError("--devices: give at least one device, e.g. cuda:0,cuda:1")
    devices = [resolve_device(n) for n in names]
    for d in devices:
        if d.type == "cuda" and d.index is not None and d.index >= torch.cuda.device_count():
            raise TracegraphError(f"--devices: {d} does not exist ({torch.cuda.device_count()} CUDA devices)")
    cuda = [d for d in devices if d.type == "cuda"]
    if len(set(cuda)) != len(cuda):
        raise TracegraphError("--devices: a CUDA device is listed twice")
    return devices


def run_on_devices(devices: Sequence[torch.device], n: int, fn: Callable[[torch.device, int, int], Any]) -> list:
    """Run ``fn(device, lo, hi)`` on each device, in its own thread, over balanced shards of ``range(n)``.

    CUDA kernels release the GIL, so the devices work concurrently.

    Args:
        devices: The devices, one shard each.
        n: Number of items to split.
        fn: Called as ``fn(device, lo, hi)`` for the shard ``[lo, hi)``.

    Returns:
        The results in device order.

    Raises:
        BaseException: The first exception raised by any shard, re-raised in the calling thread.
    """
    results: list = [None] * len(devices)
    errors: list = [None] * len(devices)

    def work(i: int, device: torch.device) -> None:
        lo, hi = shard_range(n, i, len(devices))
        try:
            if device.type == "cuda":
                torch.cuda.set_device(device)
            results[i] = fn(device, lo, hi)
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            errors[i] = e

    if len(devices) == 1:
        work(0, devices[0])
    else:
        threads = [threading.Thread(target=work, args=(i, d), name=f"tracegraph-{d}") for i, d in enumerate(devices)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for e in errors:
        if e is not None:
            raise e
    return results
