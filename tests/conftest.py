import contextlib
import functools
import gc
import logging
import os
from pathlib import Path

import pytest
import typer.testing
from hypothesis import HealthCheck, settings

# The suite also runs beside other work (a shared CI machine, a training in the background), where
# generating examples can be slow for reasons that say nothing about the code under test. A test
# that suppresses another health check names this one too.
settings.register_profile("suite", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

os.environ.setdefault("TRACEGRAPH_PROGRESS", "0")
# Device policy for the suite: "auto" means CPU, so tests are exact and reproducible on any machine
# and parallel workers never pile onto one GPU. Tests marked `gpu` pick CUDA explicitly; they are
# skipped where there is none (CI) and run on the GPU machine.
os.environ.setdefault("TRACEGRAPH_DEVICE", "cpu")
# One torch thread per test process (and the processes tests start), unless the caller says otherwise:
# `./run test` runs two workers on two cores and the suite's tensors are tiny, so a second thread per
# worker only contends (a local-retrain test: 21 s with two threads, 2.5 s with one, on a busy 2-core box).
# Set before torch is first imported, so it takes effect.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """Collect without the garbage collector, then freeze what collection leaves.

    Once torch and torch_geometric are imported a full collection walks millions of objects, and
    importing the test files (pytest rewrites their asserts into many short-lived AST nodes)
    triggers one after another: about a third of collection's time. Those imports make no
    garbage cycles worth finding, so the collector waits until the end, and everything alive
    then (modules, fixtures' functions) is frozen: the tests' own collections walk only what the
    tests make, which is what they free. They run every 20,000 allocations rather than 700: half
    the time the suite spent collecting, and cycles are freed a little later.
    """
    gc.disable()
    try:
        return (yield)
    finally:
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 10, 10)
        gc.enable()


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
UMLS = PACKAGE / "kg" / "data" / "datasets" / "umls"
NEURONS = PACKAGE / "trees" / "datasets" / "neurons"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own user cache dir: nothing lands in ~/.cache, no test sees another's entries."""
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


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


# typer's test runner builds the click command from every command's signature on each invoke
# (about 50 ms, longer than most commands the tests run, and several hundred invokes in all); the
# app does not change between tests, so each process builds it once. A test that changes what the
# command is built from (the method registry the help lists) asks for `cli_rebuilt`.
typer.testing._get_command = functools.cache(typer.testing._get_command)


@pytest.fixture
def cli_rebuilt():
    """The CLI's command built anew for this test, and again for the tests after it."""
    typer.testing._get_command.cache_clear()
    yield
    typer.testing._get_command.cache_clear()


def run_cli(args, **kw):
    """Invoke the CLI in-process; returns the click Result (exit_code, stdout, stderr)."""
    from tracegraph.cli import app

    return typer.testing.CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False, **kw)


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def benchmark_mirror() -> Path:
    """The local mirror of the published benchmark archives (FB15k-237, WN18RR): $TRACEGRAPH_BENCHMARK_MIRROR,
    else a ``shared/data/benchmarks`` folder beside the checkout or one of its parents. Tests that need
    it skip on a fresh clone, where it does not exist."""
    env = os.environ.get("TRACEGRAPH_BENCHMARK_MIRROR")
    candidates = [Path(env)] if env else [p / "shared" / "data" / "benchmarks" for p in REPO.parents[:3]]
    for c in candidates:
        if (c / "FB15k-237.tar.gz").is_file():
            return c
    pytest.skip(
        "no local benchmark mirror (set TRACEGRAPH_BENCHMARK_MIRROR to a folder holding FB15k-237.tar.gz, "
        "WN18RR.tar.gz); the tiny self-made archive tests cover the same code"
    )


def snapshot(*roots: Path) -> dict:
    """Every file and folder under ``roots``, with size and content hash: what a failing command must not change."""
    import hashlib

    out = {}
    for root in roots:
        root = Path(root)
        if not root.exists():
            out[str(root)] = None
            continue
        for p in sorted([root, *root.rglob("*")]):
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def run_cli_error(args, *watch: Path, contains: str = "", **kw):
    """Run a command that must fail the user-facing way: exit code 2, one ``error: …`` line on stderr,
    and every path in ``watch`` (output dirs, input dirs, the cache) exactly as it was before."""
    before = snapshot(*watch)
    res = run_cli(args, **kw)
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert contains in lines[0], lines[0]
    assert snapshot(*watch) == before, "a failing command changed its output locations"
    return res


@contextlib.contextmanager
def log_lines(logger: logging.Logger | None = None, level: int = logging.INFO):
    """The messages ``logger`` (tracegraph's, by default) emits inside the block at ``level`` and above,
    as a list filled while the block runs; the logger's level is restored afterwards."""
    logger = logger or logging.getLogger("tracegraph")
    lines: list[str] = []
    handler = logging.Handler(level)
    handler.emit = lambda record: lines.append(record.getMessage())
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
