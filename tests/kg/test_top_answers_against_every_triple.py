"""The best answers of link-prediction queries (`predict`), against a brute force: every candidate
triple scored one at a time with ``score_triples``, sorted by hand. Tails of (h, r, ?); heads of
(?, r, t) through r⁻¹ for a reciprocal model, by scoring every (e, r, t) without; known answers left
out; any batch size; k clipped to the number of entities."""

import numpy as np
import pytest
import torch

from tracegraph.kg.data.triples import KnownTails
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.queries import _every_head, top_answers

N, R = 7, 2


def _model(reciprocal: bool):
    torch.manual_seed(3)
    model = ConvE(
        ConvEConfig(
            num_entities=N,
            num_relations=R,
            embedding_dim=12,
            embedding_height=3,
            embedding_width=4,
            output_channels=2,
            reciprocal=reciprocal,
        )
    )
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)  # every parameter random: no tied scores, a bias that matters
    return model.eval()


@torch.no_grad()
def _brute(model, anchor: int, rel: int, side: str, leave_out=()):
    """Score of every candidate answer, one triple at a time."""
    scores = {}
    for e in range(N):
        if e in leave_out:
            continue
        if side == "tail":
            h, r, t = anchor, rel, e
        elif model.config.reciprocal:  # (?, r, t) asked as (t, r⁻¹, ?)
            h, r, t = anchor, rel + R, e
        else:
            h, r, t = e, rel, anchor
        scores[e] = float(model.score_triples(torch.tensor([h]), torch.tensor([r]), torch.tensor([t]))[0])
    return sorted(scores.items(), key=lambda kv: -kv[1])


QUERIES = (np.array([0, 3, 6, 2, 5]), np.array([1, 0, 1, 1, 0]))


@pytest.mark.parametrize("reciprocal", [True, False])
@pytest.mark.parametrize("side", ["tail", "head"])
@pytest.mark.parametrize("batch_size", [2, 256])
def test_top_answers_are_the_best_scored_candidates(reciprocal, side, batch_size):
    model = _model(reciprocal)
    anchors, rels = QUERIES
    ids, scores = top_answers(model, anchors, rels, side, 3, batch_size=batch_size)
    assert ids.shape == scores.shape == (5, 3) and ids.dtype == np.int64
    for q, (a, r) in enumerate(zip(anchors, rels)):
        want = _brute(model, int(a), int(r), side)[:3]
        assert ids[q].tolist() == [e for e, _ in want]
        np.testing.assert_allclose(scores[q], [s for _, s in want], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reciprocal", [True, False])
@pytest.mark.parametrize("side", ["tail", "head"])
def test_known_answers_are_left_out(reciprocal, side):
    model = _model(reciprocal)
    anchors, rels = QUERIES
    # what each query already knows, written as the index the caller builds: keyed by (anchor, row)
    known_of = {0: {1, 4}, 2: {0}, 4: {2, 3, 5}}
    row_shift = R if side == "head" and reciprocal else 0
    triples = [(int(anchors[q]), int(rels[q]) + row_shift, e) for q, es in known_of.items() for e in es]
    known = KnownTails([np.array(triples)], 2 * R)
    ids, _ = top_answers(model, anchors, rels, side, 4, known=known, batch_size=2)
    for q, (a, r) in enumerate(zip(anchors, rels)):
        want = _brute(model, int(a), int(r), side, leave_out=known_of.get(q, ()))[:4]
        assert ids[q].tolist() == [e for e, _ in want]


def test_k_above_the_entity_count_gives_every_entity_once():
    model = _model(True)
    ids, scores = top_answers(model, np.array([1]), np.array([0]), "tail", 50)
    assert ids.shape == (1, N) and sorted(ids[0].tolist()) == list(range(N))
    assert all(scores[0][i] >= scores[0][i + 1] for i in range(N - 1))


def test_no_queries_give_empty_arrays_of_width_k():
    ids, scores = top_answers(_model(True), np.array([], np.int64), np.array([], np.int64), "tail", 3)
    assert ids.shape == scores.shape == (0, 3) and ids.dtype == np.int64 and scores.dtype == np.float64


@pytest.mark.parametrize("chunk", [1, 3, 7, 4096])
def test_every_head_scores_every_entity_in_any_chunk(chunk):
    model = _model(False)
    tails, rels = torch.tensor([2, 6]), torch.tensor([1, 0])
    with torch.no_grad():
        got = _every_head(model, tails, rels, chunk=chunk)
    for j in range(2):
        want = dict(_brute(model, int(tails[j]), int(rels[j]), "head"))
        np.testing.assert_allclose(got[j].numpy(), [want[e] for e in range(N)], rtol=1e-5, atol=1e-6)
