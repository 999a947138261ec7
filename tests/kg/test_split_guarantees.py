"""What ``tracegraph data split`` guarantees: every distinct triple lands in exactly one place
(duplicate lines collapse to one, so no triple is in two splits), the cut sizes follow the
fractions, and valid/test keep only triples whose entities and relation train has."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.split import split_file, split_triples, triple_stats
from tracegraph.kg.data.triples import LabeledTriples, read_labeled_triples


def _lt(rows):
    h, r, t = (list(x) for x in zip(*rows)) if rows else ([], [], [])
    return LabeledTriples(h, r, t, np.arange(1, len(rows) + 1), "mem")


triple = st.tuples(st.sampled_from("abcdefg"), st.sampled_from(["r", "s"]), st.sampled_from("abcdefg"))


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(triple, min_size=1, max_size=60),
    dup=st.integers(0, 10),
    fr=st.sampled_from([(0.1, 0.1), (0.2, 0.3), (0.0, 0.5), (0.45, 0.0)]),
    seed=st.integers(0, 5),
)
def test_every_distinct_triple_lands_exactly_once(rows, dup, fr, seed):
    rows = rows + rows[:dup]  # duplicate lines
    res = split_triples(_lt(rows), fr[0], fr[1], seed)
    placed = res.train + res.valid + res.test + res.dropped["valid"] + res.dropped["test"]
    assert Counter(placed) == Counter(set(rows))  # each distinct triple once, duplicates collapsed
    for a, b in ((res.train, res.valid), (res.train, res.test), (res.valid, res.test)):
        assert not set(a) & set(b)
    n = len(set(rows))
    assert len(res.test) + len(res.dropped["test"]) == round(fr[1] * n)
    assert len(res.valid) + len(res.dropped["valid"]) == round(fr[0] * n)
    ents = {x for h, _, t in res.train for x in (h, t)}
    rels = {r for _, r, _ in res.train}
    for h, r, t in res.valid + res.test:
        assert h in ents and t in ents and r in rels
    for h, r, t in res.dropped["valid"] + res.dropped["test"]:
        assert not (h in ents and t in ents and r in rels)  # dropped only for a reason


def test_same_seed_same_split_other_seed_other_split():
    rows = [(f"e{i}", "r", f"e{(i * 7) % 30}") for i in range(30)] + [(f"e{i}", "s", f"e{i + 1}") for i in range(29)]
    a = split_triples(_lt(rows), 0.2, 0.2, 1)
    assert split_triples(_lt(rows), 0.2, 0.2, 1) == a
    assert split_triples(_lt(rows), 0.2, 0.2, 2).test != a.test


def test_fractions_out_of_range_are_refused():
    for v, t in ((1.0, 0.0), (0.6, 0.4), (-0.1, 0.1), (0.1, 1.0)):
        with pytest.raises(TracegraphError, match=r"^fractions must be in \[0, 1\) and sum to less than 1$"):
            split_triples(_lt([("a", "r", "b")]), v, t, 0)
    split_triples(_lt([("a", "r", "b")]), 0.0, 0.0, 0)


def test_duplicate_lines_in_a_file_never_reach_two_split_files(tmp_path):
    p = tmp_path / "all.txt"
    rows = [(f"e{i % 6}", "r", f"e{(i + 1) % 6}") for i in range(6)] * 5  # every line five times
    p.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))
    split_file(p, tmp_path / "o", 0.2, 0.2, seed=0)
    files = {
        n: read_labeled_triples(tmp_path / "o" / f"{n}.txt") if (tmp_path / "o" / f"{n}.txt").stat().st_size else None
        for n in ("train", "valid", "test")
    }
    seen = Counter()
    for lt in files.values():
        if lt is not None:
            seen.update(zip(lt.heads, lt.relations, lt.tails))
    assert set(seen.values()) == {1}


def test_stats_by_hand(tmp_path):
    p = tmp_path / "t.txt"
    # a-b twice (one duplicate), a self-loop on c, b-c; undirected distinct neighbours: a:{b}, b:{a,c}, c:{b}
    p.write_text("a\tr\tb\na\tr\tb\nc\ts\tc\nb\ts\tc\n")
    s = triple_stats([p])["files"][str(p)]
    assert (s["triples"], s["entities"], s["relations"], s["duplicate_triples"], s["self_loops"]) == (4, 3, 2, 1, 1)
    assert s["degree"] == {"min": 1, "median": 1.0, "mean": pytest.approx(4 / 3), "max": 2}
    assert s["top_relations"] == {"r": 2, "s": 2}
    both = triple_stats([p, p])
    assert both["combined"]["triples"] == 8 and both["combined"]["duplicate_triples"] == 5


def test_split_file_defaults_are_a_tenth_each_seed_0(tmp_path):
    p = tmp_path / "all.txt"
    rows = [(f"e{i % 7}", f"r{i % 2}", f"e{(i * 3 + 1) % 7}") for i in range(40)]
    p.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))
    res = split_file(p, tmp_path / "o")
    n = len(set(rows))
    assert len(res.test) + len(res.dropped["test"]) == round(0.1 * n)
    assert len(res.valid) + len(res.dropped["valid"]) == round(0.1 * n)
    assert res == split_triples(read_labeled_triples(p), 0.1, 0.1, 0)


def test_stats_degree_zero_top_ten_and_combined_by_hand(tmp_path):
    p = tmp_path / "t.txt"
    # z has only a self-loop: degree 0; eleven relations, r0 most frequent
    lines = ["z\tr0\tz", "a\tr0\tb", "a\tr0\tc"] + [f"a\tr{i}\tb" for i in range(1, 11)]
    p.write_text("\n".join(lines) + "\n")
    one = triple_stats([p])
    assert "combined" not in one
    s = one["files"][str(p)]
    assert s["degree"]["min"] == 0 and s["degree"]["max"] == 2 and s["degree"]["median"] == 1.0
    assert len(s["top_relations"]) == 10 and s["top_relations"]["r0"] == 3
    q = tmp_path / "u.txt"
    q.write_text("x\tnew\ty\n")
    both = triple_stats([p, q])["combined"]
    assert (both["triples"], both["entities"], both["relations"]) == (14, 6, 12)
