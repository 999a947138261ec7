"""Fixtures shared by the knowledge-graph tests."""

import json
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


KGX_MODEL = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=2)


@pytest.fixture(scope="module")
def kgx_run(tmp_path_factory):
    """A KGX export imported and trained for one epoch (one checkpoint): relation labels predicate:N,
    names in node_name_dict.txt ("drug i" for CHEBI:i, "disease i" for MONDO:i), treats and affects
    with two direction qualifiers (folder: graph/ the import, run/ the run)."""
    from tracegraph.kg.data.kgx import import_kgx

    d = tmp_path_factory.mktemp("kgx")
    nodes = (
        [{"id": f"CHEBI:{i}", "name": f"drug {i}"} for i in range(5)]
        + [{"id": f"MONDO:{i}", "name": f"disease {i}"} for i in range(5)]
        + [{"id": "X:0", "name": "no edges"}]
    )
    edges = [
        {"subject": f"CHEBI:{i}", "predicate": "biolink:treats", "object": f"MONDO:{(i + j) % 5}"}
        for i in range(5)
        for j in range(2)
    ]
    edges += [
        {
            "subject": f"CHEBI:{i}",
            "predicate": "biolink:affects",
            "object": f"MONDO:{i}",
            "object_direction_qualifier": q,
        }
        for i in range(5)
        for q in ("increased", "decreased")
    ]
    (d / "nodes.jsonl").write_text("".join(json.dumps(n) + "\n" for n in nodes))
    (d / "edges.jsonl").write_text("".join(json.dumps(e) + "\n" for e in edges))
    import_kgx(d / "nodes.jsonl", d / "edges.jsonl", d / "graph")
    tracegraph.train(
        train=d / "graph" / "triples.txt", output_dir=d / "run", epochs=1, batch_size=8, device="cpu", model=KGX_MODEL
    )
    return d
