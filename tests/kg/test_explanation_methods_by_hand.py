"""The explanation methods' table and keys (kg/explain/methods.py) by hand, on tiny random ConvE models
whose checkpoints are written here (no training).

What it holds, and against what:

* the registry: each method's documented needs and flags (docs/explaining.md, "Methods"), the names
  in order, the refusals word for word, the default method per loss, duplicates dropped in order;
* each method's keys from hand-built inputs: the influence scores, the margin, walk shells (direct
  edge with the two-edge walks for the margin, no walk last), the baselines, local-retrain's none;
* one score per candidate: the single non-zero key itself in float64, otherwise minus the rank
  position with ties broken by ``numpy.random.default_rng(seed).permutation`` (seed = the fact's
  position), against Python's sort on tuples;
* TracIn, cosine and RelatIF of each fact's candidates against a float64 loop over checkpoints written
  here: every gradient by ``torch.autograd`` of the loss written out (−s, softplus(−s) or the 1-N BCE
  with smoothed labels, summed over a reciprocal model's two directions), the learning rate read back
  from each checkpoint;
* the queries, the rival, the filtered rank and both logits against scoring every entity one triple
  at a time, on both sides, with and without a filter;
* ``method_keys_all``: every method's keys for two facts (one on each side), the margin against the
  float64 loop with the brute-force rival, the answers to the fact's own query by a loop (tail and head
  side), degrees counted by a loop, walks by a breadth-first search
  written here, the fact itself never on top; local-retrain wired to its search with the run's
  settings and TracIn as the pre-ranking.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.kg.references import walk_lengths
from tests.kg.tiny_graph import TINY
from tracegraph.errors import TracegraphError
from tracegraph.kg.data.triples import KnownTails, with_reciprocals
from tracegraph.kg.explain import influence_parts as IP
from tracegraph.kg.explain import methods as M
from tracegraph.kg.explain import rivals as RV
from tracegraph.kg.explain.local_retrain import LocalRefit, LocalRetrainOptions
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.model_io import model_payload
from tracegraph.runtime.checkpoints import save_checkpoint

N, R = 7, 2
CPU = torch.device("cpu")
ALL_NAMES = (
    "tracin",
    "tracin-cosine",
    "relatif",
    "tracin-margin",
    "tracin-margin-path",
    "tracin-path",
    "tracin-margin-query",
    "local-retrain",
    "local-newton",
    "degree",
    "path",
    "random",
)


def tiny_model(seed, reciprocal=True, **kw):
    torch.manual_seed(seed)
    m = ConvE(ConvEConfig(num_entities=N, num_relations=R, reciprocal=reciprocal, **{**TINY, **kw}))
    with torch.no_grad():  # spread the scores, so no two entities tie
        m.entity.weight.normal_(0, 1.0)
        m.relation.weight.normal_(0, 1.0)
        m.entity_bias.normal_(0, 0.3)
    return m.eval()


def write_checkpoints(folder, seeds_and_lrs, reciprocal=True):
    paths = []
    for i, (seed, lr) in enumerate(seeds_and_lrs, 1):
        p = folder / f"epoch_{i:04d}.pt"
        save_checkpoint(p, model_payload(tiny_model(seed, reciprocal), i, lr, {}))
        paths.append(p)
    return paths


def loss_of(model, triple, loss, eps):
    """The loss of one triple written out, summed over its directions (and the inverse, if reciprocal)."""
    h, r, t = (int(x) for x in triple)
    dirs = [(h, r, t)] + ([(t, r + R, h)] if model.config.reciprocal else [])
    total = 0
    for a, b, c in dirs:
        if loss == "train-loss":
            s = model.score_all(torch.tensor([a]), torch.tensor([b]))[0]
            y = torch.full((N,), eps / N, dtype=s.dtype)
            y[c] += 1 - eps
            total = total - (y * F.logsigmoid(s) + (1 - y) * F.logsigmoid(-s)).mean()
        else:
            s = model.score_triples(torch.tensor([a]), torch.tensor([b]), torch.tensor([c]))[0]
            total = total + (-s if loss == "logit" else F.softplus(-s))
    return total


def gradients(model, triples, loss="logit", eps=0.1, names=None):
    """[M, P] float64 gradients of every (or the named) parameter, one triple at a time."""
    params = [p for n, p in model.named_parameters() if names is None or n in names]
    rows = []
    for tr in triples:
        g = torch.autograd.grad(loss_of(model, tr, loss, eps), params, allow_unused=True)
        rows.append(torch.cat([(x if x is not None else torch.zeros_like(p)).reshape(-1) for x, p in zip(g, params)]))
    return torch.stack(rows).double().numpy()


def float64_influence(paths, lrs, facts, rows_triples, loss="logit", eps=0.1, names=None):
    """TracIn [T, U], cosine [T, U] and self-influence [U], summed over checkpoints in float64."""
    tracin = np.zeros((len(facts), len(rows_triples)))
    cosine = np.zeros_like(tracin)
    self_inf = np.zeros(len(rows_triples))
    for p, lr in zip(paths, lrs):
        payload = torch.load(p, weights_only=True)
        m = ConvE(ConvEConfig.from_dict(payload["model_config"]))
        m.load_state_dict(payload["model"])
        m = m.double().eval()
        gf, gt = gradients(m, facts, loss, eps, names), gradients(m, rows_triples, loss, eps, names)
        dots = gf @ gt.T
        tracin += lr * dots
        cosine += lr * dots / np.outer(np.linalg.norm(gf, axis=1), np.linalg.norm(gt, axis=1))
        self_inf += lr * (gt**2).sum(1)
    return tracin, cosine, self_inf


def close(got, want, fact=None):
    """``got`` near ``want`` relative to its largest value; where ``fact`` marks the fact itself, -inf."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    if fact is not None:
        assert np.isneginf(got).tolist() == list(fact)
        got, want = got[~fact], want[~fact]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * max(np.abs(want).max(), 1e-12))


