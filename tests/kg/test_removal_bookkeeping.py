"""The removal test's bookkeeping, against what a reader of its JSON and of the retrained runs
relies on: the retrains keep the base run's id maps even when the training file given lacks some of
its entities and relations, train on that file, never resume, may be re-run into the same folder;
the random arm draws from every neighbour triple without repeats (a naive loop over the rows);
mechanism edges, labels, progress callbacks and log lines name what was removed; the summary's
statistics and keys are worked out by hand."""

import json
import logging
import shutil
import time
from dataclasses import asdict

import numpy as np
import pytest
import torch

from tests.kg.test_removal_sign_convention import TINY, _bf_rank_and_logit, _toy_graph
from tracegraph.kg.data.triples import KnownTails, encode_triples, read_labeled_triples
from tracegraph.kg.explain.removal import (
    RemovalCase,
    RemovalOptions,
    _removal_summary,
    describe_ratio,
    random_neighbour_rows,
    removal_test,
    tail_ranks,
    write_without,
)
from tracegraph.kg.model.model_io import load_model
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.runtime.progress import log


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory):
    """A toy run whose config says it was resumed, and a training file without entity e9 and
    without relation ``skip`` (so maps built from that file would differ from the run's)."""
    root = tmp_path_factory.mktemp("removal_books")
    rows = _toy_graph(root / "train.txt")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(
            TrainConfig(
                train=str(root / "train.txt"),
                output_dir=str(root / "run"),
                epochs=2,
                learning_rate=0.05,
                batch_size=8,
                checkpoint_every=2,
                model=dict(TINY),
            )
        )
    finally:
        torch.set_num_threads(threads)
    cfg = json.loads((root / "run" / "config.json").read_text())
    cfg["train"]["resume"] = True
    (root / "run" / "config.json").write_text(json.dumps(cfg))
    sub = [x for x in rows if "e9" not in (x[0], x[2]) and x[1] != "skip"]
    (root / "sub.txt").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in sub))
    return root


def _naive_pool(ids, h, t):
    return [i for i, (a, _, b) in enumerate(ids.tolist()) if h in (a, b) or t in (a, b)]


def test_retrains_keep_the_run_maps_train_on_the_given_file_and_report_what_was_removed(resumed_run):
    base = load_model(resumed_run / "run" / "final_model.pt")
    ent, rel = base.entities.labels, base.relations.labels
    ids = encode_triples(read_labeled_triples(resumed_run / "sub.txt"), base.entities, base.relations)
    known = KnownTails([ids], base.model.config.num_relation_rows)
    h, r, t = (int(x) for x in ids[0])
    pool = _naive_pool(ids, h, t)
    props = np.array([p for p in pool if p != 0][:3])
    relevant = {tuple(int(x) for x in ids[props[0]]), (h, r, t)}  # one removed edge, one never removed
    case = RemovalCase(index=0, triple=(h, r, t), proponent_rows=props, relevant=relevant)
    opts = RemovalOptions(k=50, random_draws=1, keep_models=True)  # k above the pool: all of it is drawn
    out, called, lines = resumed_run / "out", [], []
    handler = logging.Handler()
    handler.emit = lambda rec: lines.append(rec.getMessage())
    log.addHandler(handler)
    old_level = log.level
    log.setLevel(logging.INFO)
    torch.set_num_threads(1)
    start = time.perf_counter()
    try:
        res = removal_test(
            resumed_run / "run",
            resumed_run / "sub.txt",
            ids,
            [case],
            known,
            out,
            opts,
            labels=lambda a, b, c: [ent[a], rel[b], ent[c]],
            on_retrain=called.append,
        )
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
    elapsed = time.perf_counter() - start

    prop, rand = res["per_triple"][0]["arms"]
    assert (prop["arm"], prop["draw"], rand["arm"], rand["draw"]) == ("proponents", 0, "random", 0)
    assert prop["removed_rows"] == sorted(props.tolist())
    assert rand["removed_rows"] == pool  # every neighbour triple once: drawn without replacement
    assert prop["removed_mechanism_edges"] == 1  # of 3 removed
    assert rand["removed_mechanism_edges"] == 2  # the pool holds the fact itself too
    assert prop["removed"] == [[ent[a], rel[b], ent[c]] for a, b, c in ids[sorted(props.tolist())].tolist()]
    assert res["per_triple"][0]["triple"] == [ent[h], rel[r], ent[t]]
    assert called == ["triple 0 proponents", "triple 0 random"]
    (r0, _), (r1, r2) = (res["per_triple"][0]["base_rank"], 0), (prop["rank"], rand["rank"])
    assert [x for x in lines if x.startswith("removal:")] == [
        f"removal: test triple 0, proponents: rank {r0:g} -> {r1:g}",
        f"removal: test triple 0, random draw 0: rank {r0:g} -> {r2:g}",
    ]
    for arm, sub in ((prop, "proponents"), (rand, "random_0")):
        run = out / "triple_000" / sub / "run"
        after = load_model(run / "final_model.pt")
        assert after.entities.labels == ent and after.relations.labels == rel  # the run's ids, e9 and skip included
        assert json.loads((run / "config.json").read_text())["train"]["train"] == str(resumed_run / "sub.txt")
        assert arm["training_triples"] == len(ids) - len(arm["removed_rows"])
    rc = res["retrain_config"]
    assert rc["resume"] is False  # the run was resumed; its retrains never are
    assert rc["entity_map"] == str(resumed_run / "run" / "node_dict.txt")
    assert rc["relation_map"] == str(resumed_run / "run" / "rel_dict.txt")
    assert "train" not in rc and "output_dir" not in rc and rc["epochs"] == 2
    assert res["options"] == asdict(opts)
    assert 0 < res["seconds"] <= elapsed

    # a second run into the same folder replaces the first one's retrains; no random arm: no random figures
    again = RemovalCase(index=0, triple=(h, r, t), proponent_rows=props)
    res2 = removal_test(
        resumed_run / "run", resumed_run / "sub.txt", ids, [again], known, out, RemovalOptions(k=3, random_draws=0)
    )
    assert res2["retrains"] == 1 and res2["random"]["delta_rr"] == {"mean": None, "std": None}
    assert res2["ratio_delta_rr"] is None
    assert not list((out / "triple_000" / "proponents" / "run").rglob("*.pt"))
    shutil.rmtree(out)


