"""How an explanation listing picks and lays out its rows, against hand-written loops and worked examples.

Proponents: positive ordering score, in the method's order, at most k; opponents: negative, most
negative first, at most k; never the same row twice, never weak proponents as opponents.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegraph.kg.explain.tracin import rows as rw


def _naive(score, walk, k, signed=True):
    """The listing by plain Python sorts (the reference for :func:`rows.pick`)."""
    n = len(score)

    def shell(i):
        if walk is None:
            return 0.0
        w = walk[i]
        return max(w if math.isfinite(w) else 1e9, 2.0)

    order = sorted(range(n), key=lambda i: (shell(i), -score[i], i))
    if k is None:
        return order, ["opponent" if signed and score[i] < 0 else "proponent" for i in order]
    if not signed:
        pro, opp = order[:k], []
    else:
        pro = [i for i in order if score[i] > 0][:k]
        opp = [i for i in sorted(range(n), key=lambda i: (score[i], i)) if math.isfinite(score[i]) and score[i] < 0][:k]
    return pro + opp, ["proponent"] * len(pro) + ["opponent"] * len(opp)


scores = st.lists(
    st.sampled_from([-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, -math.inf, math.inf]), min_size=0, max_size=12
)


@settings(max_examples=150, deadline=None)
@given(
    score=scores,
    k=st.one_of(st.none(), st.integers(0, 6)),
    signed=st.booleans(),
    with_walk=st.booleans(),
    data=st.data(),
)
def test_pick_matches_a_naive_sort(score, k, signed, with_walk, data):
    walk = None
    if with_walk:
        walk = data.draw(
            st.lists(st.sampled_from([1.0, 2.0, 3.0, 4.0, math.inf]), min_size=len(score), max_size=len(score))
        )
    order, roles = rw.pick(np.array(score), None if walk is None else np.array(walk), k, signed)
    want_order, want_roles = _naive(score, walk, k, signed)
    assert [int(i) for i in order] == want_order
    assert roles == want_roles
    if k is not None:
        assert np.asarray(order).dtype == np.int64


def test_pick_worked_example_with_walk_shells():
    # shells: walk 1 and 2 are both shell 2, then 3, no walk (inf) last
    score = np.array([0.5, 3.0, -1.0, 2.0, -4.0, 1.0])
    walk = np.array([1.0, 3.0, 2.0, np.inf, 2.0, 1.0])
    # shell 2: rows 0 (0.5), 2 (-1), 4 (-4), 5 (1.0) -> by score: 5, 0, 2, 4; shell 3: 1; shell inf: 3
    order, roles = rw.pick(score, walk, None)
    assert list(order) == [5, 0, 2, 4, 1, 3]
    assert roles == ["proponent", "proponent", "opponent", "opponent", "proponent", "proponent"]
    order, roles = rw.pick(score, walk, 2)
    assert list(order) == [5, 0, 4, 2] and roles == ["proponent"] * 2 + ["opponent"] * 2


def test_fewer_opponents_than_k_when_fewer_rows_are_negative():
    order, roles = rw.pick(np.array([2.0, 1.0, 0.5, -1.0]), None, 3)
    assert list(order) == [0, 1, 2, 3] and roles == ["proponent"] * 3 + ["opponent"]
    order, roles = rw.pick(np.array([0.0, 0.0, -2.0]), None, 2)  # zeros are neither
    assert list(order) == [2] and roles == ["opponent"]


def test_unsigned_method_lists_only_proponents_even_below_zero():
    order, roles = rw.pick(np.array([-1.0, -3.0, -2.0]), None, 2, signed=False)
    assert list(order) == [0, 2] and roles == ["proponent", "proponent"]
    order, roles = rw.pick(np.array([-1.0, -3.0]), None, None, signed=False)
    assert list(order) == [0, 1] and roles == ["proponent", "proponent"]
    assert rw._pick(np.array([1.0, -2.0, 3.0]), None, 1).tolist() == [2, 1]
    # a torchrun rank keeps tracin-margin-path's picks: by shell first (row 0's shell 2 before row 2's 3)
    assert rw._pick(np.array([1.0, -2.0, 3.0]), np.array([2.0, 1.0, 3.0]), 1).tolist() == [0, 1]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.int16, np.float32])
def test_pick_orders_scores_of_any_numeric_dtype_by_value(dtype):
    # e.g. a count used as a method score: unsigned values must not wrap when negated
    score = np.array([0, 2, 1, 3], dtype)
    order, roles = rw.pick(score, None, None)
    assert list(order) == [3, 1, 2, 0] and roles == ["proponent"] * 4
    assert list(rw.pick(score, None, 2)[0]) == [3, 1]


ENT = ["e0", "e1", "e2", "e3"]
ENT_N = ["E0", "E1", "E2", "E3"]
REL = ["r0", "r1"]
REL_N = ["R0", "R1"]


def test_rows_carry_the_test_and_training_triples_scores_and_role():
    train = [(0, 0, 1), (1, 1, 2), (2, 0, 3)]
    scores = np.array([1.0, -2.0, 3.0])
    self_inf = np.array([10.0, 20.0, 30.0])
    out = rw._rows(scores, self_inf, train, (3, 1, 0), None, ENT, REL, ENT_N, REL_N)
    test = ["e3", "E3", "r1", "R1", "e0", "E0"]
    assert out == [
        test + ["e2", "E2", "r0", "R0", "e3", "E3", 3.0, 30.0, "proponent"],
        test + ["e0", "E0", "r0", "R0", "e1", "E1", 1.0, 10.0, "proponent"],
        test + ["e1", "E1", "r1", "R1", "e2", "E2", -2.0, 20.0, "opponent"],
    ]
    assert rw.header_of(out) == rw.CSV_HEADER + ["Role"]
    assert all(isinstance(v, float) for row in out for v in row[12:14])


def test_rows_order_by_the_method_score_and_carry_it_and_the_walk():
    train = [(0, 0, 1), (1, 1, 2), (2, 0, 3)]
    tracin = np.array([5.0, 6.0, 7.0])
    method = np.array([-1.0, 2.0, 1.0])
    walk = np.array([2.0, 3.0, 1.0])  # shells 2, 3, 2: rows 2 and 0 come before row 1 whatever their scores
    out = rw._rows(tracin, np.zeros(3), train, (0, 0, 1), 1, ENT, REL, ENT_N, REL_N, method=method)
    assert [r[12] for r in out] == [6.0, 5.0] and [r[14] for r in out] == [2.0, -1.0]
    assert [r[-1] for r in out] == ["proponent", "opponent"] and len(out[0]) == 16
    assert rw.header_of(out) == rw.CSV_HEADER + ["MethodScore", "Role"]
    out = rw._rows(tracin, np.zeros(3), train, (0, 0, 1), None, ENT, REL, ENT_N, REL_N, method=method, walk=walk)
    assert [r[12] for r in out] == [7.0, 5.0, 6.0] and [r[15] for r in out] == [1.0, 2.0, 3.0]
    assert [r[-1] for r in out] == ["proponent", "opponent", "proponent"]
    assert rw.header_of(out) == rw.CSV_HEADER + ["MethodScore", "HeadTailWalk", "Role"]
    assert rw.header_of([]) == rw.CSV_HEADER + ["Role"]


def test_rows_with_unsigned_method_are_all_proponents():
    out = rw._rows(
        np.array([1.0, 2.0]),
        np.zeros(2),
        [(0, 0, 1), (1, 0, 2)],
        (0, 0, 1),
        5,
        ENT,
        REL,
        ENT_N,
        REL_N,
        method=np.array([-2.0, -1.0]),
        signed=False,
    )
    assert [r[12] for r in out] == [2.0, 1.0] and [r[-1] for r in out] == ["proponent", "proponent"]


@pytest.mark.parametrize("side,col", [("tail", 2), ("head", 0)])
def test_rival_records_name_the_rival_on_its_side_and_the_margin(side, col):
    rivals = np.array([[0, 0, 1], [2, 1, 3]])
    recs = rw.rival_records(rivals, np.array([2.5, -1.0]), np.array([1.0, 0.5]), ENT, ENT_N, side)
    want = []
    for x, a, b in [(rivals[0], 2.5, 1.0), (rivals[1], -1.0, 0.5)]:
        e = int(x[col])
        want.append(
            {"side": side, side: ENT[e], f"{side}_name": ENT_N[e], "logit": b, "fact_logit": a, "logit_margin": a - b}
        )
    assert recs == want
    assert all(type(v) is float for r in recs for v in (r["logit"], r["fact_logit"], r["logit_margin"]))


def test_explanation_splits_rows_by_role_and_result_stacks_them():
    cols = rw.CSV_HEADER + ["Role"]
    a = pd.DataFrame([["x"] * 14 + ["proponent"], ["y"] * 14 + ["opponent"], ["z"] * 14 + ["proponent"]], columns=cols)
    b = pd.DataFrame([["w"] * 14 + ["opponent"]], columns=cols)
    ea, eb = rw.Explanation("triple_000_x_y", {}, a), rw.Explanation("triple_001_w_v", {}, b)
    assert ea.proponents["TestHead"].tolist() == ["x", "z"] and ea.opponents["TestHead"].tolist() == ["y"]
    frame = rw.ExplainResult([ea, eb], {}).frame()
    assert frame["TestHead"].tolist() == ["x", "y", "z", "w"] and frame.index.tolist() == [0, 1, 2, 3]
    empty = rw.ExplainResult([], {}).frame()
    assert empty.empty and list(empty.columns) == cols