# --------------------------------------------------------------------------- the registry


def test_registry_lists_every_method_with_its_documented_needs():
    assert M.METHODS == ALL_NAMES and tuple(M.REGISTRY) == ALL_NAMES
    assert all(M.REGISTRY[n].name == n for n in ALL_NAMES)
    assert M.INFLUENCE_METHODS == ("tracin", "tracin-cosine", "relatif")
    assert M.BASELINE_METHODS == ("degree", "path", "random")
    assert M.MARGIN_METHODS == ("tracin-margin", "tracin-margin-path", "tracin-margin-query")
    flags = {n: (m.needs_influence, m.needs_rival, m.walk_shells, m.in_pass, m.signed) for n, m in M.REGISTRY.items()}
    assert flags == {
        # influence, rival, walk shells (HeadTailWalk column), in explain's pass (torchrun), signed
        "tracin": (True, False, False, True, True),
        "tracin-cosine": (True, False, False, False, True),
        "relatif": (True, False, False, False, True),
        "tracin-margin": (True, True, False, True, True),
        "tracin-margin-path": (True, True, True, True, True),
        "tracin-path": (True, False, False, False, False),
        "tracin-margin-query": (True, True, False, False, False),  # the query's answers first, then the margin
        "local-retrain": (True, False, False, False, True),  # TracIn pre-ranks its search
        "local-newton": (True, False, False, False, True),  # the same search, Newton steps for refits
        "degree": (False, False, False, False, False),
        "path": (False, False, False, False, False),
        "random": (False, False, False, False, False),
    }
    # a bare Method: influence-based, no rival, no shells, outside the pass, signed
    bare = M.Method("x", lambda x, j: [])
    assert (bare.needs_influence, bare.needs_rival, bare.walk_shells, bare.in_pass, bare.signed) == (
        True,
        False,
        False,
        False,
        True,
    )


def test_get_method_and_check_methods_refuse_word_for_word():
    assert M.get_method("relatif") is M.REGISTRY["relatif"]
    with pytest.raises(TracegraphError) as e:
        M.get_method("magic")
    assert str(e.value) == f"method must be one of {', '.join(ALL_NAMES)}, not 'magic'"
    assert M.check_methods(["path", "tracin", "path", "random", "tracin"]) == ["path", "tracin", "random"]
    assert M.check_methods(("degree",)) == ["degree"]
    with pytest.raises(TracegraphError) as e:
        M.check_methods(["tracin", "magic", "exact", "magic"])
    assert str(e.value) == f"--method must be among {', '.join(ALL_NAMES)}, not magic, exact"
    with pytest.raises(TracegraphError) as e:
        M.check_methods([])
    assert str(e.value) == f"--method must be among {', '.join(ALL_NAMES)}, not nothing"


def test_default_method_is_plain_tracin_only_for_the_training_loss():
    assert M.DEFAULT_EXPLAINER == "tracin-margin-path" and M.EARLIER_CONVENTION == ("tracin", "train-loss")
    assert M.default_method("train-loss") == "tracin"
    assert M.default_method("logit") == M.default_method("score") == "tracin-margin-path"
    o = M.MethodOptions()
    assert (o.loss, o.layers, o.label_smoothing) == ("logit", "all", 0.1)
    assert o.local == LocalRetrainOptions() and o.local is not M.MethodOptions().local


def test_influence_parts_of_names_its_three_scores():
    p = IP.InfluenceParts([np.array([1.0])], [np.array([2.0])], [np.array([3.0])])
    assert [float(p.of(m)[0][0]) for m in ("tracin", "tracin-cosine", "relatif")] == [1.0, 2.0, 3.0]
    with pytest.raises(KeyError):
        p.of("tracin-margin")


# --------------------------------------------------------------------------- keys from hand-built inputs


