"""Triple files, id maps, name dicts and edge maps read and written by hand.

Holds ``kg/data/triples.py`` to what its docstrings and ``docs/getting-started.md`` ("File
formats") promise, each against files and expected values written out in the test: the readers'
results on tiny hand-made files, every refusal word for word with its file and line, the header
line vocabulary, the ``.gz`` and byte-order-mark handling, the closest-label hint (ratios worked
out by hand: ``2·matches / total length``), the output-file stem, reciprocal triples and the
known-tails index against a dictionary built in a loop.
"""

import gzip
import json

import numpy as np
import pytest

from tests.conftest import log_lines
from tracegraph.errors import DataError
from tracegraph.kg.data.idmap import IdMap, UnknownLabelError, read_name_dict, write_name_dict
from tracegraph.kg.data.labels import describe_edge_key, read_edge_map, write_edge_map
from tracegraph.kg.data.triples import (
    KnownTails,
    LabeledTriples,
    TripleSet,
    count_duplicates,
    encode_triples,
    is_header,
    read_labeled_triples,
    read_triples,
    triple_file_stem,
    with_reciprocals,
)
from tracegraph.kg.data.tsv import read_text


def refusal(call, *args, **kwargs) -> DataError:
    with pytest.raises(DataError) as e:
        call(*args, **kwargs)
    return e.value


# --------------------------------------------------------------------------- raw text


def test_read_text_decompresses_only_files_named_gz(tmp_path):
    gz = tmp_path / "t.txt.gz"
    gz.write_bytes(gzip.compress("a\tr\tb\n".encode()))
    assert read_text(gz) == "a\tr\tb\n"
    plain = tmp_path / "t.txt"  # gzip bytes under another name are read as they are: not UTF-8
    plain.write_bytes(gzip.compress(b"a\tr\tb\n"))
    e = refusal(read_text, plain)
    assert e.path == str(plain) and e.reason.startswith("not valid UTF-8 (")


@pytest.mark.parametrize(
    "data",
    [
        b"not gzip at all",  # gzip.BadGzipFile, an OSError
        gzip.compress(b"a\tr\tb\n")[:-5],  # EOFError: cut short
        gzip.compress(b"abc")[:10] + b"\xff" * 10 + gzip.compress(b"abc")[20:],  # zlib.error
    ],
    ids=["bad magic", "truncated", "corrupt block"],
)
def test_a_broken_gz_file_is_named(tmp_path, data):
    p = tmp_path / "t.gz"
    p.write_bytes(data)
    e = refusal(read_text, p, "triples file")
    assert e.path == str(p) and e.line is None and e.reason.startswith("not a readable gzip file (")
    assert str(e).startswith(f"{p}: not a readable gzip file (") and str(e).endswith(")")


def test_read_text_names_the_missing_file_as_what_it_is(tmp_path):
    e = refusal(read_text, tmp_path / "gone.txt", "training file")
    assert str(e) == f"{tmp_path / 'gone.txt'}: training file not found"
    e = refusal(read_text, tmp_path / "gone.txt")
    assert str(e) == f"{tmp_path / 'gone.txt'}: file not found"


def test_not_utf8_names_the_line_of_the_bad_byte(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"a\tr\tb\n\nc\tr\td\ne\tr\t\xff\n")  # the bad byte is on line 4
    e = refusal(read_text, p)
    assert (e.path, e.line) == (str(p), 4)
    assert str(e) == f"{p}:4: not valid UTF-8 (invalid start byte)"


def test_a_byte_order_mark_is_removed_with_a_note(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"\xef\xbb\xbfa\tr\tb\n")
    with log_lines() as lines:
        text = read_text(p)
    assert text == "a\tr\tb\n"
    assert lines == [f"{p}:1: removed a UTF-8 byte-order mark"]
    lt = read_labeled_triples(p)
    assert lt.heads == ["a"]


# --------------------------------------------------------------------------- triples files


