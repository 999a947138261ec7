"""`tracegraph --version` names the version the package declares in pyproject.toml."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_version_flag_prints_the_pyproject_version_and_exits_0():
    declared = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), flags=re.M).group(1)
    done = subprocess.run(
        [sys.executable, "-m", "tracegraph", "--version"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"tracegraph {declared}\n"


def test_version_flag_is_listed_in_the_help():
    done = subprocess.run(
        [sys.executable, "-m", "tracegraph", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0 and "--version" in done.stdout