def hand_inputs():
    parts = IP.InfluenceParts(
        tracin=[np.array([0.5, -1.0, 2.0, 0.25, 0.0], np.float32), np.array([1.0])],
        cosine=[np.array([0.1, 0.2, 0.3, 0.4, 0.5]), np.array([2.0])],
        relatif=[np.array([-3.0, 3.0, 1.0, 0.0, 2.0]), np.array([3.0])],
    )
    margins = [np.array([1.0, 4.0, -2.0, 3.0, 0.5]), np.array([-1.0])]
    walks = {0: np.array([1.0, 2.0, np.inf, 3.0, 2.0]), 1: np.array([np.inf])}
    base = {
        0: {
            "degree": [np.array([5.0, 1, 2, 3, 4])],
            "path": [np.array([-1.0, -2, -3, -4, -5])],
            "random": [np.zeros(5)],
        },
        1: {"degree": [np.array([1.0])], "path": [np.array([0.0])], "random": [np.zeros(1)]},
        2: {"random": [np.zeros(4)]},
    }
    answers = {0: np.array([False, True, False, False, True]), 1: np.array([True])}
    return M.MethodInputs(parts, margins, lambda j: walks[j], lambda j: base[j], lambda j: answers[j])


def as_lists(keys):
    return [np.asarray(k, np.float64).tolist() for k in keys]


def test_each_methods_keys_from_hand_built_inputs():
    x = hand_inputs()
    k = {n: as_lists(M.REGISTRY[n].keys(x, 0)) for n in ALL_NAMES}
    assert k["tracin"] == [[0.5, -1.0, 2.0, 0.25, 0.0]]
    assert k["tracin-cosine"] == [[0.1, 0.2, 0.3, 0.4, 0.5]]
    assert k["relatif"] == [[-3.0, 3.0, 1.0, 0.0, 2.0]]
    assert k["tracin-margin"] == [[1.0, 4.0, -2.0, 3.0, 0.5]]
    # margin shells: a direct edge (walk 1) with the two-edge walks, then 3, no walk last (as 1e9)
    assert k["tracin-margin-path"] == [[-2.0, -2.0, -1e9, -3.0, -2.0], [1.0, 4.0, -2.0, 3.0, 0.5]]
    # path shells: every finite length its own shell, no walk after all of them; TracIn in float64
    assert k["tracin-path"] == [[-1.0, -2.0, -1e9, -3.0, -2.0], [0.5, -1.0, 2.0, 0.25, 0.0]]
    assert M.REGISTRY["tracin-path"].keys(x, 0)[1].dtype == np.float64
    # the fact's own query's answers first (as 1.0), the margin orders each group
    assert k["tracin-margin-query"] == [[0.0, 1.0, 0.0, 0.0, 1.0], [1.0, 4.0, -2.0, 3.0, 0.5]]
    assert k["local-retrain"] == []
    assert k["degree"] == [[5.0, 1, 2, 3, 4]] and k["path"] == [[-1.0, -2, -3, -4, -5]] and k["random"] == [[0.0] * 5]
    # the second fact reads its own inputs
    assert as_lists(M.REGISTRY["tracin-margin-path"].keys(x, 1)) == [[-1e9], [-1.0]]
    assert as_lists(M.REGISTRY["relatif"].keys(x, 1)) == [[3.0]]
    assert as_lists(M.REGISTRY["tracin-margin-query"].keys(x, 1)) == [[1.0], [-1.0]]
    assert as_lists(M.REGISTRY["degree"].keys(x, 1)) == [[1.0]]


def test_walk_shells_over_puts_smaller_shells_first_then_the_base_keys():
    x = hand_inputs()
    base = lambda x, j: [x.margins[j] * 2, np.full(len(x.margins[j]), float(j))]
    keys = M.walk_shells_over(base, lambda w: w * 10)(x, 0)
    assert as_lists(keys) == [[-10.0, -20.0, -np.inf, -30.0, -20.0], [2.0, 8.0, -4.0, 6.0, 1.0], [0.0] * 5]
    assert as_lists(M.walk_shells_over(base, lambda w: w)(x, 1)) == [[-np.inf], [-2.0], [1.0]]


def test_key_builders_read_the_facts_own_inputs():
    x = hand_inputs()
    for attr in ("tracin", "cosine", "relatif"):
        for j in (0, 1):
            got = M._influence(attr)(x, j)
            assert len(got) == 1 and got[0] is getattr(x.parts, attr)[j]
    assert M._baseline("path")(x, 0) is x.baselines(0)["path"] and M._baseline("degree")(x, 1) == [np.array([1.0])]


