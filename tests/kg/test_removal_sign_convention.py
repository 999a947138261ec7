"""The removal test's sign convention, against its own retrains on a toy graph: a *positive*
``delta_rr`` / ``delta_score`` means the prediction got worse (rank up, logit down) after the
removal. Ranks and logits of the base and the retrained models are recomputed here by scoring
every entity (a float64 counting loop), not through the code's ranking."""

import numpy as np
import pytest
import torch

from tracegraph.kg.data.triples import KnownTails, encode_triples, read_labeled_triples
from tracegraph.kg.explain.removal import (
    RemovalCase,
    RemovalOptions,
    describe_ratio,
    neighbour_rows,
    removal_test,
    select_correct,
    write_without,
)
from tracegraph.kg.model.model_io import load_model
from tracegraph.kg.model.train import TrainConfig, train

TINY = {"embedding_dim": 8, "embedding_height": 2, "embedding_width": 4, "output_channels": 2}


def _toy_graph(path):
    """Two relations on 10 entities: a ring and its chords, so every entity has a few neighbours."""
    rows = [(f"e{i}", "next", f"e{(i + 1) % 10}") for i in range(10)]
    rows += [(f"e{i}", "skip", f"e{(i + 3) % 10}") for i in range(10)]
    rows += [(f"e{i}", "next", f"e{(i + 5) % 10}") for i in range(0, 10, 2)]
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))
    return rows


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("removal")
    _toy_graph(root / "train.txt")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(
            TrainConfig(
                train=str(root / "train.txt"),
                output_dir=str(root / "run"),
                epochs=4,
                learning_rate=0.05,
                batch_size=8,
                checkpoint_every=4,
                model=dict(TINY),
            )
        )
    finally:
        torch.set_num_threads(threads)
    return root


def _bf_rank_and_logit(model, triple, known_tails):
    """Filtered realistic tail rank and logit, every entity scored one at a time in float64."""
    h, r, t = triple
    model.eval()
    with torch.no_grad():
        s = model.score_all(torch.tensor([h]), torch.tensor([r]))[0].double().numpy()
    greater = ties = 0
    for e in range(len(s)):
        if e == t or e in known_tails:
            continue
        greater += s[e] > s[t]
        ties += s[e] == s[t]
    return 1.0 + greater + ties / 2.0, float(s[t])


def test_removal_reports_drops_as_positive_changes(toy_run):
    lm = load_model(toy_run / "run" / "final_model.pt")
    lt = read_labeled_triples(toy_run / "train.txt")
    ids = encode_triples(lt, lm.entities, lm.relations)
    R = lm.model.config.num_relation_rows
    known = KnownTails([ids], R)
    # explain two training triples (on a toy graph nothing else is ranked first); the "proponents"
    # are their neighbour rows that touch the head, which the retrain cannot see
    cases = []
    for index in (0, 10):
        h, r, t = (int(x) for x in ids[index])
        touching = neighbour_rows(ids, h, t)
        cases.append(RemovalCase(index=index, triple=(h, r, t), proponent_rows=touching[touching != index]))
    opts = RemovalOptions(k=4, n_triples=2, random_draws=1, seed=0, keep_models=True)
    torch.set_num_threads(1)
    res = removal_test(toy_run / "run", toy_run / "train.txt", ids, cases, known, toy_run / "out", opts)
    assert res["retrains"] == 4 and res["graded"] == 2
    for case in res["per_triple"]:
        h, r, t = case["triple"]
        known_t = set(known.tails_of(h, r).tolist())
        base_rank, base_logit = _bf_rank_and_logit(lm.model, (h, r, t), known_t)
        assert case["base_rank"] == base_rank and case["base_score"] == pytest.approx(base_logit, abs=1e-5)
        for arm in case["arms"]:
            sub = "proponents" if arm["arm"] == "proponents" else f"random_{arm['draw']}"
            after = load_model(toy_run / "out" / f"triple_{case['index']:03d}" / sub / "run" / "final_model.pt")
            rank, logit = _bf_rank_and_logit(after.model, (h, r, t), known_t)
            assert arm["rank"] == rank and arm["score"] == pytest.approx(logit, abs=1e-5)
            # worse after the removal -> positive; better -> negative
            assert arm["delta_rr"] == pytest.approx(1 / base_rank - 1 / rank)
            assert arm["delta_score"] == pytest.approx(base_logit - logit, abs=1e-5)
            assert np.sign(arm["delta_rr"]) == np.sign(rank - base_rank)
            assert arm["training_triples"] == len(ids) - len(arm["removed_rows"])
    prop = [a for c in res["per_triple"] for a in c["arms"] if a["arm"] == "proponents"]
    rand = [a for c in res["per_triple"] for a in c["arms"] if a["arm"] == "random"]
    for key in ("delta_rr", "delta_score"):
        p, q = np.mean([a[key] for a in prop]), np.mean([a[key] for a in rand])
        assert res["proponents"][key]["mean"] == pytest.approx(p)
        assert res["random"][key]["mean"] == pytest.approx(q)
        assert res[f"ratio_{key}"] == (pytest.approx(p / q) if q > 0 else None)


def test_ratio_is_undefined_unless_the_random_arm_hurt():
    assert describe_ratio({"ratio_delta_rr": 1.5}) == "ratio 1.50"
    assert "undefined" in describe_ratio({"ratio_delta_rr": None})


def test_correct_predictions_are_selected_best_rank_first_then_highest_score():
    ranks = np.array([1.0, 3.0, 1.0, 2.0, 1.0, 5.0])
    scores = np.array([0.5, 9.0, 2.0, 1.0, 0.7, 3.0])
    assert select_correct(ranks, scores, 1.0, 5) == [2, 4, 0]
    assert select_correct(ranks, scores, 3.0, 4) == [2, 4, 0, 3]
    assert select_correct(ranks, scores, 3.0, 2) == [2, 4]


def test_write_without_leaves_out_exactly_the_given_rows(tmp_path):
    rows = _toy_graph(tmp_path / "train.txt")
    n = write_without(tmp_path / "train.txt", np.array([0, 3, 24]), tmp_path / "kept.txt")
    kept = read_labeled_triples(tmp_path / "kept.txt")
    want = [x for i, x in enumerate(rows) if i not in (0, 3, 24)]
    assert n == len(want) and list(zip(kept.heads, kept.relations, kept.tails)) == want
