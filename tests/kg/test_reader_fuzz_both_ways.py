"""Reader fuzzing that a reader which rejects everything cannot pass.

``test_triples.py`` checks that whatever parses is right. Here: (1) a text parses *if and only
if* a restatement of the format's rules accepts it, and a rejection names the first bad line;
(2) inputs generated valid by construction (labels with spaces, non-ASCII, CRLF line ends, blank
lines, shuffled id maps) always parse, to exactly what was written.
"""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegraph.errors import DataError
from tracegraph.kg.data.idmap import IdMap, read_name_dict
from tracegraph.kg.data.labels import read_edge_map
from tracegraph.kg.data.triples import read_labeled_triples

alphabet = st.sampled_from(list("ab\t\n\r :x0") + ["\u00e9", "\x00"])


def first_bad_line(text: str, ncols: int):
    """The format, restated: UTF-8 lines split on LF (one trailing CR dropped), blank lines
    skipped, every other line exactly ``ncols`` tab-separated fields, none blank. Returns None
    when the text is valid, 0 when it has no data line, else the 1-based bad line."""
    rows = 0
    for no, line in enumerate(text.split("\n"), start=1):
        line = line[:-1] if line.endswith("\r") else line
        if line == "":
            continue
        fields = line.split("\t")
        if len(fields) != ncols or any(f.strip() == "" for f in fields):
            return no
        rows += 1
    return None if rows else 0


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet, max_size=60))
def test_triples_parse_exactly_when_the_rules_allow(tmp_path_factory, text):
    p = tmp_path_factory.mktemp("fz2") / "t.txt"
    p.write_text(text, encoding="utf-8")
    bad = first_bad_line(text, 3)
    if bad is None:
        lt = read_labeled_triples(p)  # must not raise
        rows = [l.removesuffix("\r").split("\t") for l in text.split("\n") if l.removesuffix("\r")]
        assert [list(x) for x in zip(lt.heads, lt.relations, lt.tails)] == rows
    else:
        with pytest.raises(DataError) as e:
            read_labeled_triples(p)
        assert e.value.line == (bad or None) and e.value.path == str(p)


label = st.text(
    st.sampled_from(list("abcXYZ019 _-:.") + ["\u00e9", "\u4e2d", "\u03b1"]), min_size=1, max_size=8
).filter(lambda s: s.strip() != "")


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(label, label, label), min_size=1, max_size=8), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_valid_triples_files_always_parse(tmp_path_factory, triples, eol, blank_lines):
    sep = eol + (eol if blank_lines else "")
    p = tmp_path_factory.mktemp("ok") / "t.txt"
    p.write_bytes((sep.join("\t".join(t) for t in triples) + eol).encode("utf-8"))
    lt = read_labeled_triples(p)
    assert list(zip(lt.heads, lt.relations, lt.tails)) == triples
    step = 2 if blank_lines else 1
    assert list(lt.lines) == [1 + step * k for k in range(len(triples))]


@settings(max_examples=60, deadline=None)
@given(st.lists(label, min_size=1, max_size=10, unique=True), st.randoms(use_true_random=False))
def test_valid_id_maps_and_name_dicts_always_parse(tmp_path_factory, labels, rnd):
    order = list(range(len(labels)))
    rnd.shuffle(order)  # the index column, not the line order, defines the ids
    p = tmp_path_factory.mktemp("map") / "m.txt"
    p.write_text("".join(f"{labels[i]}\t{i}\n" for i in order), encoding="utf-8")
    assert IdMap.read(p).labels == labels
    assert read_name_dict(p) == dict(enumerate(labels))


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.text(max_size=10), label, max_size=5))
def test_valid_edge_maps_always_parse(tmp_path_factory, mapping):
    p = tmp_path_factory.mktemp("em") / "edge_map.json"
    p.write_text(json.dumps(mapping), encoding="utf-8")
    out = read_edge_map(p)
    assert set(out) == set(mapping.values())
