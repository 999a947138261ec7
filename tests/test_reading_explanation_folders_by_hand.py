"""report/explanations.py by hand: reading ``tracegraph explain`` folders written by hand, in the
current layout and in the older ones (no ``Role`` column, no triple list in ``summary.json``, no
``summary.json`` at all), and every refusal with the file it names.

Reference: the folders below, and the documented rule for files without ``Role``: a row opposes
when its ordering score (``MethodScore`` if present, else ``TracInScore``) is negative.
"""

import json

import pytest

from tracegraph.errors import DataError
from tracegraph.report.explanations import read_explanations


def row(head, tail, tracin, method=None, role=None, **extra):
    r = {"TestHead": "a", "TestRel": "treats", "TestTail": "b", "TrainHead": head, "TrainRel": "r", "TrainTail": tail}
    r["TracInScore"] = tracin
    if method is not None:
        r["MethodScore"] = method
    if role is not None:
        r["Role"] = role
    return {**r, **extra}


def write(d, name, doc):
    d.mkdir(exist_ok=True)
    (d / name).write_text(json.dumps(doc))


def test_the_current_layout_reads_roles_ranks_and_the_summarys_order(tmp_path):
    d = tmp_path / "why"
    rows = [
        row("a", "x", 0.1, 3.0, "proponent"),
        row("a", "y", 0.5, 1.0, "proponent"),
        row("b", "z", 0.9, -2.0, "opponent"),
        row("b", "w", -0.3, -5.0, "opponent"),
    ]
    write(
        d,
        "t1.json",
        {
            "test_triple": {"head": "a", "relation": "treats", "tail": "b", "rank": 2, "score": 1.5, "index": 7},
            "rows": rows,
            "method": "tracin-margin",
            "loss": "logit",
            "side": "tail",
            "rival": {"tail": "c"},
            "top_k": 2,
        },
    )
    write(d, "t0.json", {"test_triple": {"head": "c", "relation": "treats", "tail": "d"}, "rows": []})
    write(
        d,
        "summary.json",
        {"triples": [{"json": "t1.json"}, {"json": "t0.json", "rank": 4.5, "score": -0.25}], "method": "tracin"},
    )
    first, second = read_explanations(d)
    assert first.triple == ("a", "treats", "b") and (first.method, first.loss, first.side, first.index) == (
        "tracin-margin",
        "logit",
        "tail",
        7,
    )
    assert (first.rank, first.score, first.rank_source, first.rival) == (2.0, 1.5, "explain", {"tail": "c"})
    assert first.meta == {"method": "tracin-margin", "loss": "logit", "side": "tail", "top_k": 2}
    assert first.order_column == "MethodScore"
    assert list(first.proponents["TrainTail"]) == ["x", "y"]  # the file's order
    assert list(first.opponents["TrainTail"]) == ["w", "z"]  # the most negative first
    # the summary's entry fills what the triple's own JSON lacks; the summary's method is the default
    assert second.triple == ("c", "treats", "d") and (second.rank, second.score) == (4.5, -0.25)
    assert second.method == "tracin" and second.side == "tail" and second.rows.empty and second.loss is None
    assert list(second.rows.columns) == ["TrainHead", "TrainRel", "TrainTail", "TracInScore", "Role"]
    assert second.names == ("c", "treats", "d") and second.rank_source == "explain"


def test_files_without_roles_take_them_from_the_sign_of_the_ordering_score(tmp_path):
    d = tmp_path / "old"
    # MethodScore present: its sign decides, whatever TracIn says; zero supports
    write(
        d,
        "triple_000_a_b_tracin.json",
        {"rows": [row("a", "x", -1.0, 2.0), row("a", "y", 1.0, -2.0), row("a", "z", 1.0, 0.0)]},
    )
    # TracInScore alone
    write(d, "triple_001_a_b_tracin.json", {"rows": [row("a", "x", -1.0), row("a", "y", 0.0)]})
    with_method, plain = read_explanations(d)  # no summary.json: the files present, by name
    assert list(with_method.rows["Role"]) == ["proponent", "opponent", "proponent"]
    assert list(plain.rows["Role"]) == ["opponent", "proponent"] and plain.order_column == "TracInScore"
    # no test_triple: the triple comes from the first row; no rank or score recorded
    assert with_method.triple == ("a", "treats", "b") and with_method.rank is None and with_method.rank_source == ""
    assert with_method.method == "tracin" and with_method.meta == {}


def test_label_columns_name_the_triple_for_display(tmp_path):
    d = tmp_path / "named"
    r = row("a", "x", 1.0, TestHead_label="aspirin", TestRel_label="treats", TestTail_label="pain")
    write(
        d, "triple_000_a_b_tracin.json", {"test_triple": {"head": "a", "relation": "treats", "tail": "b"}, "rows": [r]}
    )
    (t,) = read_explanations(d)
    assert t.triple == ("a", "treats", "b") and t.names == ("aspirin", "treats", "pain")


