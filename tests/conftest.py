import os
from pathlib import Path

import pytest

os.environ.setdefault("TRACEGRAPH_PROGRESS", "0")
# Device policy for the suite: "auto" means CPU, so tests are exact and reproducible on any machine
# and parallel workers never pile onto one GPU. Tests marked `gpu` pick CUDA explicitly; they are
# skipped where there is none (CI) and run on the GPU machine.
os.environ.setdefault("TRACEGRAPH_DEVICE", "cpu")


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run the suite on a GPU machine for these)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

# Bundled with the package, so a fresh clone with nothing beside it runs the whole suite.
PACKAGE = Path(__file__).resolve().parents[1] / "tracegraph"
UMLS = PACKAGE / "kg" / "datasets" / "umls"
NEURONS = PACKAGE / "trees" / "datasets" / "neurons"


@pytest.fixture(scope="session")
def umls_dir() -> Path:
    if not (UMLS / "train.txt").exists():
        pytest.fail(f"bundled UMLS data missing at {UMLS}: is the checkout complete?")
    return UMLS


@pytest.fixture(scope="session")
def neurons_dir() -> Path:
    if not NEURONS.exists():
        pytest.fail(f"bundled neuron data missing at {NEURONS}: is the checkout complete?")
    return NEURONS


def run_cli(args, **kw):
    """Invoke the CLI in-process; returns the click Result (exit_code, stdout, stderr)."""
    from typer.testing import CliRunner

    from tracegraph.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False, **kw)
