"""Id maps, name dicts and triple files round-trip: what is written is read back unchanged, ids
and labels are a bijection, and ``from_labels`` numbers labels in sorted order whatever their
order or repetition (Hypothesis properties)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tracegraph.errors import DataError
from tracegraph.kg.data.split import write_triples
from tracegraph.kg.data.idmap import IdMap, read_name_dict, write_name_dict
from tracegraph.kg.data.triples import KnownTails, encode_triples, is_header, read_labeled_triples, with_reciprocals

# labels as a file can hold them: no tab, no newline / carriage return, not blank
label = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=8).filter(
    lambda s: s.strip() and "\t" not in s
)
labels = st.lists(label, min_size=1, max_size=25, unique=True)
SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@SETTINGS
@given(labs=labels)
def test_id_map_file_round_trip_and_bijection(tmp_path_factory, labs):
    m = IdMap(labs)
    p = tmp_path_factory.mktemp("idmap") / "map.txt"
    m.write(p)
    back = IdMap.read(p)
    assert back == m and back.labels == labs
    ids = m.encode(labs)
    assert ids.tolist() == list(range(len(labs)))  # the i-th label has id i
    assert m.decode(ids) == labs
    assert all(m.id(x) == i for i, x in enumerate(labs)) and all(x in m for x in labs)
    assert m.contains_all(labs + ["\t"]).tolist() == [True] * len(labs) + [False]


@SETTINGS
@given(labs=labels, reps=st.lists(st.integers(0, 24), max_size=30), seed=st.integers(0, 99))
def test_from_labels_numbers_sorted_distinct_labels(labs, reps, seed):
    listed = labs + [labs[i % len(labs)] for i in reps]
    np.random.default_rng(seed).shuffle(listed)
    assert IdMap.from_labels(listed).labels == sorted(set(labs))


@SETTINGS
@given(names=st.dictionaries(st.integers(0, 50), label, min_size=1, max_size=20))
def test_name_dict_round_trip(tmp_path_factory, names):
    p = tmp_path_factory.mktemp("names") / "names.txt"
    write_name_dict(p, names)
    assert read_name_dict(p) == names


@SETTINGS
@given(rows=st.lists(st.tuples(label, label, label), min_size=1, max_size=20))
def test_triple_file_round_trip_through_ids(tmp_path_factory, rows):
    assume(not is_header(rows[0]))  # a first line naming head, relation and tail columns is a header
    p = tmp_path_factory.mktemp("triples") / "t.txt"
    write_triples(p, rows)
    lt = read_labeled_triples(p)
    assert list(zip(lt.heads, lt.relations, lt.tails)) == rows and lt.lines.tolist() == list(range(1, len(rows) + 1))
    ents = IdMap.from_labels([x for h, _, t in rows for x in (h, t)])
    rels = IdMap.from_labels([r for _, r, _ in rows])
    ids = encode_triples(lt, ents, rels)
    assert [(ents.labels[h], rels.labels[r], ents.labels[t]) for h, r, t in ids] == rows


def test_duplicate_labels_are_refused():
    with pytest.raises(DataError, match="duplicate label 'a'"):
        IdMap(["a", "b", "a"])


def test_reciprocals_and_known_tails_by_a_loop():
    ids = np.array([[0, 0, 1], [1, 1, 2], [2, 0, 0], [0, 0, 2]])
    both = with_reciprocals(ids, 2)
    assert both.tolist() == ids.tolist() + [[1, 2, 0], [2, 3, 1], [0, 2, 2], [2, 2, 0]]
    kt = KnownTails([both], 4)
    for h in range(3):
        for r in range(4):
            assert kt.tails_of(h, r).tolist() == sorted({t for a, b, t in both.tolist() if (a, b) == (h, r)})