def test_order_ranks_the_margin_inside_walk_shells_as_documented():
    x = hand_inputs()
    s = M.REGISTRY["tracin-margin-path"].order(x, 0)
    # shell 2: candidates 0 (margin 1), 1 (4), 4 (0.5); shell 3: candidate 3; no walk: candidate 2
    assert np.argsort(-s, kind="stable").tolist() == [1, 0, 4, 3, 2]
    assert sorted(s.tolist()) == [-5.0, -4.0, -3.0, -2.0, -1.0]
    s = M.REGISTRY["tracin-path"].order(x, 0)
    # shells 1, 2, 2, 3, none; TracIn orders the two-edge shell (candidate 1: -1.0, candidate 4: 0.0)
    assert np.argsort(-s, kind="stable").tolist() == [0, 4, 1, 3, 2]
    s = M.REGISTRY["relatif"].order(x, 0)
    assert s.dtype == np.float64 and s.tolist() == [-3.0, 3.0, 1.0, 0.0, 2.0]  # the score itself


def test_single_score_is_the_one_key_or_minus_the_rank_with_seeded_ties():
    s = M.single_score([np.array([3, -1, 0, 2], np.int32)])
    assert s.dtype == np.float64 and s.tolist() == [3.0, -1.0, 0.0, 2.0]
    s = M.single_score([np.array([0.0, -np.inf, 0.0])])  # not all zero: the key itself
    assert s.tolist() == [0.0, -np.inf, 0.0]
    for seed in (0, 1, 7):
        perm = np.random.default_rng(seed).permutation(6)
        # all zero: the tie-break alone, the smallest draw first
        assert M.single_score([np.zeros(6)], seed=seed).tolist() == (-(perm + 1.0)).tolist()
        keys = [np.array([2.0, 1, 2, 1, 2, 0]), np.array([0.0, 5, 0, 5, 1, 9])]
        order = sorted(range(6), key=lambda i: (-keys[0][i], -keys[1][i], perm[i]))
        want = np.empty(6)
        want[order] = -np.arange(1.0, 7.0)
        got = M.single_score(keys, seed=seed)
        assert got.dtype == np.float64 and got.tolist() == want.tolist()
    assert M.single_score([np.zeros(6)]).tolist() == M.single_score([np.zeros(6)], seed=0).tolist()
    x = hand_inputs()
    for j in (0, 2):  # Method.order seeds the tie-break with the fact's position
        n = len(x.baselines(j)["random"][0])
        assert M.REGISTRY["random"].order(x, j).tolist() == (-(np.random.default_rng(j).permutation(n) + 1.0)).tolist()
    assert M.REGISTRY["random"].order(x, 0).tolist() != (-(np.random.default_rng(1).permutation(5) + 1.0)).tolist()


# --------------------------------------------------------------------------- queries, rivals and logits


def test_queries_turn_head_side_facts_around():
    facts = np.array([[0, 1, 2], [3, 0, 4], [5, 1, 6]], np.int32)
    assert RV.queries(facts, None, 2).tolist() == facts.tolist()
    q = RV.queries(facts, [False, True, True], 2)
    assert q.dtype == np.int64 and q.tolist() == [[0, 1, 2], [4, 2, 3], [6, 3, 5]]
    assert facts.tolist() == [[0, 1, 2], [3, 0, 4], [5, 1, 6]]  # the input is left alone
    assert RV.queries([1, 0, 2], [1], 5).tolist() == [[2, 5, 1]]  # one fact, any truthy side


def every_score(model, q_ent, q_rel):
    with torch.no_grad():
        return np.array(
            [
                float(model.score_triples(torch.tensor([q_ent]), torch.tensor([q_rel]), torch.tensor([e]))[0])
                for e in range(N)
            ]
        )


def brute_rank_and_rival(model, fact, known, head):
    h, r, t = (int(x) for x in fact)
    q_ent, q_rel, answer = (t, r + R, h) if head else (h, r, t)
    s = every_score(model, q_ent, q_rel)
    keep = np.ones(N, bool)
    if known is not None:
        keep[known.tails_of(q_ent, q_rel)] = False
    keep[answer] = False
    rival = int(np.flatnonzero(keep)[s[keep].argmax()])
    rank = 1 + int((s[keep] > s[answer]).sum()) + 0.5 * int((s[keep] == s[answer]).sum())
    rival_triple = (rival, r, t) if head else (h, r, rival)
    return rank, s[answer], rival_triple, s[rival]


