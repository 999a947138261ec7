"""Fixtures shared by the knowledge-graph tests."""

import logging
from pathlib import Path

import pytest

import tracegraph
from tests.conftest import UMLS
from tests.kg.umls_run import TINY_MODEL

from tests.kg.tiny_graph import TEST, TRIPLES, VALID, write_triples


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A folder with the 10-triple graph's train.txt, valid.txt and test.txt (tests/kg/tiny_graph.py)."""
    d = tmp_path_factory.mktemp("kg10")
    write_triples(d / "train.txt", TRIPLES)
    write_triples(d / "valid.txt", VALID)
    write_triples(d / "test.txt", TEST)
    return d


@pytest.fixture
def logs(caplog):
    """The messages of the ``tracegraph`` logger at INFO, as a list that fills while the test runs."""
    logger = logging.getLogger("tracegraph")
    logger.addHandler(caplog.handler)
    caplog.handler.setLevel(logging.INFO)
    old = logger.level
    logger.setLevel(logging.INFO)
    yield lambda: [r.getMessage() for r in caplog.records]
    logger.removeHandler(caplog.handler)
    logger.setLevel(old)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A 2-epoch UMLS run of a small ConvE (tracegraph.train), with a checkpoint per epoch."""
    out = tmp_path_factory.mktemp("api") / "run"
    run = tracegraph.train(
        {"train": str(UMLS / "train.txt"), "valid": str(UMLS / "valid.txt")},
        test=UMLS / "test.txt",
        output_dir=out,
        epochs=2,
        checkpoint_every=1,
        device="cpu",
        model=TINY_MODEL,
    )
    assert isinstance(run, tracegraph.Run) and run.path == out
    return out
