"""The explanations table (Kelpie's layout) read and written against files written out by hand."""

import pytest

from tracegraph.errors import DataError
from tracegraph.kg.explain.explanation_tsv import ExplanationTable, read_explanation_table, write_explanation_table


def read_error(tmp_path, text: str) -> str:
    p = tmp_path / "e.tsv"
    p.write_bytes(text.encode())
    with pytest.raises(DataError) as e:
        read_explanation_table(p)
    return str(e.value).replace(str(p), "FILE")


def test_columns_in_any_order_and_case_with_blank_lines_crlf_and_spaces(tmp_path):
    p = tmp_path / "e.tsv"
    text = "Score\tEXPLANATION\ttail\trelation\thead\r\n\r\n1.5\t a|s|x ; y|s|a ;\t b \tr\ta\r\n\n0\t\td\tr\tc\r\n"
    p.write_bytes(text.encode())
    t = read_explanation_table(p)
    assert t.facts == [("a", "r", "b"), ("c", "r", "d")]
    assert t.explanations == [[("a", "s", "x"), ("y", "s", "a")], []]
    assert t.lines == [3, 5] and t.path == str(p)
    assert t.columns == {"score": ["1.5", "0"]}  # the other columns, by their lower-cased names, per row


def test_a_prediction_listed_twice_keeps_its_first_explanation():
    t = ExplanationTable(
        [("a", "r", "b"), ("c", "r", "d"), ("a", "r", "b")], [[("a", "s", "x")], [], [("a", "s", "y")]]
    )
    assert t.of() == {("a", "r", "b"): [("a", "s", "x")], ("c", "r", "d"): []}


@pytest.mark.parametrize(
    "text, message",
    [
        ("\n \n", "FILE: explanations file is empty"),
        (
            "head relation tail explanation\na r b x|y|z\n",
            "FILE:1: the first line must name the columns head, relation, tail, explanation (tab-separated); "
            "missing: head, relation, tail, explanation",
        ),
        (
            "head\trelation\ttail\n",
            "FILE:1: the first line must name the columns head, relation, tail, explanation (tab-separated); "
            "missing: explanation",
        ),
        (
            "head\trelation\ttail\texplanation\n\na\tr\tb\n",
            "FILE:3: expected 4 tab-separated fields as the header names, found 3",
        ),
        ("head\trelation\ttail\texplanation\na\t \tb\tx|y|z\n", "FILE:2: head, relation and tail must not be empty"),
        (
            "head\trelation\ttail\texplanation\na\tr\tb\tx|y|z;x|y\n",
            "FILE:2: explanation fact 'x|y' is not head|relation|tail",
        ),
        (
            "head\trelation\ttail\texplanation\na\tr\tb\tx| |z\n",
            "FILE:2: explanation fact 'x| |z' is not head|relation|tail",
        ),
    ],
)
def test_bad_files_are_one_message_naming_file_and_line(tmp_path, text, message):
    assert read_error(tmp_path, text) == message


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match=r"nope.tsv: explanations file not found"):
        read_explanation_table(tmp_path / "nope.tsv")


def test_written_as_written_by_hand_and_labels_that_cannot_be_written_refused(tmp_path):
    t = ExplanationTable([("a", "r", "b"), ("c", "r", "d")], [[("a", "s", "x"), ("y", "s", "a")], []])
    write_explanation_table(tmp_path / "t.tsv", t, {"score": [0.5, 1]})
    assert (
        tmp_path / "t.tsv"
    ).read_text() == "head\trelation\ttail\texplanation\tscore\na\tr\tb\ta|s|x;y|s|a\t0.5\nc\tr\td\t\t1\n"
    for bad in ("x\ty", "x|y", "x;y", "x\ny"):
        with pytest.raises(DataError, match=r"t2.tsv: label .* holds a tab, '\|' or ';' and cannot be written"):
            write_explanation_table(tmp_path / "t2.tsv", ExplanationTable([("a", "r", "b")], [[("a", bad, "x")]]))
        assert not (tmp_path / "t2.tsv").exists()


def test_an_empty_last_column_and_labels_ending_in_any_letter_read_back(tmp_path):
    p = tmp_path / "e.tsv"
    p.write_text("head\trelation\ttail\texplanation\nAX\tRX\tBX\t\nAX\tRX\tCX\tAX|SX|DX\n")
    t = read_explanation_table(p)
    assert t.facts == [("AX", "RX", "BX"), ("AX", "RX", "CX")] and t.explanations == [[], [("AX", "SX", "DX")]]
    write_explanation_table(tmp_path / "w.tsv", t)  # X is no separator
    assert read_explanation_table(tmp_path / "w.tsv").explanations == t.explanations
