"""The necessity test (kg/explain/necessity.py) by hand on the 10-triple graph: a 2-epoch run, and
retrains of one epoch-pair each (seconds in all).

What it holds, and against what:

* which facts: the run's test triples ranked first on each side, filtered by the files named, found
  here by scoring every entity one triple at a time; facts given with ``--facts`` on every side;
* the candidates (training rows touching the fact's head or tail, never the fact) counted by a loop;
* each arm's removals read back from its ``excluded.txt``: the method's top k by its key (degree by a
  loop, every row of higher degree than the k-th in), random neighbours among the candidates and far
  rows touching neither end, smaller k a subset of larger k, the fact never;
* the reference: the run itself for its own seed (its ranks, H@1 and MRR by hand), else a retrain
  with that seed whose ranks are counted here from its kept checkpoint; the margins against the
  brute-force filtered rival;
* each retrain's configuration (the run's own, without test file, resume, or checkpoints per
  epoch, with the run's id maps) and what it keeps on disk;
* the JSON's protocol, counts and environment, the number of retrains announced to the progress
  display, the refusals word for word, the warning for another training file;
* ``top_rows``, ``arm_rows``, ``fact_ranks``, ``fact_margins``, ``retrain_count`` and the
  local-retrain diagnostics against hand-worked values and brute force.
"""

import json
import logging
import time

import numpy as np
import pytest
import torch

from tests.conftest import log_lines
from tests.kg.references import Bars
from tests.kg.tiny_graph import TEST, TINY, TRIPLES, VALID, cfg, write_triples
from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.explain import grading
from tracegraph.kg.explain import necessity as nec
from tracegraph.kg.explain.local_retrain import LocalRetrainOptions
from tracegraph.kg.explain.retrain import Retrainer, epoch_note
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.model_io import load_model
from tracegraph.kg.model.train import train


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("necessity_by_hand")
    write_triples(d / "train.txt", TRIPLES)
    write_triples(d / "valid.txt", VALID)
    write_triples(d / "test.txt", TEST)
    train(cfg(d, d / "run", epochs=2, valid=str(d / "valid.txt"), test=str(d / "test.txt"), label_smoothing=0.2))
    return d


def every_score(model, q, rel):
    with torch.no_grad():
        return np.array(
            [
                float(model.score_triples(torch.tensor([q]), torch.tensor([rel]), torch.tensor([e]))[0])
                for e in range(model.config.num_entities)
            ]
        )


def brute_side(model, known: set, fact, head: bool):
    """Filtered realistic rank of the fact's answer on one side, and its margin over the best other
    answer that is not known true (``known``: id triples with their reciprocals)."""
    h, r, t = (int(x) for x in fact)
    R = model.config.num_relations
    q, rel, ans = (t, r + R, h) if head else (h, r, t)
    s = every_score(model, q, rel)
    keep = np.array([e == ans or (q, rel, e) not in known for e in range(len(s))])
    others = keep.copy()
    others[ans] = False
    rank = 1 + (s[others] > s[ans]).sum() + 0.5 * (s[others] == s[ans]).sum()
    return float(rank), float(s[ans] - s[others].max())


def id_set(lm, *files):
    R = len(lm.relations)
    out = set()
    for f in files:
        for line in f.read_text().split("\n"):
            if line:
                h, r, t = line.split("\t")
                h, r, t = lm.entities.id(h), lm.relations.id(r), lm.entities.id(t)
                out |= {(h, r, t), (t, r + R, h)}
    return out


def ids_of(lm, triples):
    return np.array([(lm.entities.id(h), lm.relations.id(r), lm.entities.id(t)) for h, r, t in triples])


def read_excluded(path):
    return [tuple(line.split("\t")) for line in path.read_text().splitlines()] if path.exists() else []


def planted_filter(lm, path):
    """A filter file that knows every answer of each test triple's query but its answer and the
    worst-scored other one, where that one scores below the answer: the triple is then first there."""
    e, R = lm.entities.labels, len(lm.relations)
    lines = []
    for f in ids_of(lm, TEST):
        for head in (False, True):
            q, rel, ans = (f[2], f[1] + R, f[0]) if head else (f[0], f[1], f[2])
            s = every_score(lm.model, q, rel)
            below = [x for x in range(6) if s[x] < s[ans]]
            if below:
                keep = (ans, min(below, key=lambda x: s[x]))
                r = lm.relations.labels[f[1]]
                lines += [(e[x], r, e[f[2]]) if head else (e[f[0]], r, e[x]) for x in range(6) if x not in keep]
    write_triples(path, lines)
    return path