def test_triples_keep_their_labels_and_lines(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"\n a b \tr 1\tc\r\n\r\nd\tr\te\r\n\n")
    lt = read_labeled_triples(p)
    assert (lt.heads, lt.relations, lt.tails) == ([" a b ", "d"], ["r 1", "r"], ["c", "e"])
    assert lt.lines.tolist() == [2, 4] and lt.lines.dtype == np.int64
    assert lt.path == str(p) and len(lt) == 2


@pytest.mark.parametrize(
    "text,line,reason",
    [
        ("a\tr\tb\nc\td\n", 2, "expected 3 tab-separated fields (head<TAB>relation<TAB>tail), found 2"),
        ("a\tr\tb\n\na\tr\tb\tx\n", 3, "expected 3 tab-separated fields (head<TAB>relation<TAB>tail), found 4"),
        ("a\tr\tb\n\tr\tb\n", 2, "field 1 is empty (head<TAB>relation<TAB>tail)"),
        ("a\tr\tb\na\t \tb\n", 2, "field 2 is empty (head<TAB>relation<TAB>tail)"),
        ("a\tr\t\t\n", 1, "expected 3 tab-separated fields (head<TAB>relation<TAB>tail), found 4"),
        ("a\tr\t\r\n", 1, "field 3 is empty (head<TAB>relation<TAB>tail)"),
    ],
)
def test_a_malformed_triples_line_is_refused_word_for_word(tmp_path, text, line, reason):
    p = tmp_path / "t.txt"
    p.write_text(text)
    e = refusal(read_labeled_triples, p)
    assert (e.path, e.line, e.reason) == (str(p), line, reason)
    assert str(e) == f"{p}:{line}: {reason}"