def test_summary_statistics_and_ratio_by_hand():
    def case(index, prop, rand):
        c = RemovalCase(index=index, triple=(index, 0, index + 1), proponent_rows=np.zeros(0, np.int64))
        c.arms = [
            {"arm": "proponents", "delta_rr": prop, "delta_score": 2 * prop},
            *({"arm": "random", "delta_rr": x, "delta_score": x} for x in rand),
        ]
        return c

    cfg = TrainConfig(train="t.txt", output_dir="o", epochs=3)
    cases = [case(0, 0.5, [0.25, -0.25]), case(1, 0.0, [0.0, 0.0])]
    s = _removal_summary(cases, RemovalOptions(), 1.5, lambda a, b, c: f"{a}-{b}-{c}", cfg)
    # proponents 0.5, 0.0: mean 0.25, population std 0.25; random 0.25, -0.25, 0, 0: mean 0, std sqrt(1/32)
    assert s["proponents"]["delta_rr"] == {"mean": 0.25, "std": 0.25}
    assert s["random"]["delta_rr"]["mean"] == 0.0 and s["random"]["delta_rr"]["std"] == pytest.approx(32**-0.5)
    assert s["ratio_delta_rr"] is None  # the random arm's mean drop is zero: no ratio
    assert s["retrains"] == 6 and s["graded"] == 2 and s["seconds"] == 1.5
    assert [p["triple"] for p in s["per_triple"]] == ["0-0-1", "1-0-2"]
    s = _removal_summary([case(0, 0.5, [0.25])], RemovalOptions(), 1.0, None, cfg)
    assert s["ratio_delta_rr"] == 2.0 and s["ratio_delta_score"] == 4.0
    assert s["per_triple"][0]["triple"] == [0, 0, 1]


def test_ratio_undefined_wording():
    assert describe_ratio({}) == "ratio undefined (the random arm's reciprocal rank did not drop)"


def test_random_draw_takes_the_whole_pool_when_k_reaches_it():
    ids = np.array([[0, 0, 1], [1, 0, 2], [2, 0, 3], [3, 0, 0], [4, 0, 5], [0, 0, 4], [6, 0, 2]])
    pool = _naive_pool(ids, 0, 2)  # rows 0, 1, 2, 3, 5, 6
    for seed in range(5):
        assert random_neighbour_rows(ids, 0, 2, len(pool), seed, 0, 0).tolist() == pool


def test_write_without_no_rows_keeps_every_triple(tmp_path):
    rows = _toy_graph(tmp_path / "train.txt")
    assert write_without(tmp_path / "train.txt", [], tmp_path / "kept.txt") == len(rows)
    kept = read_labeled_triples(tmp_path / "kept.txt")
    assert list(zip(kept.heads, kept.relations, kept.tails)) == rows


def test_tail_ranks_accept_ids_held_as_floats(resumed_run):
    base = load_model(resumed_run / "run" / "final_model.pt")
    ids = encode_triples(read_labeled_triples(resumed_run / "train.txt"), base.entities, base.relations)
    known = KnownTails([ids], base.model.config.num_relation_rows)
    ranks, scores = tail_ranks(base.model, ids[:3].astype(np.float64), known)
    for i, (h, r, t) in enumerate(ids[:3].tolist()):
        rank, logit = _bf_rank_and_logit(base.model, (h, r, t), set(known.tails_of(h, r).tolist()))
        assert ranks[i] == rank and scores[i] == pytest.approx(logit, abs=1e-5)
    assert scores.dtype == np.float64


def test_missing_run_config_is_named(tmp_path):
    from tracegraph.errors import DataError

    with pytest.raises(DataError, match=r"run config \(config.json of the trained run\) not found"):
        removal_test(
            tmp_path, tmp_path / "train.txt", np.zeros((0, 3), np.int64), [], None, tmp_path / "o", RemovalOptions()
        )
