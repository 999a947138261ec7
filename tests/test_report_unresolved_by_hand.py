"""report/unresolved.py by hand: the questions ``tracegraph explain`` could not explain.

Reference: ``unresolved.tsv`` files written here (a header ``line<TAB>question<TAB>reason``, then
one row per question) and the section expected from them written out; a folder without the file
gives no section.
"""

import json

import pytest

from tests.test_report_build_by_hand import FakeRun
from tracegraph.errors import DataError
from tracegraph.report import build as B
from tracegraph.report.unresolved import read_unresolved, unresolved_section

TSV = (
    "line\tquestion\treason\n"
    "3\tsteroids interacts_with eicosanoid\tentity 'steroids' is not in the id map; closest: 'steroid'\n"
    "\n"
    "7\tsteroid\tinteracts_with\tbrain <x>\tentity 'brain <x>' is not in the id map\n"
)


def explained_dir(path, tsv=None, triple=True):
    path.mkdir(parents=True)
    if triple:
        doc = {"test_triple": {"head": "a", "relation": "r", "tail": "b"}, "rows": []}
        (path / "triple_000_a_b_tracin.json").write_text(json.dumps(doc))
    if tsv is not None:
        (path / "unresolved.tsv").write_text(tsv, encoding="utf-8")
    return path


def test_each_row_is_read_with_a_tabbed_question_kept_whole(tmp_path):
    d = explained_dir(tmp_path / "why", TSV)
    assert read_unresolved(d) == [
        ("3", "steroids interacts_with eicosanoid", "entity 'steroids' is not in the id map; closest: 'steroid'"),
        ("7", "steroid\tinteracts_with\tbrain <x>", "entity 'brain <x>' is not in the id map"),  # blank line skipped
    ]
    assert read_unresolved(explained_dir(tmp_path / "none")) == []


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("question\treason\n1\tq\tr\n", 1, "expected the header line"),
        ("", 1, "expected the header line"),
        ("line\tquestion\treason\n1\tq\tr\n2\tonly a question\n", 3, "got 2 field(s)"),
    ],
)
def test_a_malformed_file_is_refused_naming_its_line(tmp_path, text, line, words):
    d = explained_dir(tmp_path / "why", text)
    with pytest.raises(DataError) as err:
        read_unresolved(d)
    assert words in str(err.value) and str(d / "unresolved.tsv") in str(err.value) and f":{line}" in str(err.value)


def test_the_section_lists_line_question_and_reason_escaped(tmp_path):
    d = tmp_path / "why"
    got = unresolved_section([(d, read_unresolved(explained_dir(d, TSV))), (tmp_path / "other", [])])
    assert got.key == "unresolved"
    assert got.html == (
        "<h2>Questions not explained</h2><p><code>tracegraph explain</code> could not explain 2 questions: each row "
        "gives its line in the questions file, the question as written and why.</p>"
        f"<p class='note'>From <code><span class=\"long\">{d}/unresolved.tsv</span></code>.</p>"
        "<table><thead><tr><th>line</th><th>question</th><th>reason</th></tr></thead><tbody>"
        "<tr><td>3</td><td><code>steroids interacts_with eicosanoid</code></td>"
        "<td>entity &#x27;steroids&#x27; is not in the id map; closest: &#x27;steroid&#x27;</td></tr>"
        "<tr><td>7</td><td><code>steroid\tinteracts_with\tbrain &lt;x&gt;</code></td>"
        "<td>entity &#x27;brain &lt;x&gt;&#x27; is not in the id map</td></tr>"
        "</tbody></table>"
    )
    assert unresolved_section([(d, [])]) is None and unresolved_section([]) is None


def page(run, dirs, out):
    return B.report_run(run, out, explanations=dirs).read_text(encoding="utf-8")


def test_the_report_shows_the_section_after_the_explanations_only_when_a_file_exists(tmp_path):
    run = FakeRun(tmp_path / "run")
    with_file = explained_dir(tmp_path / "a", TSV)
    keys = [s.key for s in B.report_sections(run, explanations=[with_file])]
    assert keys == ["cards", "training", "metrics", "explanations", "unresolved", "settings"]
    html = page(run, [with_file], tmp_path / "r.html")
    assert "<h2>Questions not explained</h2>" in html and "<td>7</td>" in html
    without = explained_dir(tmp_path / "b")
    assert [s.key for s in B.report_sections(run, explanations=[without])] == [
        "cards",
        "training",
        "metrics",
        "explanations",
        "settings",
    ]
    assert "Questions not explained" not in page(run, [without], tmp_path / "s.html")


def test_a_folder_where_no_question_was_explained_still_reports_why(tmp_path):
    run = FakeRun(tmp_path / "run")
    only = explained_dir(tmp_path / "a", TSV, triple=False)
    keys = [s.key for s in B.report_sections(run, explanations=[only])]
    assert keys == ["cards", "training", "metrics", "unresolved", "settings"]
    with pytest.raises(DataError, match="no triple_"):  # neither explanations nor unresolved.tsv: refused
        B.report_sections(run, explanations=[explained_dir(tmp_path / "b", triple=False)])
