import os
from pathlib import Path

import pytest

os.environ.setdefault("TRACEGRAPH_PROGRESS", "0")

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
if not SHARED.exists():  # CI clones main with shared/ beside it; allow an override
    SHARED = Path(os.environ.get("TRACEGRAPH_SHARED_DATA", SHARED))
UMLS = SHARED / "umls"
NEURONS = SHARED / "neurons"


@pytest.fixture(scope="session")
def umls_dir() -> Path:
    if not (UMLS / "train.txt").exists():
        pytest.fail(f"UMLS test data not found at {UMLS}; set TRACEGRAPH_SHARED_DATA")
    return UMLS


@pytest.fixture(scope="session")
def neurons_dir() -> Path:
    if not NEURONS.exists():
        pytest.fail(f"neuron test data not found at {NEURONS}; set TRACEGRAPH_SHARED_DATA")
    return NEURONS


def run_cli(args, **kw):
    """Invoke the CLI in-process; returns the click Result (exit_code, stdout, stderr)."""
    from typer.testing import CliRunner

    from tracegraph.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False, **kw)