def test_a_summary_without_a_triple_list_names_its_json_files(tmp_path):
    d = tmp_path / "mid"
    for i in (0, 1, 2):
        write(
            d, f"triple_00{i}_tracin.json", {"test_triple": {"head": f"h{i}", "relation": "r", "tail": "t"}, "rows": []}
        )
    write(d, "summary.json", {"files": ["triple_002_tracin.csv", "triple_002_tracin.json", "triple_000_tracin.json"]})
    assert [t.head for t in read_explanations(d)] == ["h2", "h0"]  # the summary's JSON files, in its order


@pytest.mark.parametrize(
    "setup,message",
    [
        (lambda d: None, "--explanations: not a directory (give the -o directory of `tracegraph explain`)"),
        (
            lambda d: d.mkdir(),
            "--explanations: no triple_*_tracin.json here (give the -o directory of `tracegraph explain`)",
        ),
        (
            lambda d: write(d, "summary.json", {"triples": [{"json": "gone.json"}]}),
            "summary.json names this file but it is missing",
        ),
        (
            lambda d: write(d, "triple_000_tracin.json", {"rows": [{"a": 1}]}),
            "not an explanation file: its rows lack TestHead/TestRel/TestTail/TracInScore",
        ),
        (
            lambda d: write(d, "triple_000_tracin.json", {"rows": []}),
            "no test_triple and no rows: cannot tell which triple this explains",
        ),
        (lambda d: write(d, "triple_000_tracin.json", [1, 2]), "expected a JSON object"),
    ],
)
def test_refusals_name_the_file(tmp_path, setup, message):
    d = tmp_path / "why"
    setup(d)
    with pytest.raises(DataError) as e:
        read_explanations(d)
    assert str(e.value).endswith(": " + message)
    assert str(e.value).startswith(str(d))


def test_broken_json_names_its_line(tmp_path):
    d = tmp_path / "why"
    d.mkdir()
    (d / "triple_000_tracin.json").write_text('{\n  "rows": [\n  oops\n]}')
    with pytest.raises(DataError) as e:
        read_explanations(d)
    assert str(e.value).startswith(f"{d / 'triple_000_tracin.json'}:3: not valid JSON (")


def test_what_a_triples_json_lacks_comes_from_its_summary_entry_and_its_own_columns_are_kept(tmp_path):
    d = tmp_path / "why"
    rows = [
        row("a", "x", -1.0, 0.0, "opponent", TestHead_label="aspirin", TestRel_label="may treat"),
        row("a", "y", 2.0, 1.0, "proponent", TestHead_label="aspirin", TestRel_label="may treat"),
    ]
    write(d, "t.json", {"test_triple": {"head": "a", "relation": "treats", "tail": "b"}, "rows": rows, "side": "head"})
    entry = {"json": "t.json", "index": 3, "rival": {"head": "q"}}
    write(d, "summary.json", {"triples": [entry], "method": "relatif", "loss": "score"})
    (t,) = read_explanations(d)
    assert list(t.rows["Role"]) == ["opponent", "proponent"]  # as written, though a zero score would support
    assert (t.method, t.loss, t.side, t.index, t.rival) == ("relatif", "score", "head", 3, {"head": "q"})
    assert t.names == ("aspirin", "may treat", "b") and t.source == d / "t.json"  # a missing label: the id


def test_a_single_row_with_only_the_four_needed_columns_is_an_explanation(tmp_path):
    d = tmp_path / "bare"
    bare = {"TestHead": "a", "TestRel": "r", "TestTail": "b", "TracInScore": -0.5}
    write(d, "triple_000_tracin.json", {"rows": [bare]})
    (t,) = read_explanations(d)
    assert t.triple == ("a", "r", "b") and list(t.rows["Role"]) == ["opponent"] and t.names == ("a", "r", "b")


def test_a_file_that_is_not_utf8_cannot_be_read(tmp_path):
    d = tmp_path / "why"
    d.mkdir()
    (d / "triple_000_tracin.json").write_bytes(b'{"rows": [], "note": "caf\xe9"}')
    with pytest.raises(DataError) as e:
        read_explanations(d)
    assert str(e.value).startswith(f"{d / 'triple_000_tracin.json'}: cannot read: 'utf-8' codec can't decode")


def test_tied_opponents_keep_the_files_order_the_most_negative_first(tmp_path):
    """Opponents are sorted by their score, ties in the order of the file (a stable sort; 60 rows,
    past the size where a quicksort stays an insertion sort)."""
    d = tmp_path / "ties"
    scores = [-float(1 + (i * 7) % 3) for i in range(60)]  # -1, -2, -3 interleaved
    rows = [row("a", f"t{i:02d}", s, role="opponent") for i, s in enumerate(scores)]
    write(
        d, "triple_000_a_b_tracin.json", {"test_triple": {"head": "a", "relation": "treats", "tail": "b"}, "rows": rows}
    )
    (only,) = read_explanations(d)
    want = [f"t{i:02d}" for v in (-3.0, -2.0, -1.0) for i, s in enumerate(scores) if s == v]
    assert list(only.opponents["TrainTail"]) == want
