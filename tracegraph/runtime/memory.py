"""Peak-memory probes (CUDA allocator or process RSS) and the cleanup policy."""

from __future__ import annotations

import gc
import os
import resource
import sys

import torch


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru if sys.platform == "darwin" else ru * 1024


def current_rss_bytes() -> int:
    """The process's resident memory now, in bytes (the peak where ``/proc`` is unavailable)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return peak_rss_bytes()


def reset_peak(device: torch.device) -> None:
    """Start a new peak-memory measurement on ``device`` (only CUDA can reset it).

    Args:
        device: The device to reset.
    """
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_bytes(device: torch.device) -> int:
    """Peak memory in bytes: tensor memory on CUDA, process resident memory on CPU.

    On CPU the peak cannot be reset, so it covers the whole process lifetime.

    Args:
        device: The device to measure.

    Returns:
        The peak in bytes.
    """
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return peak_rss_bytes()


def cleanup(device: torch.device) -> None:
    """Release cached allocator blocks (only CUDA has a cache to empty) after a garbage collection.

    Args:
        device: The device whose cache to empty.
    """
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def format_bytes(n: float) -> str:
    """Format a byte count for people, e.g. ``"1.5 GiB"``.

    Args:
        n: Number of bytes.

    Returns:
        The count in B, KiB, MiB, GiB or TiB.
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"