@pytest.mark.parametrize("filtered", [False, True])
def test_rank_and_rival_equal_scoring_every_entity_on_both_sides(filtered):
    model = tiny_model(11)
    facts = []
    for h, r in ((0, 0), (3, 1), (5, 0), (2, 1)):  # each tail query's best answer, and a poor one
        s = every_score(model, h, r)
        facts += [(h, r, int(s.argmax())), (h, r, int(s.argmin()))]
    facts = np.array(facts)
    # the filter marks each query's two best other answers as known on the tail side, and one on the head side
    planted = []
    for h, r, t in facts:
        s = every_score(model, h, r)
        s[t] = -np.inf
        planted += [(h, r, int(e)) for e in np.argsort(-s)[:2]]
        s = every_score(model, t, r + R)
        s[h] = -np.inf
        planted.append((int(s.argmax()), r, t))
    known = KnownTails([with_reciprocals(np.array(planted), R)], 2 * R) if filtered else None
    for head in (False, True):
        side = np.full(len(facts), head)
        side[0] = False  # sides mixed in one call
        ranks, s_fact, rivals, s_rival = RV.rank_and_rival(model, facts, known, side)
        assert rivals.dtype == np.int64 and ranks.dtype == np.float64
        for j, f in enumerate(facts):
            rank, sf, rival, sr = brute_rank_and_rival(model, f, known, bool(side[j]))
            assert ranks[j] == rank and tuple(rivals[j]) == rival
            assert s_fact[j] == pytest.approx(sf, abs=1e-5) and s_rival[j] == pytest.approx(sr, abs=1e-5)
        assert RV.competitors(model, facts, known, side).tolist() == rivals.tolist()
    assert sorted({int(x) for x in RV.rank_and_rival(model, facts, known)[0]}) != [1]  # ranks other than first
    # no side given: every fact on the tail side
    assert (
        RV.competitors(model, facts, known).tolist() == RV.competitors(model, facts, known, np.zeros(8, bool)).tolist()
    )


def test_sides_given_as_zeros_and_ones_and_ranked_on_the_models_device(monkeypatch):
    model = tiny_model(11)
    facts = np.array([[0, 0, 1], [2, 1, 3], [4, 0, 5]])
    as_bool = RV.rank_and_rival(model, facts, None, np.array([False, True, True]))
    as_int = RV.rank_and_rival(model, facts, None, [0, 1, 1])
    for a, b in zip(as_bool, as_int):
        assert np.asarray(a).tolist() == np.asarray(b).tolist()
    seen = []
    real = RV.rank_queries
    monkeypatch.setattr(RV, "rank_queries", lambda *a, **k: seen.append(k.get("device")) or real(*a, **k))
    RV.rank_and_rival(model, facts, None)
    assert seen == [torch.device("cpu")]


def test_triple_logits_take_any_integer_ids():
    model = tiny_model(4)
    triples = np.array([[0, 0, 1], [2, 3, 4], [6, 1, 5]])
    want = RV.triple_logits(model, triples)
    for dtype in (np.int16, np.uint8, np.int32):
        np.testing.assert_array_equal(RV.triple_logits(model, triples.astype(dtype)), want)
    np.testing.assert_array_equal(RV.triple_logits(model, triples.tolist()), want)


def test_head_side_facts_need_reciprocal_relations():
    model = tiny_model(2, reciprocal=False)
    facts = np.array([[0, 0, 1], [2, 1, 3]])
    with pytest.raises(TracegraphError) as e:
        RV.rank_and_rival(model, facts, None, [False, True])
    assert str(e.value) == "head-side facts need a model with reciprocal relations"
    ranks, s_fact, rivals, _ = RV.rank_and_rival(model, facts, None, [False, False])  # the tail side is fine
    for j, f in enumerate(facts):
        assert tuple(rivals[j]) == brute_rank_and_rival(model, f, None, False)[2]


def test_triple_logits_are_eval_mode_float64_and_side_logits_follow_the_side():
    model = tiny_model(4, input_dropout=0.5, feature_map_dropout=0.5, output_dropout=0.5).train()
    triples = np.array([[0, 0, 1], [2, 3, 4], [6, 1, 5]])
    got = RV.triple_logits(model, triples)
    assert not model.training and got.dtype == np.float64
    want = [every_score(model, h, r)[t] for h, r, t in triples]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    facts, rivals = np.array([[0, 0, 1], [2, 1, 3]]), np.array([[0, 0, 5], [6, 1, 3]])
    f, r = RV.side_logits(model, facts, rivals, np.array([False, True]))
    s = every_score
    np.testing.assert_allclose(f, [s(model, 0, 0)[1], s(model, 3, 1 + R)[2]], rtol=1e-6)
    np.testing.assert_allclose(r, [s(model, 0, 0)[5], s(model, 3, 1 + R)[6]], rtol=1e-6)
    f0, r0 = RV.side_logits(model, facts, rivals, None)
    np.testing.assert_allclose(f0, [s(model, 0, 0)[1], s(model, 2, 1)[3]], rtol=1e-6)
    np.testing.assert_allclose(r0, [s(model, 0, 0)[5], s(model, 6, 1)[3]], rtol=1e-6)


def test_fact_rows_are_the_training_rows_equal_to_the_fact():
    train = np.array([[0, 1, 2], [0, 1, 3], [2, 1, 0], [0, 1, 2], [0, 0, 2], [1, 1, 2]])
    assert M.fact_rows(train, (0, 1, 2)).tolist() == [0, 3]
    assert M.fact_rows(train, np.array([2, 1, 0])).tolist() == [2]
    assert M.fact_rows(train, (4, 1, 2)).tolist() == []


# --------------------------------------------------------------------------- influence against float64