def test_an_empty_or_missing_triples_file_is_refused(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("\n\r\n\n")
    assert str(refusal(read_labeled_triples, p)) == f"{p}: triples file is empty"
    assert str(refusal(read_labeled_triples, tmp_path / "x.txt")) == f"{tmp_path / 'x.txt'}: triples file not found"
    (tmp_path / "d").mkdir()
    assert (
        str(refusal(read_labeled_triples, tmp_path / "d"))
        == f"{tmp_path / 'd'}: triples file is a directory, not a file"
    )


def test_a_gz_triples_file_reads_like_the_plain_one(tmp_path):
    p = tmp_path / "t.txt.gz"
    p.write_bytes(gzip.compress(b"a\tr\tb\r\nb\ts\tc\n"))
    lt = read_labeled_triples(p)
    assert list(zip(lt.heads, lt.relations, lt.tails)) == [("a", "r", "b"), ("b", "s", "c")]


# the column words of a header line, by column, as the module's comment lists them
HEADS = ["head", "subject", "source", "from", "h", "s", "head_id", "subject_id", "head_label"]
RELATIONS = ["relation", "predicate", "rel", "edge", "type", "label", "r", "p", "relation_id", "relation_label"]
TAILS = ["tail", "object", "target", "to", "t", "o", "tail_id", "object_id", "tail_label"]


@pytest.mark.parametrize("column", [0, 1, 2])
def test_every_column_word_makes_a_header_in_its_own_column_only(column):
    words = (HEADS, RELATIONS, TAILS)[column]
    base = ["head", "relation", "tail"]
    for w in words:
        fields = base[:column] + [w] + base[column + 1 :]
        assert is_header(fields), fields
        assert is_header([f.upper() for f in fields]), fields
    others = set(HEADS + RELATIONS + TAILS) - set(words)
    for w in sorted(others):
        fields = base[:column] + [w] + base[column + 1 :]
        assert not is_header(fields), fields


@pytest.mark.parametrize(
    "fields,header",
    [
        (("head", "relation", "tail"), True),
        (("subject", "predicate", "object"), True),
        (("source", "edge", "target"), True),
        (("# h", "r", "t"), True),
        (("#:Head:", " Relation ", "TAIL#"), True),
        (("h", "r", "t", "x"), False),
        (("h", "r"), False),
        (("O", "O", "O"), False),
        (("t", "r", "h"), False),
        (("head", "tail", "relation"), False),
        (("heads", "relation", "tail"), False),
        (("HEADX", "relation", "tail"), False),
        (("Xh", "r", "t"), False),
        (("aspirin", "treats", "pain"), False),
    ],
)
def test_a_header_names_head_relation_and_tail_in_that_order(fields, header):
    assert is_header(fields) is header


def test_a_header_line_is_skipped_with_a_note(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("\nsubject\tpredicate\tobject\na\tr\tb\n")
    with log_lines() as lines:
        lt = read_labeled_triples(p)
    assert list(zip(lt.heads, lt.relations, lt.tails)) == [("a", "r", "b")] and lt.lines.tolist() == [3]
    assert lines == [f"{p}:2: skipped the header line 'subject' 'predicate' 'object'"]


def test_only_the_first_line_can_be_a_header(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("a\tr\tb\nhead\trelation\ttail\n")
    with log_lines() as lines:
        lt = read_labeled_triples(p)
    assert lt.heads == ["a", "head"] and lines == []


def test_a_file_of_only_a_header_is_refused(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("h\tr\tt\n\n")
    e = refusal(read_labeled_triples, p)
    assert (e.path, e.line, e.reason) == (str(p), None, "triples file holds only a header line")


def test_duplicates_count_the_lines_repeating_an_earlier_triple():
    lt = LabeledTriples(
        ["a", "a", "a", "b", "a", "a"],
        ["r", "r", "s", "r", "r", "r"],
        ["b", "b", "b", "a", "b", "c"],
        np.arange(6),
        "x",
    )
    assert count_duplicates(lt) == 2  # lines 2 and 5 repeat line 1
    assert count_duplicates(LabeledTriples(["a"], ["r"], ["b"], np.arange(1), "x")) == 0


# --------------------------------------------------------------------------- id maps


def test_an_id_map_file_is_ordered_by_its_index_column(tmp_path):
    p = tmp_path / "node_dict.txt"
    p.write_text("c\t2\n\na\t 0\r\nb\t1\n")
    m = IdMap.read(p)
    assert m.labels == ["a", "b", "c"] and len(m) == 3 and list(m) == ["a", "b", "c"]
    assert [m.id(x) for x in "abc"] == [0, 1, 2]
    m.write(tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_bytes() == b"a\t0\nb\t1\nc\t2\n"


@pytest.mark.parametrize(
    "text,line,reason",
    [
        ("a\t0\n\nb\t0\n", 3, "duplicate index 0 (first on line 1)"),
        ("x\t1\n\na\t0\nb\t1\n", 4, "duplicate index 1 (first on line 1)"),
        ("a\t0\n\nb\t1\na\t2\n", 4, "duplicate label 'a' (first on line 1)"),
        ("a\t0\nb\t-1\n", 2, "index '-1' is not a non-negative integer"),
        ("a\t0\nb\t+1\n", 2, "index '+1' is not a non-negative integer"),
        ("a\t0\nb\t1.0\n", 2, "index '1.0' is not a non-negative integer"),
        ("a\t0\nb\t\u0661\n", 2, "index '\u0661' is not a non-negative integer"),
        ("a\t0\n\nb\t2\n", 3, "index 2 out of range: 2 entries need indices 0..1"),
        ("a\t7\n", 1, "index 7 out of range: 1 entries need indices 0..0"),
        ("a\t0\tz\n", 1, "expected 2 tab-separated fields (label<TAB>index), found 3"),
        ("a\t0\n \t1\n", 2, "field 1 is empty (label<TAB>index)"),
    ],
)
def test_a_bad_id_map_is_refused_word_for_word(tmp_path, text, line, reason):
    p = tmp_path / "node_dict.txt"
    p.write_text(text)
    e = refusal(IdMap.read, p)
    assert (e.path, e.line, e.reason) == (str(p), line, reason)


def test_an_id_map_names_itself_when_empty_or_missing(tmp_path):
    p = tmp_path / "rel_dict.txt"
    p.write_text("\n")
    assert str(refusal(IdMap.read, p)) == f"{p}: id map is empty"
    assert str(refusal(IdMap.read, p, "relation map")) == f"{p}: relation map is empty"
    assert str(refusal(IdMap.read, tmp_path / "no.txt", "entity map")) == f"{tmp_path / 'no.txt'}: entity map not found"


def test_an_id_map_refuses_a_repeated_label():
    e = refusal(IdMap, ["a", "b", "b", "c", "a"])
    assert str(e) == "duplicate label 'b' in id map" and e.path is None


def test_from_labels_numbers_distinct_labels_in_sorted_order():
    assert IdMap.from_labels(iter(["b", "c", "a", "b"])).labels == ["a", "b", "c"]


def test_an_id_map_repr_shows_three_labels_and_the_count():
    assert repr(IdMap(["a", "b", "c"])) == "IdMap(['a', 'b', 'c'], 3 labels)"
    assert repr(IdMap(["a", "b", "c", "d"])) == "IdMap(['a', 'b', 'c', …], 4 labels)"
    assert repr(IdMap([])) == "IdMap([], 0 labels)"


def test_id_maps_are_equal_by_their_labels_in_order():
    assert IdMap(["a", "b"]) == IdMap(["a", "b"])
    assert IdMap(["a", "b"]) != IdMap(["b", "a"])
    assert IdMap(["a", "b"]) != ["a", "b"]


def test_membership_and_contains_all():
    m = IdMap(["a", "b"])
    assert "a" in m and "z" not in m
    mask = m.contains_all(["b", "z", "a"])
    assert mask.tolist() == [True, False, True]
    empty = m.contains_all([])
    assert empty.dtype == bool and empty.shape == (0,)


def test_ids_and_decode_by_hand():
    m = IdMap(["x", "y", "z"])
    ids = m.ids(["z", "x", "z"])
    assert ids.tolist() == [2, 0, 2] and ids.dtype == np.int64
    none = m.ids([])
    assert none.dtype == np.int64 and none.shape == (0,)
    assert m.decode(np.array([2, 0])) == ["z", "x"]


def test_an_unknown_label_names_the_three_closest():
    # ratios 2·M/T against "abcdef": abcdef1 12/13, abcde 10/11, abcd 8/10, abcdxx 8/12, abcxyz 6/12
    m = IdMap(["abcxyz", "abcdxx", "abcd", "abcde", "abcdef1"])
    with pytest.raises(UnknownLabelError) as e:
        m.id("abcdef", "entity")
    assert str(e.value) == "entity 'abcdef' is not in the id map; closest: 'abcdef1', 'abcde', 'abcd'"
    assert isinstance(e.value, KeyError) and isinstance(e.value, DataError)
    with pytest.raises(KeyError) as k:
        m.ids(["abcd", "abcdef"])
    assert str(k.value) == "label 'abcdef' is not in the id map; closest: 'abcdef1', 'abcde', 'abcd'"
    e2 = m.unknown("abcdef")
    assert str(e2) == "label 'abcdef' is not in the id map; closest: 'abcdef1', 'abcde', 'abcd'"


def test_an_unknown_label_with_nothing_close_has_no_hint():
    m = IdMap(["abcxyz", "zzzzzz"])  # 6/12 = 0.5 and 0: both under the 0.6 cutoff
    assert str(m.unknown("abcdef", "relation")) == "relation 'abcdef' is not in the id map"
    with pytest.raises(UnknownLabelError) as e:
        m.id("q")
    assert str(e.value) == "label 'q' is not in the id map"
    with pytest.raises(UnknownLabelError) as e:
        m.ids(["abcxyz", "q", "r"], "relation")
    assert str(e.value) == "relation 'q' is not in the id map"


def test_encode_names_the_first_unknown_label_its_line_and_how_many_more(tmp_path):
    m = IdMap(["a", "b"])
    lines = np.array([3, 5, 8, 9])
    e = refusal(m.encode, ["a", "q", "b", "w"], tmp_path / "f.txt", lines, "entity")
    assert str(e) == f"{tmp_path / 'f.txt'}:5: entity 'q' is not in the id map (and 1 more)"
    e = refusal(m.encode, ["a", "q"], "f.txt", np.array([1, 2]))
    assert str(e) == "f.txt:2: label 'q' is not in the id map"
    e = refusal(m.encode, ["q", "w", "v"])
    assert (e.path, e.line, str(e)) == (None, None, "label 'q' is not in the id map (and 2 more)")
    ok = m.encode(["b", "a"])
    assert ok.tolist() == [1, 0] and ok.dtype == np.int64
    empty = m.encode([])
    assert empty.dtype == np.int64 and empty.shape == (0,)


# --------------------------------------------------------------------------- name dicts, edge maps


def test_a_name_dict_keeps_repeated_names_and_refuses_repeated_indices(tmp_path):
    p = tmp_path / "node_name_dict.txt"
    p.write_text("pain\t1\n\naspirin\t0\r\npain\t2\n")
    assert read_name_dict(p) == {1: "pain", 0: "aspirin", 2: "pain"}
    p.write_text("pain\t1\n\naspirin\t1\n")
    e = refusal(read_name_dict, p)
    assert (e.path, e.line, e.reason) == (str(p), 3, "duplicate index 1")
    p.write_text("pain\n")
    assert refusal(read_name_dict, p).reason == "expected 2 tab-separated fields (name<TAB>index), found 1"
    p.write_text("pain\t0\n\npain\tone\n")
    e = refusal(read_name_dict, p)
    assert (e.path, e.line, e.reason) == (str(p), 3, "index 'one' is not a non-negative integer")
    p.write_text("")
    assert str(refusal(read_name_dict, p)) == f"{p}: name dict is empty"


def test_a_name_dict_is_written_in_index_order(tmp_path):
    p = tmp_path / "names.txt"
    write_name_dict(p, {2: "c c", 0: "a", 10: "a"})
    assert p.read_bytes() == b"a\t0\nc c\t2\na\t10\n"


def test_an_edge_map_is_read_as_descriptions_by_relation_label(tmp_path):
    p = tmp_path / "edge_map.json"
    raw = {
        json.dumps({"predicate": "biolink:affects", "object_direction_qualifier": "increased"}): "predicate:0",
        json.dumps({"predicate": "biolink:treats"}): "predicate:1",
        "plain": "predicate:2",
    }
    write_edge_map(p, raw)
    assert json.loads(p.read_text(encoding="utf-8")) == raw
    assert read_edge_map(p) == {
        "predicate:0": "biolink:affects (object_direction_qualifier=increased)",
        "predicate:1": "biolink:treats",
        "predicate:2": "plain",
    }


def test_a_bad_edge_map_is_refused_word_for_word(tmp_path):
    p = tmp_path / "edge_map.json"
    p.write_text('["predicate:0"]')
    e = refusal(read_edge_map, p)
    assert str(e) == f"{p}: edge map must be a JSON object {{qualifier-json: relation label}}"
    p.write_text('{"k": 3}')
    e = refusal(read_edge_map, p)
    assert (e.path, e.line, e.reason) == (str(p), None, "value for key 'k' must be a string relation label")


@pytest.mark.parametrize(
    "key,text",
    [
        (
            '{"predicate": "biolink:affects", "object_direction_qualifier": "increased"}',
            "biolink:affects (object_direction_qualifier=increased)",
        ),
        ('{"z_q": 1, "predicate": "p", "a_q": "x"}', "p (a_q=x, z_q=1)"),
        ('{"predicate": "p"}', "p"),
        ('{"predicate": 7}', "7"),
        ('{"a": 1}', " (a=1)"),
        ("{}", ""),
        ("[1, 2]", "[1, 2]"),
        ('"quoted"', '"quoted"'),
        ("not json {", "not json {"),
    ],
)
def test_describe_edge_key_by_hand(key, text):
    assert describe_edge_key(key) == text


# --------------------------------------------------------------------------- stems, id triples


def test_triple_file_stem_by_hand():
    assert triple_file_stem(7, "CHEBI:1", "a/b\\c d\te") == "triple_007_CHEBI_1_a_b_c_d_e"
    assert triple_file_stem(1234, "h", "t") == "triple_1234_h_t"
    assert triple_file_stem(3, "h", "t", width=5) == "triple_00003_h_t"
    assert triple_file_stem(0, "a.b-c", "x") == "triple_000_a.b-c_x"


def test_read_triples_builds_sorted_maps_or_uses_the_given_ones(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("c\ts\ta\nb\tr\tc\n")
    ts = read_triples(p)
    assert ts.entities.labels == ["a", "b", "c"] and ts.relations.labels == ["r", "s"]
    assert ts.ids.tolist() == [[2, 1, 0], [1, 0, 2]] and ts.path == str(p)
    assert (len(ts), ts.num_entities, ts.num_relations) == (2, 3, 2)
    assert ts.labels(0) == ("c", "s", "a") and ts.labels(1) == ("b", "r", "c")
    ents, rels = IdMap(["c", "b", "a", "z"]), IdMap(["s", "r"])
    given = read_triples(p, ents, rels)
    assert given.ids.tolist() == [[0, 0, 2], [1, 1, 0]] and given.entities is ents and given.relations is rels
    assert given.num_entities == 4


def test_read_triples_names_an_unknown_relation_with_its_line(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("a\tr\tb\n\na\tq\tb\n")
    e = refusal(read_triples, p, IdMap(["a", "b"]), IdMap(["r"]))
    assert str(e) == f"{p}:3: relation 'q' is not in the id map"
    e = refusal(read_triples, p, IdMap(["a"]), IdMap(["r", "q"]))
    assert str(e) == f"{p}:1: entity 'b' is not in the id map (and 1 more)"
    e = refusal(read_triples, p, IdMap(["b"]), IdMap(["r", "q"]))  # an unknown head
    assert str(e) == f"{p}:1: entity 'a' is not in the id map (and 1 more)"


def test_encode_triples_by_hand():
    lt = LabeledTriples(["b", "a"], ["s", "r"], ["a", "c"], np.array([1, 2]), "f")
    ids = encode_triples(lt, IdMap(["a", "b", "c"]), IdMap(["r", "s"]))
    assert ids.tolist() == [[1, 1, 0], [0, 0, 2]] and ids.dtype == np.int64


def test_a_triple_set_has_no_path_unless_given():
    ts = TripleSet(np.array([[0, 0, 1]]), IdMap(["a", "b"]), IdMap(["r"]))
    assert ts.path is None and ts.labels(0) == ("a", "r", "b")


def test_reciprocals_follow_the_triples_and_leave_them_alone():
    ids = np.array([[0, 1, 2], [3, 0, 4]])
    out = with_reciprocals(ids, 5)
    assert out.tolist() == [[0, 1, 2], [3, 0, 4], [2, 6, 0], [4, 5, 3]]
    assert ids.tolist() == [[0, 1, 2], [3, 0, 4]]


# --------------------------------------------------------------------------- known tails


def test_known_tails_csr_layout_by_hand():
    # keys h·R + r with R = 3: (0,1) → 1, (2,0) → 6, (2,2) → 8
    a = np.array([[2, 0, 5], [0, 1, 4], [2, 0, 1], [0, 1, 4]])
    b = np.array([[2, 2, 0], [2, 0, 5]], dtype=np.int32)
    kt = KnownTails([a, b], 3)
    assert kt.keys.tolist() == [1, 6, 8] and len(kt) == 3
    assert kt.indptr.tolist() == [0, 1, 3, 4] and kt.indptr.dtype == np.int64
    assert kt.tails.tolist() == [4, 1, 5, 0]
    assert kt.num_relations == 3
    h, r = kt.pairs()
    assert h.tolist() == [0, 2, 2] and r.tolist() == [1, 0, 2]
    assert kt.key_rows(np.array([2, 0, 1, 2, 9]), np.array([2, 1, 0, 0, 9])).tolist() == [2, 0, -1, 1, -1]
    assert kt.tails_of(2, 0).tolist() == [1, 5] and kt.tails_of(1, 1).tolist() == []
    assert kt.tails_of(1, 1).dtype == np.int64
    rows, tails = kt.batch(np.array([2, 1, 0, 2]), np.array([0, 1, 1, 0]))
    assert rows.tolist() == [0, 0, 2, 3, 3] and tails.tolist() == [1, 5, 4, 1, 5]


def test_known_tails_keys_do_not_overflow_small_integer_ids():
    # h·R + r for h = 70,000 and R = 40,000 is 2.8e9, past int32's 2,147,483,647
    ids = np.array([[70_000, 39_999, 5], [69_999, 1, 6]], dtype=np.int32)
    kt = KnownTails([ids], 40_000)
    assert kt.keys.tolist() == [69_999 * 40_000 + 1, 70_000 * 40_000 + 39_999]
    assert kt.tails.dtype == np.int64 and kt.keys.dtype == np.int64
    h32, r32 = np.array([70_000, 69_999, 7], np.int32), np.array([39_999, 1, 0], np.int32)
    assert kt.key_rows(h32, r32).tolist() == [1, 0, -1]
    assert kt.tails_of(70_000, 39_999).tolist() == [5]


def test_a_known_tails_index_of_one_key_misses_keys_on_both_sides():
    kt = KnownTails([np.array([[1, 1, 0]])], 2)  # key 3
    assert kt.key_rows(np.array([0, 1, 2, 5]), np.array([0, 1, 1, 1])).tolist() == [-1, 0, -1, -1]


def test_known_tails_of_no_triples_know_nothing():
    # failed before the fix: batch() indexed indptr[1] of an empty index (IndexError)
    kt = KnownTails([np.zeros((0, 3), np.int64)], 2)
    assert len(kt) == 0 and kt.indptr.tolist() == [0]
    assert kt.keys.dtype == np.int64 and kt.tails.dtype == np.int64
    assert all(x.dtype == np.int64 for x in kt.pairs())
    assert kt.key_rows(np.array([0, 1]), np.array([0, 1])).tolist() == [-1, -1]
    assert kt.tails_of(0, 0).tolist() == []
    rows, tails = kt.batch(np.array([0]), np.array([1]))
    assert rows.tolist() == [] and tails.tolist() == []
    assert rows.dtype == np.int64 and tails.dtype == np.int64


def test_known_tails_against_a_loop_over_flat_input():
    rng = np.random.default_rng(1)
    ids = rng.integers(0, [6, 4, 6], size=(40, 3))
    kt = KnownTails([ids.ravel()], 4)  # any shape that reshapes to [N, 3]
    ref: dict = {}
    for h, r, t in ids.tolist():
        ref.setdefault((h, r), set()).add(t)
    for h in range(6):
        for r in range(4):
            assert kt.tails_of(h, r).tolist() == sorted(ref.get((h, r), ()))
    qh, qr = rng.integers(0, 6, 30), rng.integers(0, 4, 30)
    rows, tails = kt.batch(qh, qr)
    want = [(i, t) for i in range(30) for t in sorted(ref.get((int(qh[i]), int(qr[i])), ()))]
    assert list(zip(rows.tolist(), tails.tolist())) == want
    assert sorted(zip(*(x.tolist() for x in kt.pairs()))) == sorted(ref)