def walks(cand, h, t):
    """Per candidate (u, ·, v): the shortest h–t walk through it in the undirected candidate graph (BFS)."""
    adj: dict = {}
    for u, _, v in cand:
        if u != v:
            adj.setdefault(int(u), set()).add(int(v))
            adj.setdefault(int(v), set()).add(int(u))

    def bfs(s):
        dist, todo = {s: 0}, [s]
        while todo:
            nxt = []
            for u in todo:
                for v in adj.get(u, ()):
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        nxt.append(v)
            todo = nxt
        return dist

    dh, dt = bfs(int(h)), bfs(int(t))
    g = lambda d, x: d.get(int(x), np.inf)
    return [min(g(dh, u) + 1 + g(dt, v), g(dh, v) + 1 + g(dt, u)) for u, _, v in cand]


def test_given_facts_on_both_sides_arms_and_reference_by_hand(run, tmp_path, logs, monkeypatch):
    from tracegraph.kg.explain.necessity_summary import add_above, summarize_arm

    splits = []  # the side split's mask (the retrains here flip no fact, so its figures alone cannot tell)
    real_split = nec.add_split
    monkeypatch.setattr(
        nec, "add_split", lambda arms, m, names: splits.append((m, names)) or real_split(arms, m, names)
    )

    lm = load_model(run / "run" / "final_model.pt")
    model = lm.model
    given = TEST + [TRIPLES[2]]  # a training triple among the facts: never its own candidate
    write_triples(tmp_path / "facts.txt", given)
    filt = planted_filter(lm, tmp_path / "filter.txt")
    out = tmp_path / "nec"
    bars = Bars()

    t0 = time.perf_counter()
    res = nec.run_necessity(
        nec.NecessityConfig(
            model_dir=str(run / "run"),
            train=str(run / "train.txt"),
            output_dir=str(out),
            facts=str(tmp_path / "facts.txt"),
            filter_files=[str(filt)],
            ks=[2, 1, 2, 4],
            methods=["degree", "path", "degree"],
            seeds=[3],  # the run's own seed, named
            bootstrap=20,
            sample_seed=4,
            device="cpu",
        ),
        progress=bars,
    )
    facts = ids_of(lm, given + given)
    head = np.array([False] * 3 + [True] * 3)
    known = id_set(lm, filt, tmp_path / "facts.txt")  # the filter named and --facts
    base = [brute_side(model, known, f, h) for f, h in zip(facts, head)]
    assert res["n_facts"] == 6 and res["facts"] == [list(x) for x in given + given]
    assert res["fact_sides"] == ["tail"] * 3 + ["head"] * 3
    assert res["base_ranks"] == [b[0] for b in base]
    train_ids = ids_of(lm, TRIPLES)
    touch = lambda i, f: bool({int(train_ids[i, 0]), int(train_ids[i, 2])} & {int(f[0]), int(f[2])})
    cands = [[i for i in range(10) if touch(i, f) and tuple(train_ids[i]) != tuple(f)] for f in facts]
    far_pool = [[i for i in range(10) if not touch(i, f) and tuple(train_ids[i]) != tuple(f)] for f in facts]
    assert res["mean_candidates"] == np.mean([len(c) for c in cands])
    assert res["train"] == str(run / "train.txt") and res["model_dir"] == str(run / "run")
    assert res["facts_file"] == str(tmp_path / "facts.txt")
    assert res["protocol"] == {
        "facts": "given, on the tail and head side",
        "candidates": "training triples touching the fact's head or tail, never the fact",
        "removal": "every fact's top-k at once, one retrain per arm and k (kg/data/exclusion.py)",
        "reference": "the run itself for its own seed, else a full retrain with that seed",
        "ci": "bootstrap over facts, 20 resamples",
    }
    assert res["config"]["ks"] == [2, 1, 2, 4] and res["config"]["local"] == LocalRetrainOptions().__dict__
    assert res["environment"] == {
        "explain_device": "cpu",
        "retrain_device": "cpu",
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    assert res["local_retrain"] is None and time.perf_counter() - t0 >= res["seconds"] >= res["explain_seconds"] > 0
    assert json.loads((out / "necessity.json").read_text()) == json.loads(json.dumps(res))
    assert (out / "necessity.md").read_text().startswith("#")
    # one bar over the 12 retrains (neighbour, far, degree and path at k = 1, 2 and 4), one step each
    order = [f"{a}@{k}" for a in ("neighbour", "far", "degree", "path") for k in (1, 2, 4)]
    assert bars.tasks == [("retrain", 12, "")] and [st[:2] for st in bars.steps] == [(0, 1)] * 12
    assert [st[2] for st in bars.steps] == [n.replace("@", " k=") for n in order]
    arms = res["seeds"]["3"]
    assert list(arms) == ["reference", *order] and set(res["summary"]) == set(order)
    ref = arms["reference"]
    ranks = np.array(ref["ranks"])
    assert ref["ranks"] == res["base_ranks"] and ref["seconds"] == 0.0
    assert ref["hits@1"] == np.mean(ranks <= 1) == 2 / 6  # the planted head-side facts
    assert ref["mrr"] == pytest.approx(np.mean(1 / ranks), abs=1e-12)
    margins = np.array([b[1] for b in base])
    np.testing.assert_allclose(ref["margins"], margins, rtol=0, atol=1e-5)
    # each fact's removals by the documented draws: neighbours and far rows from a permutation seeded
    # with (sample seed, fact, 0 or 1), the methods' order with ties broken by (sample seed, fact, 2)
    deg = np.zeros(6)
    for a, _, c in train_ids:
        deg[a] += 1
        deg[c] += a != c
    picks = {}
    for j, (f, c) in enumerate(zip(facts, cands)):
        c = np.array(c)
        d = deg[train_ids[c, 0]] + deg[train_ids[c, 2]]
        shell = np.array([w if np.isfinite(w) else 1e9 for w in walks(train_ids[c], f[0], f[2])])
        tie = np.random.default_rng([4, j, 2]).permutation(len(c))
        picks[("neighbour", j)] = np.random.default_rng([4, j, 0]).permutation(c).tolist()
        picks[("far", j)] = np.random.default_rng([4, j, 1]).permutation(np.array(far_pool[j])).tolist()
        picks[("degree", j)] = [int(c[i]) for i in sorted(range(len(c)), key=lambda i: (-d[i], tie[i]))]
        picks[("path", j)] = [int(c[i]) for i in sorted(range(len(c)), key=lambda i: (shell[i], -d[i], tie[i]))]
    labels = {tuple(x): i for i, x in enumerate(map(tuple, TRIPLES))}
    for name in order:
        arm, k = name.split("@")
        k = int(k)
        d = out / "retrains" / f"seed3_{arm}_k{k}"
        rows = sorted(labels[x] for x in read_excluded(d / "excluded.txt"))
        assert rows == sorted(set().union(*(picks[(arm, j)][:k] for j in range(6))))
        assert 2 not in picks[(arm, 2)] + picks[(arm, 5)]  # the fact that is training row 2: never its own
        a = arms[name]
        assert (a["arm"], a["k"], a["triples_removed"]) == (arm, k, len(rows)) and len(a["ranks"]) == 6
        assert a["seconds"] > 0
        want = summarize_arm(ranks, np.array(a["ranks"]), 20, 4)  # necessity_summary's own by-hand tests hold it
        assert {key: a[key] for key in want} == want
        assert a["hits@1"] == np.mean(np.array(a["ranks"]) <= 1)
        assert a["removed_at_fact"] == pytest.approx(np.mean([sum(touch(i, f) for i in rows) for f in facts]))
        hits = lambda r, m: float(np.mean(np.asarray(r)[m] <= 1))
        for part, m in (("tail", ~head), ("head", head), ("low_margin", margins <= np.median(margins))):
            assert a[f"delta_hits@1_{part}"] == pytest.approx(hits(ranks, m) - hits(a["ranks"], m), abs=1e-12)
        assert a["delta_hits@1_high_margin"] == pytest.approx(
            hits(ranks, margins > np.median(margins)) - hits(a["ranks"], margins > np.median(margins)), abs=1e-12
        )
        rc = json.loads((d / "run" / "config.json").read_text())["train"]
        assert rc["exclude"] == str(d / "excluded.txt") and rc["seed"] == 3 and rc["train"] == str(run / "train.txt")
        assert rc["test"] is None and rc["valid"] is None and rc["resume"] is False  # no patience: no validation
        assert rc["checkpoint_every"] == 10**9 and rc["entity_map"] == str(run / "run" / "node_dict.txt")
        assert rc["relation_map"] == str(run / "run" / "rel_dict.txt") and rc["epochs"] == 2
        assert not list((d / "run").glob("*.pt")) and not (d / "run" / "checkpoints").exists()  # not kept
        ci = [round(x, 3) for x in a["delta_hits@1_ci95"]]
        line = (
            f"necessity seed 3 {arm} k={k}: ΔH@1 {a['delta_hits@1']:.3f} {ci}, ΔMRR {a['delta_mrr']:.3f}, "
            f"H@1 after {a['hits@1']:.3f} ({len(rows)} triples removed, "
        )
        assert any(m.startswith(line) for m in logs()), line
    assert [(m.tolist(), names) for m, names in splits] == [(list(~head), ("tail", "head"))]  # by side
    # some arm flips a fact, and its interval has more than three decimals
    assert any(
        a["hits@1"] != ref["hits@1"] and round(max(a["delta_hits@1_ci95"]), 3) != max(a["delta_hits@1_ci95"])
        for a in arms.values()
        if "k" in a
    )
    # above far and neighbour: paired by fact against them at the same k, resampled with the sample seed
    bare = {n: {"ranks": a["ranks"], **({"k": a["k"]} if n != "reference" else {})} for n, a in arms.items()}
    add_above(bare, [1, 2, 4], 20, 4)
    for n in order:
        for floor in ("far", "neighbour"):
            key = f"above_{floor}_hits@1"
            assert (key in arms[n]) == (key in bare[n]) and arms[n].get(key) == bare[n].get(key)
            assert arms[n].get(f"{key}_ci95") == bare[n].get(f"{key}_ci95")
        assert ("above_neighbour_hits@1" in arms[n]) == (not n.startswith(("far", "neighbour")))
    assert any("necessity: 6 facts (3 tail-side, 3 head-side) explained by degree, path in " in m for m in logs())


def test_facts_drawn_are_the_test_triples_ranked_first_under_the_filter_named(run, tmp_path):
    lm = load_model(run / "run" / "final_model.pt")
    model = lm.model
    filt = planted_filter(lm, tmp_path / "filter.txt")
    common = dict(
        model_dir=str(run / "run"),
        train=str(run / "train.txt"),
        ks=[1],
        methods=["random"],
        bootstrap=10,
        filter_files=[str(filt)],
        device="cpu",
        seeds=[4],  # another seed: the reference is a retrain, kept
        keep_models=True,
    )
    bars = Bars()
    res = nec.run_necessity(nec.NecessityConfig(output_dir=str(tmp_path / "a"), **common), progress=bars)
    assert bars.tasks == [("retrain", 4, "")]  # the reference, neighbour, far and random at k = 1
    assert [st[2] for st in bars.steps] == ["reference seed 4", "neighbour k=1", "far k=1", "random k=1"]
    known = id_set(lm, filt, run / "test.txt")
    # every (test triple, side) ranked first, found by brute force: the planted one on both sides
    first = [
        (list(x), side)
        for side in ("tail", "head")
        for x, f in zip(TEST, ids_of(lm, TEST))
        if brute_side(model, known, f, side == "head")[0] == 1.0
    ]
    assert first == [(list(TEST[0]), "head"), (list(TEST[1]), "head")]  # these answers score last as tails
    assert [[f, s] for f, s in zip(res["facts"], res["fact_sides"])] == [list(x) for x in first]
    assert res["base_ranks"] == [1.0, 1.0] and res["facts_file"] == str(run / "test.txt")
    assert res["protocol"]["facts"] == "filtered rank 1 (tail or head side) under the run's final model"
    assert res["config"]["filter_files"] == [str(filt)] and res["config"]["seeds"] == [4]
    arms = res["seeds"]["4"]
    ref_dir = tmp_path / "a" / "retrains" / "seed4_reference"
    assert not (ref_dir / "excluded.txt").exists() and (ref_dir / "run" / "final_model.pt").exists()
    assert json.loads((ref_dir / "run" / "config.json").read_text())["train"]["exclude"] is None
    ref_model = load_model(ref_dir / "run" / "final_model.pt").model
    facts = ids_of(lm, [tuple(f) for f in res["facts"]])
    sides = [s == "head" for s in res["fact_sides"]]
    assert arms["reference"]["ranks"] == [brute_side(ref_model, known, f, hs)[0] for f, hs in zip(facts, sides)]
    assert arms["reference"]["seconds"] > 0
    np.testing.assert_allclose(
        arms["reference"]["margins"],
        [brute_side(ref_model, known, f, hs)[1] for f, hs in zip(facts, sides)],
        rtol=0,
        atol=1e-5,
    )
    arm_dir = tmp_path / "a" / "retrains" / "seed4_random_k1" / "run"
    arm_model = load_model(arm_dir / "final_model.pt").model  # kept
    assert arms["random@1"]["ranks"] == [brute_side(arm_model, known, f, hs)[0] for f, hs in zip(facts, sides)]
    assert (arm_dir / "checkpoints").is_dir()
    # n below the number ranked first: n of them, drawn with the sample seed (choose_facts, held by
    # test_necessity_sampling_and_coverage.py) from every test triple on every side, tail side first
    pool_ranks = [brute_side(model, known, f, hs)[0] for hs in (False, True) for f in ids_of(lm, TEST)]
    for seed in (0, 1, 2):
        one = nec.run_necessity(
            nec.NecessityConfig(output_dir=str(tmp_path / "b"), n=1, sample_seed=seed, **{**common, "seeds": None})
        )
        (pick,) = grading.choose_facts(np.array(pool_ranks), 1, seed)
        assert [one["facts"], one["fact_sides"]] == [[list(TEST[pick % 2])], ["tail" if pick < 2 else "head"]]
        ref = one["seeds"]["3"]["reference"]  # the run itself: the fact first
        assert (ref["ranks"], ref["hits@1"], ref["mrr"], ref["seconds"]) == ([1.0], 1.0, 1.0, 0.0)
    heads = nec.run_necessity(nec.NecessityConfig(output_dir=str(tmp_path / "c"), sides="head", **common))
    assert heads["fact_sides"] == ["head", "head"] and heads["protocol"]["facts"].startswith(
        "filtered rank 1 (head side)"
    )
    with pytest.raises(DataError) as e:
        nec.run_necessity(nec.NecessityConfig(output_dir=str(tmp_path / "d"), sides="tail", **common))
    assert str(e.value) == f"{run / 'test.txt'}: no fact is ranked first by the model (filtered, tail side)"


def test_refusals_word_for_word(run, tmp_path):
    base = dict(model_dir=str(run / "run"), train=str(run / "train.txt"), output_dir=str(tmp_path / "o"), device="cpu")
    for ks in ([], [0, 2], [-1]):
        with pytest.raises(TracegraphError) as e:
            nec.run_necessity(nec.NecessityConfig(ks=ks, **base))
        assert str(e.value) == "--k must list positive integers, e.g. 1,2,4"
    with pytest.raises(TracegraphError) as e:
        nec.run_necessity(nec.NecessityConfig(methods=["magic"], **base))
    assert "not magic" in str(e.value)
    # the run's test triples are none of them first without a filter that makes them so
    with pytest.raises(DataError) as e:
        nec.run_necessity(nec.NecessityConfig(**base, ks=[1], filter_files=[str(run / "train.txt")]))
    lm = load_model(run / "run" / "final_model.pt")
    known = id_set(lm, run / "train.txt", run / "test.txt")
    assert all(brute_side(lm.model, known, f, h)[0] > 1 for f in ids_of(lm, TEST) for h in (False, True))
    assert str(e.value) == f"{run / 'test.txt'}: no fact is ranked first by the model (filtered, tail or head side)"
    # a run folder without its config
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(run / "run", bare)
    (bare / "config.json").unlink()
    with pytest.raises(DataError) as e:
        nec.run_necessity(nec.NecessityConfig(**{**base, "model_dir": str(bare)}))
    assert str(e.value) == f"{bare / 'config.json'}: run config (config.json of the run) not found"
    # a run without a test file needs --facts
    d = tmp_path / "notest"
    train(cfg(run, d, epochs=1))
    with pytest.raises(DataError) as e:
        nec.run_necessity(nec.NecessityConfig(**{**base, "model_dir": str(d)}))
    assert str(e.value) == f"{d / 'config.json'}: the run has no test file: name the facts to explain with --facts"


def test_a_run_without_its_final_model_is_read_from_its_best_checkpoint(run, tmp_path):
    import shutil

    d = tmp_path / "run"
    shutil.copytree(run / "run", d)
    (d / "final_model.pt").unlink()
    res = nec.run_necessity(
        nec.NecessityConfig(
            model_dir=str(d),
            train=str(run / "train.txt"),
            output_dir=str(tmp_path / "o"),
            facts=str(run / "test.txt"),
            sides="tail",
            ks=[1],
            methods=["degree"],
            bootstrap=5,
            device="cpu",
        )
    )
    best = load_model(d / "best_model.pt")  # the run's best epoch (it has a validation file)
    known = id_set(best, run / "train.txt", run / "valid.txt", run / "test.txt")
    assert res["base_ranks"] == [brute_side(best.model, known, f, False)[0] for f in ids_of(best, TEST)]


def test_retrainer_keeps_the_runs_settings_and_warns_of_another_training_file(run, tmp_path):
    other = tmp_path / "other.txt"
    write_triples(other, TRIPLES[:8])
    with log_lines(level=logging.WARNING) as logs:
        r = Retrainer(run / "run", str(other), "cpu", tmp_path / "re", keep_models=False)
        Retrainer(run / "run", str(run / "train.txt"), "auto", tmp_path / "re2", keep_models=False)
    assert logs == [
        f"--train {other} is not the run's training file {run / 'train.txt'}; retraining on --train"
    ]  # the run's own file: none
    c = r.cfg
    assert (c.train, c.resume, c.exclude, c.test, c.valid, c.checkpoint_every, c.overwrite) == (
        str(other),
        False,
        None,
        None,
        None,
        10**9,
        True,
    )
    assert c.entity_map == str(run / "run" / "node_dict.txt") and c.relation_map == str(run / "run" / "rel_dict.txt")
    assert c.device == "cpu" and c.epochs == 2 and c.learning_rate == 0.01 and c.model == dict(TINY)

    r.run("x", [("e1", "r0", "e3")], seed=7)  # a rerun into the same folder replaces it
    t0 = time.perf_counter()
    model, secs = r.run("x", [("e0", "r0", "e1"), ("e4", "r0", "e5")], seed=7)
    assert isinstance(model, ConvE) and 0 < secs <= time.perf_counter() - t0
    assert read_excluded(tmp_path / "re" / "x" / "excluded.txt") == [("e0", "r0", "e1"), ("e4", "r0", "e5")]
    rc = json.loads((tmp_path / "re" / "x" / "run" / "config.json").read_text())["train"]
    assert rc["seed"] == 7 and rc["output_dir"] == str(tmp_path / "re" / "x" / "run")
    assert not list((tmp_path / "re" / "x" / "run").glob("*.pt"))


def test_an_interrupted_retrain_continues_from_its_last_epoch_to_the_same_weights(run, tmp_path, monkeypatch):
    import tracegraph.kg.model.train as train_module

    removed = [("e0", "r0", "e1")]
    whole, _ = Retrainer(run / "run", str(run / "train.txt"), "cpu", tmp_path / "a", keep_models=False).run(
        "x", removed, seed=3
    )
    save = train_module._save

    def stop_after_the_first_epoch(s, epoch, *a):
        save(s, epoch, *a)
        raise KeyboardInterrupt  # as a killed process: the epoch's resume checkpoint is on disk

    r = Retrainer(run / "run", str(run / "train.txt"), "cpu", tmp_path / "b", keep_models=False)
    monkeypatch.setattr(train_module, "_save", stop_after_the_first_epoch)
    with pytest.raises(KeyboardInterrupt):
        r.run("x", removed, seed=3)
    monkeypatch.setattr(train_module, "_save", save)
    hist = tmp_path / "b" / "x" / "run" / "training_history.json"
    first = json.loads(hist.read_text())
    hist.write_text(json.dumps([{**first[0], "seconds": 1000.0}]))  # the interrupted process's epoch, made long
    t0 = time.perf_counter()
    with log_lines() as logs:
        resumed, secs = r.run("x", removed, seed=3)
    # the retrain's seconds count the epochs before the interruption, as a user waited for them
    assert 1000.0 < secs <= 1000.0 + time.perf_counter() - t0
    assert "retrain x: resuming from its last epoch" in logs
    history = json.loads((tmp_path / "b" / "x" / "run" / "training_history.json").read_text())
    assert [e["epoch"] for e in history] == [1, 2]  # the first epoch is not trained twice
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with log_lines() as logs:  # another seed is another retrain: it starts afresh
        r.run("x", removed, seed=4)
    assert not any("resuming" in m for m in logs)


def test_a_retrain_logs_its_epochs_about_ten_times_with_the_time_left(run, tmp_path):
    r = Retrainer(run / "run", str(run / "train.txt"), "cpu", tmp_path / "re", keep_models=False)
    with log_lines() as logs:
        r.run("x", [("e0", "r0", "e1")], seed=3)
    shown = [m for m in logs if m.startswith("retrain x: epoch")]
    assert [m.split(",")[0] for m in shown] == ["retrain x: epoch 1 of 2", "retrain x: epoch 2 of 2"]
    assert shown[-1].endswith("an epoch, about 0 min left")
    with log_lines() as logs:  # 25 epochs: every second one, and the first and the last
        note = epoch_note("y")
        for e in range(1, 26):
            note(e, 25, {"seconds": 60.0})
    assert [int(m.split()[3]) for m in logs] == [1, *range(2, 25, 2), 25]
    assert logs[0] == "retrain y: epoch 1 of 25, 60s an epoch, about 24 min left"


def test_retrainer_with_patience_keeps_validation_and_drops_the_runs_own_exclusion(run, tmp_path):
    d = tmp_path / "patient"
    write_triples(tmp_path / "ex.txt", TRIPLES[:1])
    kw = dict(valid=str(run / "valid.txt"), test=str(run / "test.txt"), patience=3, device="auto")
    train(cfg(run, d, epochs=1, exclude=str(tmp_path / "ex.txt"), **kw))
    train(cfg(run, d, epochs=2, exclude=str(tmp_path / "ex.txt"), resume=True, **kw))  # a resumed run
    recorded = json.loads((d / "config.json").read_text())["train"]
    assert recorded["exclude"] == str(tmp_path / "ex.txt") and recorded["resume"] is True
    r = Retrainer(d, str(run / "train.txt"), "auto", tmp_path / "re", keep_models=True)
    assert r.cfg.valid == str(run / "valid.txt") and r.cfg.test is None and r.cfg.device == "auto"
    assert r.cfg.exclude is None and r.cfg.resume is False and r.cfg.patience == 3
    assert Retrainer(d, str(run / "train.txt"), "cpu", tmp_path / "re", keep_models=True).cfg.device == "cpu"
    with pytest.raises(DataError) as e:
        Retrainer(tmp_path, str(run / "train.txt"), "cpu", tmp_path / "re", keep_models=True)
    assert str(e.value) == f"{tmp_path / 'config.json'}: run config (config.json of the run) not found"


def test_sides_refusals_word_for_word():
    with pytest.raises(TracegraphError) as e:
        nec.resolve_sides("heads", True)
    assert str(e.value) == "--sides must be one of auto, tail, head, both, not 'heads'"
    for sides in ("head", "both"):
        with pytest.raises(TracegraphError) as e:
            nec.resolve_sides(sides, False)
        assert str(e.value) == (
            f"--sides {sides}: head-side facts need a model with reciprocal relations (this run has none); "
            "use --sides tail"
        )


# --------------------------------------------------------------------------- the pieces by hand


def tiny(seed, **kw):
    torch.manual_seed(seed)
    m = ConvE(ConvEConfig(num_entities=6, num_relations=2, **{**TINY, **kw}))
    with torch.no_grad():
        m.entity.weight.normal_(0, 1.0)
        m.relation.weight.normal_(0, 1.0)
    return m


def test_fact_ranks_and_margins_equal_scoring_every_entity(tmp_path):
    from tracegraph.kg.data.triples import KnownTails, with_reciprocals

    model = tiny(1, input_dropout=0.5, output_dropout=0.5).train()  # margins in eval mode all the same
    train_ids = np.array([[0, 0, 1], [0, 0, 2], [3, 1, 0], [4, 0, 5], [2, 1, 4]])
    facts = np.array([[0, 0, 3], [4, 0, 5], [2, 1, 0], [1, 1, 4]])
    head = np.array([False, True, False, True])
    known = KnownTails([with_reciprocals(train_ids, 2)], 4)
    kset = {tuple(x) for x in with_reciprocals(train_ids, 2).tolist()}
    margins = grading.fact_margins(model, facts, known, head)
    assert not model.training
    ranks = grading.fact_ranks(model, facts, head, known)
    for j, (f, h) in enumerate(zip(facts, head)):
        rank, margin = brute_side(model, kset, f, bool(h))
        assert ranks[j] == rank and margins[j] == pytest.approx(margin, abs=1e-5)
    tails = grading.fact_margins(model, facts, known)  # no side: every fact on the tail side
    for j, f in enumerate(facts):
        assert tails[j] == pytest.approx(brute_side(model, kset, f, False)[1], abs=1e-5)


def test_top_rows_take_the_first_k_by_the_keys_never_the_fact():
    cands = np.array([10, 11, 12, 13, 14, 15])
    keys = [np.array([3.0, -np.inf, 5.0, 3.0, 1.0, 3.0]), np.array([0.0, 9.0, 0.0, 2.0, 0.0, 1.0])]
    assert grading.top_rows(keys, cands, 1, 0, 0).tolist() == [12]
    assert grading.top_rows(keys, cands, 3, 0, 0).tolist() == [12, 13, 15]  # the second key breaks the tie
    assert grading.top_rows(keys, cands, 10, 0, 0).tolist() == [12, 13, 15, 10, 14]  # the fact (-inf) never
    # a tie on every key: broken by a permutation seeded with (seed, fact, 2), the smallest draw first
    flat = [np.array([1.0, 1.0, 1.0, 1.0, -np.inf, 1.0])]
    for seed, index in ((0, 0), (1, 0), (0, 1), (5, 3)):
        perm = np.random.default_rng([seed, index, 2]).permutation(6)
        want = [int(cands[i]) for i in sorted([0, 1, 2, 3, 5], key=lambda i: perm[i])]
        assert grading.top_rows(flat, cands, 5, seed, index).tolist() == want
        assert grading.top_rows(flat, cands, 2, seed, index).tolist() == want[:2]
    draws = {tuple(grading.top_rows(flat, cands, 5, s, 0).tolist()) for s in range(30)}
    assert len(draws) > 10  # ties really broken at random
    assert grading.top_rows([np.array([2, 7, 1], np.int64)], np.array([0, 1, 2]), 2, 0, 0).tolist() == [1, 0]


def test_arm_rows_draw_a_seeded_permutation_prefix_of_their_pool():
    train = np.array([[0, 0, 1], [0, 1, 2], [3, 0, 1], [2, 1, 3], [4, 0, 5], [5, 1, 6], [6, 0, 4], [0, 0, 1]])
    fact = (0, 0, 1)
    cands = np.array([0, 1, 2, 6, 7])
    for seed, index in ((0, 0), (3, 1), (2, 7)):
        nb = nec.arm_rows("neighbour", train, fact, cands, 10, seed, index)
        pool = np.array([1, 2, 6])  # the candidates without the fact's rows 0 and 7
        assert sorted(nb.tolist()) == [1, 2, 6]
        assert nb.tolist() == np.random.default_rng([seed, index, 0]).permutation(pool).tolist()
        far = nec.arm_rows("far", train, fact, cands, 10, seed, index)
        assert far.tolist() == np.random.default_rng([seed, index, 1]).permutation(np.array([3, 4, 5, 6])).tolist()
        for k in (0, 1, 2):
            assert nec.arm_rows("far", train, fact, cands, k, seed, index).tolist() == far[:k].tolist()
    # the far pool ignores the candidates; any arm name but neighbour is far
    assert sorted(nec.arm_rows("degree", train, np.array(fact), np.zeros(0, np.int64), 5, 0, 0).tolist()) == [
        3,
        4,
        5,
        6,
    ]


def test_retrain_count_by_hand():
    c = nec.NecessityConfig("m", "t", "o", ks=[1, 2, 2, 4], methods=["degree", "path", "degree"])
    assert nec.retrain_count(c, 0) == (2 + 2) * 3  # neighbour, far, degree, path at k = 1, 2, 4
    c.seeds = [0, 5, 6]
    assert nec.retrain_count(c, 0) == 3 * 12 + 2  # a reference retrain for each seed that is not the run's
    c.seeds = [5]
    assert nec.retrain_count(c, 0) == 13


def test_config_defaults_and_local_retrain_diagnostics():
    c = nec.NecessityConfig("m", "t", "o")
    assert (c.facts, c.sides, c.n, c.ks, c.methods, c.seeds, c.loss, c.layers) == (
        None,
        "auto",
        100,
        [1, 2, 4],
        ["tracin-margin-path"],
        None,
        "logit",
        "all",
    )
    assert (c.checkpoints, c.filter_files, c.bootstrap, c.sample_seed, c.device, c.keep_models) == (
        None,
        None,
        1000,
        0,
        "auto",
        False,
    )
    assert c.ks is not nec.NecessityConfig("m", "t", "o").ks and nec.RANDOM_ARMS == ("neighbour", "far")
    opts = LocalRetrainOptions(candidates=3)
    records = [
        {"margin_full": {"tail": 1.0, "head": -2.0}, "searched": 3},
        {"margin_full": {"tail": 0.5, "head": 0.0}, "searched": 2},  # a tie is not first
    ]
    d = nec._local_diagnostics(records, opts)
    assert d == {
        "options": {"candidates": 3, "k": 4, "steps": 60, "learning_rate": 0.05, "search": "greedy", "seed": 0},
        "mimic_ranks_answer_first": 2 / 4,
        "mean_margin_full": pytest.approx(-0.5 / 4),
        "mean_searched": 2.5,
    }
    assert nec._jsonable({"a": (1, [2, (3,)]), "b": {"c": (4,)}}) == {"a": [1, [2, [3]]], "b": {"c": [4]}}


def test_local_retrain_arm_reports_its_mimics(run, tmp_path, monkeypatch):
    local = LocalRetrainOptions(candidates=2, k=1, steps=3)
    seen = []
    real = nec.method_keys_all
    monkeypatch.setattr(nec, "method_keys_all", lambda m, **kw: seen.append((m, kw)) or real(m, **kw))
    res = nec.run_necessity(
        nec.NecessityConfig(
            model_dir=str(run / "run"),
            train=str(run / "train.txt"),
            output_dir=str(tmp_path / "l"),
            facts=str(run / "test.txt"),
            ks=[1],
            methods=["local-retrain"],
            loss="score",
            layers="last:2",
            bootstrap=10,
            checkpoints=["final"],
            local=local,
            device="cpu",
        )
    )
    d = res["local_retrain"]
    assert d["options"] == {"candidates": 2, "k": 1, "steps": 3, "learning_rate": 0.05, "search": "greedy", "seed": 0}
    assert 0 <= d["mimic_ranks_answer_first"] <= 1 and 0 < d["mean_searched"] <= 2
    assert res["config"]["checkpoints"] == ["final"] and set(res["seeds"]["3"]) >= {"local-retrain@1"}
    ((methods, kw),) = seen
    o = kw["opts"]
    assert methods == ["local-retrain"] and (o.loss, o.layers, o.label_smoothing, o.local) == (
        "score",
        "last:2",
        0.2,
        local,
    )
    assert kw["checkpoints"] == [run / "run" / "final_model.pt"] and kw["device"] == torch.device("cpu")
    assert (
        kw["head_side"].tolist() == [False, False, True, True]
        and kw["facts"].tolist() == ids_of(load_model(run / "run" / "final_model.pt"), TEST + TEST).tolist()
    )
