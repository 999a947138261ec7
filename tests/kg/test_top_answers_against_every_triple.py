"""The best answers of link-prediction queries (`predict`), against a brute force: every candidate
triple scored one at a time with ``score_triples``, sorted by hand. Tails of (h, r, ?); heads of
(?, r, t) through r⁻¹ for a reciprocal model, by scoring every (e, r, t) without; known answers left
out; any batch size (256 by default, each query scored once); k clipped to the number of entities;
ids of any integer type; scored on ``device`` whatever the default device."""

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


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, "list"])
def test_ids_of_any_integer_type_give_the_same_answers(dtype):
    """Ids stored compactly (uint8, int16, ...) or as a plain list ask the same queries as int64."""
    model = _model(True)
    anchors, rels = QUERIES
    known = KnownTails([np.array([[0, 1 + R, 3], [6, 1 + R, 2]])], 2 * R)
    cast = (lambda a: a.tolist()) if dtype == "list" else (lambda a: a.astype(dtype))
    ids, _ = top_answers(model, cast(anchors), cast(rels), "head", 3, known=known)
    for q, (a, r) in enumerate(zip(anchors, rels)):
        drop = {3} if (a, r) == (0, 1) else {2} if (a, r) == (6, 1) else set()
        assert ids[q].tolist() == [e for e, _ in _brute(model, int(a), int(r), "head", leave_out=drop)[:3]]


class _Recording:
    """Passes `score_all` and `score_triples` through and notes the batch sizes and the devices of
    the ids it is handed."""

    def __init__(self, model):
        self.model, self.config, self.batches, self.devices = model, model.config, [], set()

    def score_all(self, anchors, relations):
        self.batches.append(len(anchors))
        self.devices |= {anchors.device, relations.device}
        return self.model.score_all(anchors, relations)

    def score_triples(self, heads, relations, tails):
        self.devices |= {heads.device, relations.device, tails.device}
        return self.model.score_triples(heads, relations, tails)


def test_default_batch_is_256_queries_each_scored_once():
    spy = _Recording(_model(True))
    anchors, rels = np.tile(QUERIES[0], 60), np.tile(QUERIES[1], 60)  # 300 queries
    ids, _ = top_answers(spy, anchors, rels, "tail", 2)
    assert spy.batches == [256, 44]
    for q in (0, 1, 2, 3, 4, 299):
        assert ids[q].tolist() == [e for e, _ in _brute(spy.model, int(anchors[q]), int(rels[q]), "tail")[:2]]


@pytest.mark.parametrize("reciprocal", [True, False])
def test_scores_on_device_whatever_the_default_device(reciprocal):
    """A caller who set another default device (torch.set_default_device) still gets answers scored on
    ``device``; the meta device stands in for that other device on a machine without a GPU."""
    model = _Recording(_model(reciprocal))
    anchors, rels = QUERIES
    known_of = {1: {4}, 3: {0, 6}}
    row_shift = R if reciprocal else 0
    triples = [(int(anchors[q]), int(rels[q]) + row_shift, e) for q, es in known_of.items() for e in es]
    known = KnownTails([np.array(triples)], 2 * R)
    with torch.device("meta"):
        ids, scores = top_answers(model, anchors, rels, "head", 3, known=known, device="cpu")
    assert model.devices == {torch.device("cpu")}  # the query ids reached the model on `device`
    assert isinstance(scores, np.ndarray) and np.isfinite(scores).all()
    for q, (a, r) in enumerate(zip(anchors, rels)):
        want = _brute(model.model, int(a), int(r), "head", leave_out=known_of.get(q, ()))[:3]
        assert ids[q].tolist() == [e for e, _ in want]