TRAIN = np.array(
    [
        [0, 0, 1],
        [1, 1, 2],
        [2, 0, 3],
        [0, 1, 4],
        [4, 0, 3],
        [5, 1, 6],
        [3, 1, 0],
        [6, 0, 5],
        [0, 0, 3],  # the first fact itself
        [2, 1, 2],  # a self-loop
    ]
)


@pytest.mark.parametrize(
    "loss,layers,names",
    [("logit", "all", None), ("score", "all", None), ("train-loss", "last:2", {"entity.weight", "entity_bias"})],
)
def test_influence_parts_equal_a_float64_loop_over_checkpoints(tmp_path, loss, layers, names):
    lrs = (0.1, 0.03)
    paths = write_checkpoints(tmp_path, [(5, lrs[0]), (6, lrs[1])])
    facts = np.array([[0, 0, 3], [5, 0, 2]])
    subsets = [np.array([4, 0, 8, 2]), np.array([2, 7])]  # unsorted and overlapping
    opts = M.MethodOptions(loss=loss, layers=layers, label_smoothing=0.3)
    parts = IP.influence_parts(paths, TRAIN, facts, subsets, opts, CPU)
    union = np.unique(np.concatenate(subsets))
    tracin, cosine, self_inf = float64_influence(paths, lrs, facts, TRAIN[union], loss, 0.3, names)
    for j, rows in enumerate(subsets):
        p = np.searchsorted(union, rows)
        close(parts.tracin[j], tracin[j, p])
        close(parts.cosine[j], cosine[j, p])
        close(parts.relatif[j], tracin[j, p] / np.sqrt(self_inf[p]))
        assert parts.tracin[j].dtype == parts.cosine[j].dtype == parts.relatif[j].dtype == np.float64
    assert np.abs(np.concatenate(parts.cosine)).max() <= sum(lrs) * (1 + 1e-6)


def test_influence_parts_sum_each_checkpoints_parts_in_float64(monkeypatch):
    """The engine replaced by two hand-made checkpoint results (float32 scores, as the engine gives):
    TracIn is their sum, the cosine each η_k ⟨g, g'⟩ / √(η_k‖g‖² · η_k‖g'‖²) times η_k (0 for a zero
    gradient, never what a freed buffer held), RelatIF the sum over the summed self-influence's root, all in
    float64."""
    from types import SimpleNamespace as NS

    lrs = (0.3, 0.07)
    scores = [
        np.array([[0.1, -0.2, 0.0], [0.7, 0.05, 0.0]], np.float32),
        np.array([[0.3, 0.3, 0.0], [-0.1, 0.2, 0.0]], np.float32),
    ]
    # self-influences whose products are squares exact in float32: the norms are exact whatever the precision
    test_self = [np.array([1.0, 4.0], np.float32), np.array([4.0, 1.0], np.float32)]
    train_self = [np.array([9.0, 2.25, 0.0], np.float32), np.array([2.25, 9.0, 0.0], np.float32)]  # row 9: no gradient
    calls = []

    class Stub:
        @staticmethod
        def from_parts(store, train_ids, checkpoints, options, *, device=None):
            calls.append((store, train_ids, checkpoints, options, device))
            return Stub()

        def per_checkpoint(self, facts, rows, *, progress=None):
            calls.append((facts.tolist(), rows.tolist(), progress))
            for k in range(2):
                # freed buffers of the scores' size filled with garbage: a cosine left unwritten would read it
                junk = [np.full((2, 3), 1e6) for _ in range(8)]
                del junk
                yield NS(
                    checkpoints=[NS(lr=lrs[k])], scores=scores[k], test_self=test_self[k], train_self=train_self[k]
                )

    monkeypatch.setattr(IP, "TracIn", Stub)
    facts = np.array([[0, 0, 3], [5, 0, 2]])
    opts = M.MethodOptions(loss="score", layers="last:3", label_smoothing=0.4)
    bar = object()
    parts = IP.influence_parts(
        ["a.pt", "b.pt"], TRAIN, facts, [np.array([9, 2]), np.array([4, 2, 9])], opts, "dev", bar
    )
    store, train_ids, ckpts, iopts, device = calls[0]
    assert store is None and train_ids is TRAIN and ckpts == ["a.pt", "b.pt"] and device == "dev"
    assert (iopts.engine, iopts.loss, iopts.layers, iopts.label_smoothing) == ("exact", "score", "last:3", 0.4)
    assert calls[1] == ([[0, 0, 3], [5, 0, 2]], [2, 4, 9], bar)  # the union of the candidates, once
    s64 = [x.astype(np.float64) for x in scores]
    tracin = s64[0] + s64[1]
    cosine = np.zeros((2, 3))
    for k in range(2):
        for a in range(2):
            for b in range(2):  # row 9 (column 2) has no gradient: its cosine is 0
                cosine[a, b] += lrs[k] * s64[k][a, b] / np.sqrt(float(test_self[k][a]) * float(train_self[k][b]))
    relatif = tracin / np.sqrt(np.maximum(train_self[0].astype(np.float64) + train_self[1], 1e-300))
    for j, cols in enumerate(([2, 0], [1, 0, 2])):
        for got, want in (
            (parts.tracin[j], tracin[j, cols]),
            (parts.cosine[j], cosine[j, cols]),
            (parts.relatif[j], relatif[j, cols]),
        ):
            assert got.dtype == np.float64
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


