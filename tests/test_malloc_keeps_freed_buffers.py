"""runtime/allocator: glibc reuses freed training-sized buffers instead of faulting in fresh pages."""

import json
import os
import platform
import subprocess
import sys

import pytest

from tracegraph.runtime import allocator

# a step's worth of temporaries (five 20 MB buffers at once, touched, then freed), three times;
# what glibc reports (mallinfo2) while they are held and after they are freed, and the page faults
PROBE = """
import ctypes, json, resource, sys
import numpy as np
from tracegraph.runtime.allocator import keep_freed_buffers

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
applied = keep_freed_buffers() if sys.argv[1] == "keep" else False
rounds = []
for _ in range(3):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    held = [np.ones(2_500_000) for _ in range(5)]
    during = libc.mallinfo2()
    del held
    after = libc.mallinfo2()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    rounds.append({"mapped_mb": during.hblkhd / 2**20, "heap_kept_mb": after.arena / 2**20, "faults": faults})
print(json.dumps({"applied": applied, "rounds": rounds}))
"""

MB20 = 2_500_000 * 8 / 2**20

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or platform.libc_ver()[1] < "2.33",
    reason="glibc's malloc (mallinfo2: 2.33 or later)",
)


def _probe(mode: str, **env) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in allocator._USER_SETTINGS}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@glibc
def test_freed_buffers_stay_on_the_heap_for_the_next_step():
    """By default glibc maps the first 20 MB buffers with mmap and later gives freed heap back to
    the OS; with the thresholds none is mapped, the freed 100 MB stay on the heap, and the rounds
    after the first fault in (almost) no page."""
    plain, kept = _probe("plain"), _probe("keep")
    assert plain["applied"] is False and plain["rounds"][0]["mapped_mb"] >= 5 * MB20
    assert kept["applied"] is True
    for r in kept["rounds"]:
        assert r["mapped_mb"] < MB20  # none of the buffers (the interpreter maps a little itself)
        assert r["heap_kept_mb"] >= 5 * MB20
    assert all(r["faults"] < 50 for r in kept["rounds"][1:])
    assert plain["rounds"][2]["faults"] > 10 * max(1, kept["rounds"][2]["faults"])


@glibc
def test_the_users_own_malloc_settings_win():
    """An environment that sets malloc options or preloads an allocator is left as it is."""
    assert _probe("keep", MALLOC_TRIM_THRESHOLD_="0")["applied"] is False
    assert _probe("keep", GLIBC_TUNABLES="glibc.malloc.mmap_threshold=65536")["applied"] is False
    assert _probe("keep", LD_PRELOAD="")["applied"] is True  # set but empty: nothing preloaded
