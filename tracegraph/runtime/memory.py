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
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return peak_rss_bytes()


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_bytes(device: torch.device) -> int:
    """Peak tensor memory on CUDA; peak process RSS on CPU (it cannot be reset there)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return peak_rss_bytes()


def cleanup(device: torch.device) -> None:
    """Release cached allocator blocks. Only CUDA has a cache to empty; gc helps both a little."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"