def test_influence_parts_refuse_facts_without_candidates(tmp_path):
    paths = write_checkpoints(tmp_path, [(5, 0.1)])
    for subsets in ([np.zeros(0, np.int64)], []):
        with pytest.raises(TracegraphError) as e:
            IP.influence_parts(paths, TRAIN, np.array([[0, 0, 3]]), subsets, M.MethodOptions(), CPU)
        assert str(e.value) == "no candidate training triples for any fact"


def loop_degrees(train):
    deg = np.zeros(N)
    for h, _, t in train:
        deg[h] += 1
        if t != h:
            deg[t] += 1
    return deg


def test_method_keys_all_every_method_against_float64_and_loops(tmp_path):
    lrs = (0.2, 0.05)
    paths = write_checkpoints(tmp_path, [(8, lrs[0]), (9, lrs[1])])
    model = tiny_model(9)  # the final model: the last checkpoint's
    facts = np.array([[0, 0, 3], [3, 1, 2]])
    side = np.array([False, True])  # the second fact explains its head: the rival is a head
    subsets = [np.array([8, 0, 2, 4, 6, 9, 5]), np.array([3, 1, 6, 4, 5, 7, 0, 9])]
    known = KnownTails([with_reciprocals(TRAIN, R)], 2 * R)
    asked = ["tracin-margin-path", "tracin", "path", "tracin-margin", "degree", "random", "tracin", "tracin-path"]
    asked += ["tracin-cosine", "relatif", "tracin-margin-query"]
    keys = M.method_keys_all(
        asked,
        model=model,
        checkpoints=paths,
        train_ids=TRAIN,
        facts=facts,
        subsets=subsets,
        known=known,
        opts=M.MethodOptions(),
        device=CPU,
        head_side=side,
    )
    assert list(keys) == list(dict.fromkeys(asked))
    rivals = [brute_rank_and_rival(model, f, known, bool(hs))[2] for f, hs in zip(facts, side)]
    union = np.unique(np.concatenate(subsets))
    both, cosine, self_inf = float64_influence(paths, lrs, np.concatenate([facts, rivals]), TRAIN[union])
    deg = loop_degrees(TRAIN)
    for j, (f, rows) in enumerate(zip(facts, subsets)):
        p = np.searchsorted(union, rows)
        is_fact = (TRAIN[rows] == f).all(1)
        never = lambda a: np.where(is_fact, -np.inf, a)  # the fact itself: -inf in the first key
        tracin, margin = both[j, p], both[j, p] - both[2 + j, p]
        walk = walk_lengths(TRAIN[rows], f[0], f[2])
        d = deg[TRAIN[rows, 0]] + deg[TRAIN[rows, 2]]
        k = {m: [np.asarray(a, np.float64) for a in v[j]] for m, v in keys.items()}
        assert [len(v) for v in k.values()] == [2, 1, 2, 1, 1, 1, 2, 1, 1, 2]
        close(k["tracin"][0], tracin, is_fact)
        close(k["tracin-margin"][0], margin, is_fact)
        close(k["tracin-cosine"][0], cosine[j, p], is_fact)
        close(k["relatif"][0], tracin / np.sqrt(self_inf[p]), is_fact)
        shell = np.where(np.isfinite(walk), np.maximum(walk, 2), 1e9)
        assert k["tracin-margin-path"][0].tolist() == never(-shell).tolist()
        close(k["tracin-margin-path"][1], margin)  # only the first key is overwritten
        assert k["tracin-path"][0].tolist() == never(-np.where(np.isfinite(walk), walk, 1e9)).tolist()
        close(k["tracin-path"][1], tracin)
        assert k["degree"][0].tolist() == never(d).tolist()
        assert k["path"][0].tolist() == never(-np.where(np.isfinite(walk), walk, 1e9)).tolist()
        assert k["path"][1].tolist() == d.tolist() and k["random"][0].tolist() == never(np.zeros(len(rows))).tolist()
        # the answers to the fact's own query, by a loop: (h, r, t′ ≠ t) on the tail side, (h′ ≠ h, r, t) on the head
        answers = []
        for a, b, c in TRAIN[rows]:
            same = (b == f[1] and c == f[2] and a != f[0]) if side[j] else (a == f[0] and b == f[1] and c != f[2])
            answers.append(1.0 if same else 0.0)
        assert k["tracin-margin-query"][0].tolist() == never(np.array(answers)).tolist()
        close(k["tracin-margin-query"][1], margin)
        assert sum(answers) == (1 if j == 0 else 2)  # the test sees answers on both sides
        assert is_fact.sum() == (j == 0) and len(set(walk.tolist())) >= 3  # the test sees the fact and several shells
    assert [tuple(x) for x in rivals] != [tuple(f) for f in facts]


