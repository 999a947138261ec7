"""The test suite's size and time as a new contributor meets it: the README's ./run test in a fresh clone.

    python benchmarks/record.py suite_time --load "..." -- python benchmarks/suite_time.py

Clones this checkout's HEAD into an empty temporary folder (so nothing built here is reused but
pip's download cache), runs ``./run test`` there exactly as the README gives it, and prints one
JSON line: the counts pytest reports, pytest's own seconds and the wall time including the set-up
(``.venv`` and the install). A suite that fails prints nothing and exits with its status, so
``record.py`` files nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = ("passed", "failed", "skipped", "errors", "error", "xfailed", "xpassed", "warnings", "warning")
PLURAL = {"error": "errors", "warning": "warnings"}  # pytest says "1 error", "2 errors"


def summary(output: str) -> dict:
    """pytest's last summary line (``= 5 passed, 2 skipped in 3.21s =``) as counts and seconds."""
    lines = [ln for ln in output.splitlines() if re.search(r"\bin [\d.]+s\b", ln) and "=" in ln]
    if not lines:
        raise ValueError("no pytest summary line in the output")
    last = lines[-1]
    found = re.findall(r"(\d+) (" + "|".join(OUTCOMES) + r")\b", last)
    counts = {PLURAL.get(word, word): int(n) for n, word in found}
    seconds = float(re.search(r"\bin ([\d.]+)s\b", last).group(1))
    return {"counts": counts, "pytest_seconds": seconds}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "tracegraph"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
        ).stdout.strip()
        start = time.perf_counter()
        proc = subprocess.run(["./run", "test"], cwd=clone, capture_output=True, text=True)
        wall = time.perf_counter() - start
    sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
    if proc.returncode != 0:
        return proc.returncode
    found = summary(proc.stdout)
    counts = found["counts"]
    print(
        json.dumps(
            {
                "benchmark": "suite_time",
                "setting": "fresh clone, ./run test",
                "clone_of": commit,
                "tests": counts.get("passed", 0) + counts.get("skipped", 0),
                **counts,
                "pytest_seconds": found["pytest_seconds"],
                "wall_seconds": round(wall, 1),
                "unit": "s",
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
