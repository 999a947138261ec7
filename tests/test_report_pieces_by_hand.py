"""The report's building blocks by hand: cell formatting, escaping, long values that wrap, tables,
section placement and the page (report/html.py), and the necessity section's arithmetic and
sentence (report/necessity.py).

References: the expected HTML and sentences written out here; flips counted from hand-made ranks;
a page with a run's hashes and paths laid out by headless Chromium when it is installed (no
horizontal scroll at 1400 px, and a scroll without the wrapping rule, so the check can fail).
"""

import json
import re
import shutil
import subprocess

import pytest

from tracegraph.errors import DataError
from tracegraph.report import html as H
from tracegraph.report import necessity as N
from tracegraph.report.sections import settings_section


def test_cells_format_numbers_missing_values_and_infinities():
    assert [H.num(x) for x in (1.23456, 2, -0.0004, None, "", float("nan"), float("inf"), -float("inf"))] == [
        "1.235",
        "2.000",
        "-0.000",
        "—",
        "—",
        "—",
        "∞",
        "-∞",
    ]
    assert H.num(7.25, 1) == "7.2" and H.num(7.35, 0) == "7" and H.num("<b>", 2) == "&lt;b&gt;"
    assert [H.sig(x) for x in (0.000123456, 123456.0, None, float("nan"))] == ["0.0001235", "1.235e+05", "—", "—"]
    assert H.sig(3.14159, 2) == "3.1"
    assert H.e("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#x27;" and H.e(3) == "3"


SHA = "f96c80343eca191c177f95cfa9" + "0123456789abcdef" * 2 + "0" * 6  # 64 characters, no space


def test_a_long_token_may_break_anywhere_and_short_words_stay_whole():
    text = f"sha {SHA} in /runs/umls/data/train_with_long_name.txt <b>"
    parts = re.split(r"(<span class=\"long\">.*?</span>)", H.breakable(text))
    assert parts == [
        "sha ",
        f'<span class="long">{SHA}</span>',
        " in ",
        '<span class="long">/runs/umls/data/train_with_long_name.txt</span>',
        " &lt;b&gt;",
    ]
    assert H.breakable("x" * 23) == "x" * 23  # under 24 characters: left alone
    assert H.breakable("<" * 24) == '<span class="long">' + "&lt;" * 24 + "</span>"  # counted before escaping
    rule = re.search(r"\.long\{([^}]*)\}", H.CSS).group(1).split(";")
    assert "overflow-wrap:anywhere" in rule or "word-break:break-all" in rule


def test_a_value_past_its_length_is_cut_in_the_middle_and_whole_in_its_title():
    name = "hepatic fibrosis type 2"
    got = H.clip(name, 12)
    title, shown = re.fullmatch(r'<span title="([^"]*)">(.*)</span>', got).groups()
    assert title == name and shown == "hepati…ype 2" and len(shown) == 12  # 6 + the ellipsis + 5
    assert H.clip(name, 23) == name and H.clip("a<b", 3) == "a&lt;b"
    assert H.clip("x" * 30, 25) == f'<span title="{"x" * 30}"><span class="long">{"x" * 12}…{"x" * 12}</span></span>'


def _layout(page, tmp_path) -> tuple[int, int, str, str]:
    """Scroll and client width of the page laid out by headless Chromium 1400 px wide, and the colours
    of the first setting's name and of the first long value written beside a name."""
    probe = (
        "<script>var d=document.documentElement;function c(s){return getComputedStyle(document.querySelector(s)).color}"
        "document.body.setAttribute('data-w', d.scrollWidth + ' ' + d.clientWidth + ' ' + "
        "c('.settings div>span') + '|' + c('.settings div>span+span.long'))</script></body>"
    )
    path = tmp_path / "probe.html"
    path.write_text(page.read_text(encoding="utf-8").replace("</body>", probe), encoding="utf-8")
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    dom = subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--window-size=1400,2000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    scroll, client, name, value = re.search(r'data-w="(\d+) (\d+) ([^|]*)\|([^"]*)"', dom).groups()
    return int(scroll), int(client), name, value


@pytest.mark.skipif(
    not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")), reason="no Chromium"
)
def test_a_runs_hashes_and_paths_need_no_horizontal_scroll_at_1400_px(tmp_path, monkeypatch):
    config = {
        # a hash in every column of the settings list
        "data_files": {s: {"path": f"/data/runs/umls_2024_full/{s}_triples.txt", "sha256": SHA} for s in "abcdef"},
        "run_id": "a53423cd9cea4a199c52c0e927365bf5",
        "train": {"epochs": 100},
    }
    page = H.write_page(tmp_path / "r.html", [settings_section(config)], title="run")
    scroll, client, name, value = _layout(page, tmp_path)
    assert scroll <= client, (scroll, client)
    assert name != value  # a wrapped value keeps the values' colour, not the names' grey
    monkeypatch.setattr(H, "CSS", H.CSS.replace(".long{", ".unused{"))  # without the rule the hashes overflow
    scroll, client, _, _ = _layout(H.write_page(tmp_path / "r.html", [settings_section(config)], title="run"), tmp_path)
    assert scroll > client


def test_tables_escape_headers_align_numbers_and_mark_rows():
    got = H.table(["a<", "n"], [["x", "1"], ["<i>y</i>", "2"]], classes=["", "default"])
    assert got == (
        "<table><thead><tr><th>a&lt;</th><th>n</th></tr></thead><tbody>"
        '<tr><td>x</td><td class="num">1</td></tr>'
        '<tr class="default"><td><i>y</i></td><td class="num">2</td></tr></tbody></table>'
    )
    assert H.table(["a", "b", "c"], [["1", "2", "3"]], num_from=2) == (
        "<table><thead><tr><th>a</th><th>b</th><th>c</th></tr></thead><tbody>"
        '<tr><td>1</td><td>2</td><td class="num">3</td></tr></tbody></table>'
    )
    assert (
        H.cards([("MRR <x>", "<b>0.5</b>")])
        == "<div class='cards'><div class=\"card\">MRR &lt;x&gt;<b><b>0.5</b></b></div></div>"
    )


def test_sections_go_after_the_named_one_or_at_the_end():
    s = [H.Section("a", "1"), H.Section("b", "2")]
    new = [H.Section("x", "9"), H.Section("y", "8")]
    assert [t.key for t in H.insert_after(s, "a", new)] == ["a", "x", "y", "b"]
    assert [t.key for t in H.insert_after(s, "b", new)] == ["a", "b", "x", "y"]
    assert [t.key for t in H.insert_after(s, "zzz", new)] == ["a", "b", "x", "y"]
    assert [t.key for t in s] == ["a", "b"]  # a new list


def test_a_page_is_self_contained_escaped_and_in_order(tmp_path):
    p = H.write_page(
        tmp_path / "r.html", [H.Section("a", "<p>one</p>"), H.Section("b", "<p>two</p>")], title="T<1>", subtitle="s&s"
    )
    page = p.read_text(encoding="utf-8")
    assert page.lower().startswith("<!doctype html") and "<title>T&lt;1&gt;</title>" in page
    assert "<h1>T&lt;1&gt;</h1><p class='sub'>s&amp;s</p><p>one</p><p>two</p>" in page
    assert "http://" not in page and "https://" not in page and list(tmp_path.iterdir()) == [p]
    assert H.img(b"\x89PNG", 'a "b"') == '<img alt="a &quot;b&quot;" src="data:image/png;base64,iVBORw==">'


def test_cards_in_a_row_and_a_page_without_a_subtitle(tmp_path):
    assert H.cards([("MRR <all>", "<i>0.5</i>"), ("Hits@1", "0.3")]) == (
        "<div class='cards'><div class=\"card\">MRR &lt;all&gt;<b><i>0.5</i></b></div>"
        '<div class="card">Hits@1<b>0.3</b></div></div>'
    )
    page = H.write_page(tmp_path / "r.html", [H.Section("a", "<p>one</p>")], title="T").read_text(encoding="utf-8")
    assert "<h1>T</h1><p>one</p>" in page and "class='sub'" not in page


def nec_doc():
    arms = {}
    for name in ("neighbour@4", "far@4", "path@4", "tracin-margin-path@2", "tracin-margin-path@4"):
        arms[name] = {
            "delta_hits@1": {"mean": 0.4},
            "delta_hits@1_ci95_first_seed": [0.2, 0.6],
            "delta_mrr": {"mean": 0.3},
            "hits@1": {"mean": 0.5},
            "mrr": {"mean": 0.6},
            "mean_rank": {"mean": 2.25},
            "triples_removed": 12,
            "removed_at_fact": 3.5,
        }
    # first seed's per-fact ranks: the reference ranks facts 0-4 first
    ranks = {
        "reference": [1, 1, 1, 1, 1],
        "tracin-margin-path@4": [2, 1, 3.5, 1, 1.5],  # 3 flip
        "neighbour@4": [1, 2, 1, 1, 1],  # 1 flips
        "far@4": [1, 1, 1, 1, 1],  # none
        "path@4": [2, 2, 2, 2, 2],
    }
    seeds = {"0": {k: {"ranks": v} for k, v in ranks.items()}}
    return {"summary": arms, "seeds": seeds, "n_facts": 5}


def test_flips_count_facts_no_longer_ranked_first_on_the_first_seed():
    d = nec_doc()
    assert [N.flips(d, a) for a in ("tracin-margin-path@4", "neighbour@4", "far@4", "path@4")] == [3, 1, 0, 5]
    assert N.flips(d, "tracin-margin-path@2") is None  # no ranks for it
    d["seeds"]["1"] = {"reference": {"ranks": [1] * 5}, "far@4": {"ranks": [9] * 5}}
    assert N.flips(d, "far@4") == 0  # the first seed only
    assert N.flips({"summary": {}}, "far@4") is None


def test_the_headline_speaks_of_the_default_method_at_its_largest_k():
    d = nec_doc()
    assert N.arm_of("tracin-margin-path@4") == ("tracin-margin-path", 4) and N.arm_of("a@b@12") == ("a@b", 12)
    assert N.headline_arm(d) == "tracin-margin-path@4"
    assert N.headline(d) == (
        "Removing the 4 training triples that <b>tracin-margin-path</b> names for each of the 5 predictions "
        "(all at once, then retraining) flips <b>3 of 5</b>: the model no longer ranks them first. Removing 4 "
        "random triples at the same entities flips <b>1</b>; 4 random triples elsewhere in the graph flip <b>0</b>."
    )
    d["seeds"]["1"] = d["seeds"]["0"]
    assert N.headline(d).endswith(" (First training seed.)")
    del d["seeds"]["1"]
    # with the paired excess over the neighbour arm, a verdict on it follows
    arm = d["summary"]["tracin-margin-path@4"]
    for ci, words in (
        ([0.01, 0.5], " That is more than the random triples at the same entities, paired fact by fact beyond"),
        ([-0.5, -0.01], " That is fewer than the random triples at the same entities, paired fact by fact beyond"),
        ([-0.1, 0.2], " That is not clearly more than the random triples at the same entities (paired fact by fact,"),
        ([0.0, 0.2], " That is not clearly more"),  # an interval touching zero does not clear it
    ):
        arm["above_neighbour_hits@1_ci95_first_seed"] = ci
        sentence = N.headline(d)
        assert words in sentence and sentence.index(words) > sentence.index("flip <b>0</b>.")
    assert N.verdict({}) == "" and N.verdict({"above_neighbour_hits@1_ci95_first_seed": None}) == ""
    only_path = {
        "summary": {"far@1": {}, "path@1": {}},
        "n_facts": 2,
        "seeds": {"0": {"reference": {"ranks": [1, 1]}, "path@1": {"ranks": [2, 1]}}},
    }
    assert N.headline_arm(only_path) == "path@1"
    assert N.headline(only_path) == (
        "Removing the 1 training triple that <b>path</b> names for each of the 2 predictions (all at once, then "
        "retraining) flips <b>1 of 2</b>: the model no longer ranks them first."
    )
    assert N.headline_arm({"summary": {"far@4": {}, "neighbour@4": {}}}) is None and N.headline({"summary": {}}) is None


def test_the_section_marks_the_headline_arm_and_formats_each_arm():
    html = N.necessity_section(nec_doc(), files="out/necessity").html
    assert '<tr class="default"><td>tracin-margin-path</td><td class="num">4</td>' in html
    assert html.count('class="default"') == 1
    assert '<td class="num">0.400 (0.200 to 0.600)</td>' in html and '<td class="num">2.2</td>' in html
    assert "<code>out/necessity</code>" in html and "<p class='headline'>Removing the 4" in html
    empty = N.necessity_section({"summary": {}, "note": "no fact <ranked> first"}).html
    assert "<p class='bad'>no fact &lt;ranked&gt; first</p>" in empty and "<table>" not in empty


HEADERS = [
    "arm",
    "k",
    "ΔH@1 (95 % CI)",
    "above far (95 % CI)",
    "above neighbour (95 % CI)",
    "ΔMRR",
    "H@1 after",
    "MRR after",
    "mean rank after",
    "triples removed",
    "at each fact",
]


def _arm(dh, ci, dmrr, h1, mrr, rank, **more):
    out = {"delta_hits@1": {"mean": dh}, "delta_mrr": {"mean": dmrr}, "hits@1": {"mean": h1}}
    out |= {"mrr": {"mean": mrr}, "mean_rank": {"mean": rank}, **more}
    if ci:
        out["delta_hits@1_ci95_first_seed"] = ci
    return out


def test_the_section_word_for_word():
    method = _arm(0.4, [0.2, 0.6], 0.3, 0.5, 0.6, 2.26, triples_removed=12, removed_at_fact=3.5)
    method |= {"above_far_hits@1": 0.25, "above_far_hits@1_ci95_first_seed": [0.1, 0.4]}  # a plain number
    method |= {"above_neighbour_hits@1": {"mean": -0.05}, "above_neighbour_hits@1_ci95_first_seed": [-0.2, 0.1]}
    doc = {
        "summary": {"tracin-margin-path@2": method, "far@2": _arm(0.1, [-0.1, 0.3], 0.05, 0.7, 0.8, 1.5)},
        "seeds": {"0": {"reference": {"ranks": [1, 1, 1]}, "tracin-margin-path@2": {"ranks": [2, 1, 1]}}},
        "n_facts": 3,
        "explain_seconds": 12.4,
        "seconds": 95.6,
        "protocol": {"facts": "the 3 <best> facts"},
    }
    rows = [
        ["tracin-margin-path", "2", "0.400 (0.200 to 0.600)", "0.250 (0.100 to 0.400)", "-0.050 (-0.200 to 0.100)"]
        + ["0.300", "0.500", "0.600", "2.3", "12", "3.5"],
        ["far", "2", "0.100 (-0.100 to 0.300)", "—", "—", "0.050", "0.700", "0.800", "1.5", "—", "—"],
    ]
    sentence = (
        "Removing the 2 training triples that <b>tracin-margin-path</b> names for each of the 3 predictions "
        "(all at once, then retraining) flips <b>1 of 3</b>: the model no longer ranks them first. That is not "
        "clearly more than the random triples at the same entities (paired fact by fact, the 95 % interval of the "
        "difference includes zero): removing triples there breaks these predictions, but the test does not show "
        "that the explanations chose the right ones."
    )
    section = N.necessity_section(doc, files="out/nec")
    assert section.key == "necessity"
    assert section.html == (
        f"<h2>Necessity of the explanations</h2><p>Facts: the 3 &lt;best&gt; facts. {N.PROTOCOL}</p>"
        f"<p class='headline'>{sentence}</p>"
        + H.table(HEADERS, rows, ["default", ""], num_from=1)
        + "<p class='note'>3 facts; explanations 12 s, whole test 96 s. Files: <code>out/nec</code>.</p>"
    )
    # no method arm (no headline), no interval, nothing but the summary
    bare = N.necessity_section({"summary": {"far@1": _arm(0.1, None, 0.0, 1.0, 1.0, 1.0)}})
    assert bare.html == (
        f"<h2>Necessity of the explanations</h2><p>Facts: the test triples the model ranks first. {N.PROTOCOL}</p>"
        + H.table(
            HEADERS, [["far", "1", "0.100", "—", "—", "0.000", "1.000", "1.000", "1.0", "—", "—"]], [""], num_from=1
        )
        + "<p class='note'>? facts.</p>"
    )
    nothing = N.necessity_section({"summary": {}})
    assert nothing.key == "necessity" and nothing.html.endswith("</p><p class='bad'>nothing graded</p>")


def test_headline_edge_cases():
    assert N.headline_arm({}) is None and N.headline({}) is None
    d = nec_doc()
    del d["n_facts"]
    assert N.headline(d) is None  # flips known, but not out of how many
    d = nec_doc()
    del d["seeds"]["0"]["far@4"]  # neighbours' flips known, far's not
    assert N.headline(d).endswith(" Removing 4 random triples at the same entities flips <b>1</b>.")
    d = nec_doc()
    d["seeds"]["1"] = d["seeds"]["0"]
    assert N.headline(d) == N.headline(nec_doc()) + " (First training seed.)"
    d = nec_doc()
    d["seeds"]["0"]["reference"]["ranks"] = [2, 1, 1, 1, 1]  # fact 0 was not first: it cannot flip
    assert N.flips(d, "tracin-margin-path@4") == 2 and N.flips(d, "path@4") == 4


def test_reading_necessity_files(tmp_path):
    doc = nec_doc()
    (tmp_path / "necessity.json").write_text(json.dumps(doc))
    assert N.read_necessity(tmp_path) == doc == N.read_necessity(tmp_path / "necessity.json")
    assert N.read_necessity(doc) is doc
    with pytest.raises(DataError) as e:
        N.read_necessity(tmp_path / "nope")
    assert str(e.value) == (
        f"{tmp_path / 'nope'}: --necessity: necessity.json not found (give the -o directory of "
        "`tracegraph fidelity necessity` or its necessity.json)"
    )
    (tmp_path / "bad.json").write_text('{\n"summary": oops}')
    with pytest.raises(DataError, match=r"bad\.json:2: --necessity: not valid JSON"):
        N.read_necessity(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"rows": []}')
    with pytest.raises(DataError) as e:
        N.read_necessity(tmp_path / "other.json")
    assert str(e.value) == f"{tmp_path / 'other.json'}: --necessity: no 'summary': not a necessity.json"