def test_method_keys_all_without_a_rival_or_influence(tmp_path, monkeypatch):
    """The baselines need no checkpoint; the plain influence methods no rival (no second pass)."""
    model = tiny_model(3)
    facts, subsets = np.array([[0, 0, 3]]), [np.array([0, 8, 4])]
    keys = M.method_keys_all(
        ["random", "degree"],
        model=model,
        checkpoints=[tmp_path / "missing.pt"],
        train_ids=TRAIN,
        facts=facts,
        subsets=subsets,
        known=None,
        opts=M.MethodOptions(),
        device=CPU,
    )
    assert [a.tolist() for a in keys["random"][0]] == [[0.0, -np.inf, 0.0]]
    d = loop_degrees(TRAIN)
    assert keys["degree"][0][0].tolist() == [d[0] + d[1], -np.inf, d[4] + d[3]]
    paths = write_checkpoints(tmp_path, [(5, 0.1)])
    seen = []
    real = M.influence_parts
    monkeypatch.setattr(M, "influence_parts", lambda *a, **k: seen.append(len(a[2])) or real(*a, **k))
    M.method_keys_all(
        ["tracin", "relatif"],
        model=model,
        checkpoints=paths,
        train_ids=TRAIN,
        facts=facts,
        subsets=subsets,
        known=None,
        opts=M.MethodOptions(),
        device=CPU,
    )
    assert seen == [1]  # the fact alone: no rival rides along
    with pytest.raises(TracegraphError) as e:
        M.method_keys_all(
            ["tracin", "magic"],
            model=model,
            checkpoints=paths,
            train_ids=TRAIN,
            facts=facts,
            subsets=subsets,
            known=None,
            opts=M.MethodOptions(),
            device=CPU,
        )
    assert "not magic" in str(e.value)


@pytest.mark.parametrize("methods,facts_in_pass", [(["tracin"], 1), (["tracin-margin", "tracin"], 2)])
def test_method_keys_all_passes_its_device_and_progress_on(tmp_path, monkeypatch, methods, facts_in_pass):
    paths = write_checkpoints(tmp_path, [(5, 0.1)])
    seen = []
    real = M.influence_parts

    def spy(checkpoints, train_ids, facts, subsets, opts, device, progress=None):
        seen.append((len(facts), device, progress))
        return real(checkpoints, train_ids, facts, subsets, opts, torch.device(device), None)

    monkeypatch.setattr(M, "influence_parts", spy)
    bar = object()
    M.method_keys_all(
        methods,
        model=tiny_model(5),
        checkpoints=paths,
        train_ids=TRAIN,
        facts=np.array([[0, 0, 3]]),
        subsets=[np.array([0, 1])],
        known=None,
        opts=M.MethodOptions(),
        device="cpu",
        progress=bar,
    )
    assert seen == [(facts_in_pass, "cpu", bar)]


def test_local_retrain_gets_the_runs_settings_and_tracin_as_its_pre_ranking(tmp_path, monkeypatch):
    devices = []

    class Spy(LocalRefit):
        def __init__(self, *a):
            devices.append(a[-1])
            super().__init__(*a)

    monkeypatch.setitem(M.LOCAL_SEARCHES, "local-retrain", Spy)
    lrs = (0.2,)
    paths = write_checkpoints(tmp_path, [(8, lrs[0])])
    facts, subsets = np.array([[0, 0, 3]]), [np.array([3, 8, 0, 2, 6, 4])]
    known = KnownTails([with_reciprocals(TRAIN, R)], 2 * R)
    local = LocalRetrainOptions(candidates=3, k=2, steps=4, learning_rate=0.1, seed=2)
    opts = M.MethodOptions(label_smoothing=0.25, local=local)
    keys = M.method_keys_all(
        ["local-retrain"],
        model=tiny_model(8),
        checkpoints=paths,
        train_ids=TRAIN,
        facts=facts,
        subsets=subsets,
        known=known,
        opts=opts,
        device=CPU,
    )
    tracin = float64_influence(paths, lrs, facts, TRAIN[subsets[0]])[0][0]
    want, rec = LocalRefit(tiny_model(8), TRAIN, known, 0.25, local, CPU).explain(
        (0, 0, 3), subsets[0], tracin, np.array([8])
    )
    want = np.where(subsets[0] == 8, -np.inf, want)  # the fact's row, never on top
    assert len(keys["local-retrain"]) == 1 and len(keys["local-retrain"][0]) == 1
    np.testing.assert_allclose(keys["local-retrain"][0][0], want, rtol=1e-6)
    assert keys["_local_retrain_records"] == [rec] and list(keys) == ["local-retrain", "_local_retrain_records"]
    assert len(rec["chosen_rows"]) >= 1 and 8 not in rec["chosen_rows"] and devices == [CPU]
