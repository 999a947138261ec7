"""`tracegraph report` / `Run.report` on a tiny UMLS run explained by `tracegraph explain`, checked
against the explanation CSVs read by hand, a naive filtered-rank loop and hand-made necessity results."""

import csv
import json
import math
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import torch

import tracegraph
from tests.conftest import UMLS, run_cli

TINY_MODEL = {"embedding_dim": 32, "embedding_height": 4, "embedding_width": 8, "output_channels": 4}
EXPLAINED = [("steroid", "interacts_with", "eicosanoid"), ("clinical_attribute", "isa", "conceptual_entity")]
EVIL = "<script>alert(1)</script>"  # steroid's display name: it must reach the page as text


# ------------------------------------------------------------------ the page, parsed


class Page(HTMLParser):
    """Every explained-triple block (``div.pred``): its heading, its summary line and its tables
    (one list of rows per table; a cell is (text, the note span's text: the id beside a name))."""

    def __init__(self, text: str):
        super().__init__()
        self.blocks, self.images, self._depth, self._cell, self._note, self._in_note = [], [], 0, None, None, False
        self._where, self._in_hub = None, False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a.get("src", ""))
        if tag == "div" and a.get("class") == "pred":
            self.blocks.append({"h3": "", "sub": "", "tables": []})
            self._depth = 1
        elif tag == "div" and self._depth:
            self._depth += 1
        if not self._depth:
            return
        if tag == "h3":
            self._where = "h3"
        elif tag == "p" and a.get("class") == "sub":
            self._where = "sub"
        elif tag == "table":
            self.blocks[-1]["tables"].append([])
        elif tag == "tr":
            self.blocks[-1]["tables"][-1].append([])
        elif tag in ("td", "th"):
            self._cell, self._note = "", ""
        elif tag == "span" and a.get("class") == "note" and self._cell is not None:
            self._in_note = True
        elif tag == "span" and a.get("class") == "hub":
            self._in_hub = True  # the "hub" tag beside a name is not part of it

    def handle_endtag(self, tag):
        if tag == "div" and self._depth:
            self._depth -= 1
        elif tag in ("h3", "p"):
            self._where = None
        elif tag == "span":
            self._in_note = self._in_hub = False
        elif tag in ("td", "th") and self._cell is not None:
            self.blocks[-1]["tables"][-1][-1].append((self._cell.strip(), self._note.strip()))
            self._cell = None

    def handle_data(self, data):
        if not self._depth or self._in_hub:
            return
        if self._where:
            self.blocks[-1][self._where] += data
        if self._cell is not None:
            self._cell += data
            if self._in_note:
                self._note += data


def ids_of(table) -> list[tuple[str, str, str]]:
    """(head, relation, tail) ids of a table's body rows: the note beside a name, else the cell."""
    return [tuple(note or text for text, note in row[1:4]) for row in table[1:]]


# ------------------------------------------------------------------ the reference: the CSV by hand


def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def shell(walk: str) -> float:
    """tracin-margin-path's shell: a direct edge or two-edge walk is 2, then 3, 4, …, no walk last."""
    w = float(walk)
    return max(w, 2.0) if math.isfinite(w) else math.inf


def expected_tables(rows: list[dict]) -> tuple[list, list]:
    """Proponents: rows whose ordering score is positive, best first (by shell, then score, for
    tracin-margin-path); opponents: negative rows, most negative first."""
    key = "MethodScore" if "MethodScore" in rows[0] else "TracInScore"
    pro = [r for r in rows if float(r[key]) >= 0]
    opp = [r for r in rows if float(r[key]) < 0]
    if "HeadTailWalk" in rows[0]:
        pro.sort(key=lambda r: (shell(r["HeadTailWalk"]), -float(r[key])))
    else:
        pro.sort(key=lambda r: -float(r[key]))
    opp.sort(key=lambda r: float(r[key]))
    tri = lambda r: (r["TrainHead"], r["TrainRel"], r["TrainTail"])
    return [tri(r) for r in pro], [tri(r) for r in opp]


def naive_tail_rank(run, triple, files) -> float:
    """1 + the tails scored above t for (h, r), known true tails (from the files, read by hand) left out."""
    h, r, t = triple
    known = {
        tt
        for f in files
        for hh, rr, tt in (line.split("\t") for line in Path(f).read_text().splitlines() if line)
        if (hh, rr) == (h, r) and tt != t
    }
    ents = run.entities.labels
    with torch.no_grad():
        s = (
            run.model.score_all(torch.tensor([run.entities.id(h)]), torch.tensor([run.relations.id(r)]))[0]
            .double()
            .numpy()
        )
    st = s[run.entities.id(t)]
    return 1.0 + float(sum(1 for e, v in zip(ents, s) if e not in known and e != t and v > st))


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    """A 2-epoch tiny UMLS run; two test triples explained by the default method, one by plain TracIn."""
    root = tmp_path_factory.mktemp("report")
    run_dir = root / "run"
    tracegraph.train(
        {"train": str(UMLS / "train.txt"), "valid": str(UMLS / "valid.txt")},
        test=UMLS / "test.txt",
        output_dir=run_dir,
        epochs=2,
        device="cpu",
        model=TINY_MODEL,
    )
    run = tracegraph.open_run(run_dir)
    names = root / "names.txt"
    names.write_text(
        "".join(f"{EVIL if lab == 'steroid' else lab}\t{i}\n" for i, lab in enumerate(run.entities.labels))
    )
    tests = root / "explain.txt"
    tests.write_text("".join("\t".join(t) + "\n" for t in EXPLAINED))
    dirs = {}
    for name, extra in (("default", []), ("tracin", ["--method", "tracin"])):
        dirs[name] = root / f"expl_{name}"
        res = run_cli(
            [
                "explain",
                "--model-dir",
                run_dir,
                "--train",
                UMLS / "train.txt",
                "--test-triples",
                tests,
                "-o",
                dirs[name],
                "--top-k",
                "6",
                "--node-name-dict",
                names,
                "--device",
                "cpu",
                *extra,
            ]
        )
        assert res.exit_code == 0, res.output
    return run_dir, dirs


@pytest.fixture(scope="module")
def page(explained, tmp_path_factory):
    run_dir, dirs = explained
    out = tmp_path_factory.mktemp("page") / "report.html"
    res = run_cli(
        [
            "report",
            run_dir,
            "--explanations",
            dirs["default"],
            "--explanations",
            dirs["tracin"],
            "-o",
            out,
            "--top",
            "10",
            "--device",
            "cpu",
        ]
    )
    assert res.exit_code == 0, res.output
    return out.read_text(encoding="utf-8")


# ------------------------------------------------------------------ the page


def test_report_shows_each_explained_triple_with_its_proponent_and_opponent_tables(explained, page):
    _, dirs = explained
    blocks = Page(page).blocks
    files = [p for d in ("default", "tracin") for p in sorted(dirs[d].glob("triple_*_tracin.csv"))]
    assert len(blocks) == len(files) == 4
    for block, path in zip(blocks, files):
        rows = csv_rows(path)
        test = (rows[0]["TestHead"], rows[0]["TestRel"], rows[0]["TestTail"])
        assert test in EXPLAINED and test[2] in block["h3"] and test[1] in block["h3"], block["h3"]
        pro, opp = expected_tables(rows)
        tables = block["tables"]
        assert len(tables) == (2 if opp else 1), path
        assert ids_of(tables[0]) == pro[:10], path
        if opp:
            assert ids_of(tables[1]) == opp[:5], path
        header = [text for text, _ in tables[0][0]]
        assert header[-1] == ("TracIn, this answer alone" if "MethodScore" in rows[0] else "TracIn")
        assert ("head–tail walk" in header) == ("HeadTailWalk" in rows[0])


def test_report_ranks_each_explained_triple_like_a_naive_filtered_loop(explained, page):
    run_dir, _ = explained
    run = tracegraph.open_run(run_dir, device="cpu")
    files = [UMLS / "train.txt", UMLS / "valid.txt", UMLS / "test.txt"]
    for block in Page(page).blocks:
        triple = next(t for t in EXPLAINED if t[2] in block["h3"])
        shown = float(re.search(r"filtered tail rank ([0-9.]+)", block["sub"]).group(1))
        assert shown == naive_tail_rank(run, triple, files), (triple, block["sub"])


def test_report_metrics_match_a_naive_mrr_over_the_test_file(explained, page):
    run_dir, _ = explained
    run = tracegraph.open_run(run_dir, device="cpu")
    files = [UMLS / "train.txt", UMLS / "valid.txt", UMLS / "test.txt"]
    test = [tuple(line.split("\t")) for line in (UMLS / "test.txt").read_text().splitlines() if line]
    isa = [t for t in test if t[1] == "isa"]
    mrr = np.mean([1 / naive_tail_rank(run, t, files) for t in isa])
    row = page[page.index("<td>isa</td>") :].split("</tr>")[0]  # relation, test triples, MRR tail, …
    cells = [c.split(">")[-1] for c in row.split("</td>")][:3]
    assert cells[1] == str(len(isa)) and cells[2] == f"{mrr:.3f}", (cells, mrr)
    assert "computed now on the run's test file" in page


def test_report_escapes_names_and_needs_no_network(page):
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http://" not in page and "https://" not in page and "<link" not in page
    images = Page(page).images
    assert images and all(src.startswith("data:image/png;base64,") for src in images)


def test_report_reads_the_role_rank_and_score_explain_records(explained, tmp_path):
    """Files with a Role column and the test triple's rank and score: the page shows those, not its own."""
    run_dir, dirs = explained
    d = tmp_path / "expl"
    shutil.copytree(dirs["tracin"], d)
    path = sorted(d.glob("triple_000_*_tracin.json"))[0]
    doc = json.loads(path.read_text())
    doc["test_triple"].update(rank=7.0, score=-0.25)
    for i, row in enumerate(doc["rows"]):
        row["Role"] = "opponent" if i == 0 else "proponent"  # the best row declared an opponent
    path.write_text(json.dumps(doc))
    out = tracegraph.open_run(run_dir, device="cpu").report(tmp_path / "r.html", explanations=[d])
    block = Page(out.read_text(encoding="utf-8")).blocks[0]
    assert (
        "filtered tail rank 7;" in block["sub"] and "score 0.438 (sigmoid of the model's logit -0.25)" in block["sub"]
    )
    first = doc["rows"][0]
    opponents = ids_of(block["tables"][1])
    assert (first["TrainHead"], first["TrainRel"], first["TrainTail"]) in opponents
    assert (first["TrainHead"], first["TrainRel"], first["TrainTail"]) not in ids_of(block["tables"][0])


# ------------------------------------------------------------------ necessity


def _arm(d, above=None, ranks=None):
    a = {
        "delta_hits@1": {"mean": d},
        "delta_mrr": {"mean": d / 2},
        "hits@1": {"mean": 1 - d},
        "mrr": {"mean": 1 - d / 2},
        "mean_rank": {"mean": 1 + d},
        "triples_removed": 8,
        "removed_at_fact": 3.5,
        "delta_hits@1_ci95_first_seed": [max(d - 0.25, 0.0), min(d + 0.25, 1.0)],
    }
    if above is not None:
        a |= {"above_far_hits@1": {"mean": above}, "above_far_hits@1_ci95_first_seed": [above - 0.25, above + 0.25]}
    return a


def test_necessity_section_shows_intervals_above_far_and_counts_flips(explained, tmp_path):
    run_dir, _ = explained
    nec = {
        "n_facts": 4,
        "protocol": {"facts": "<given>"},
        "summary": {
            "neighbour@4": _arm(0.25, 0.25),
            "far@4": _arm(0.0),
            "tracin-margin-path@4": _arm(0.5, 0.5),
            "path@4": _arm(0.25, 0.25),
        },
        "seeds": {
            "0": {
                "reference": {"ranks": [1, 1, 1, 1]},
                "neighbour@4": {"ranks": [1, 3, 1, 1]},
                "far@4": {"ranks": [1, 1, 1, 1]},
                "tracin-margin-path@4": {"ranks": [2, 1, 9, 1]},
                "path@4": {"ranks": [1, 1, 1, 4]},
            }
        },
    }
    (tmp_path / "nec").mkdir()
    (tmp_path / "nec" / "necessity.json").write_text(json.dumps(nec))
    res = run_cli(["report", run_dir, "--necessity", tmp_path / "nec", "-o", tmp_path / "r.html", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    section = page[page.index("Necessity of the explanations") :]
    # flips counted by hand from the ranks: 2 of 4 for the default, 1 for neighbour, 0 for far
    assert "flips <b>2 of 4</b>" in section and "same entities flips <b>1</b>" in section
    assert "elsewhere in the graph flip <b>0</b>" in section
    row = section[section.index("<td>tracin-margin-path</td>") :].split("</tr>")[0]
    assert "0.500 (0.250 to 0.750)" in row and row.count("0.500 (0.250 to 0.750)") == 2  # ΔH@1 and above far
    assert "&lt;given&gt;" in section and "<given>" not in page


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("case", ["no-dir", "bad-json", "not-html", "no-necessity"])
def test_report_bad_input_is_one_error_line_and_no_file(explained, tmp_path, case):
    run_dir, dirs = explained
    d = tmp_path / "expl"
    shutil.copytree(dirs["default"], d)
    args, words = ["--explanations", d], []
    if case == "no-dir":
        args, words = ["--explanations", tmp_path / "missing"], ["--explanations", "missing"]
    elif case == "bad-json":
        bad = sorted(d.glob("triple_001_*_tracin.json"))[0]
        bad.write_text('{"test_triple": {\n  "head": oops}')
        words = [bad.name + ":2", "not valid JSON"]
    elif case == "no-necessity":
        args, words = [*args, "--necessity", tmp_path / "nowhere.json"], ["--necessity", "nowhere.json"]
    out = tmp_path / ("r.pdf" if case == "not-html" else "r.html")
    if case == "not-html":
        words = ["-o", "r.pdf", ".html"]
    res = run_cli(["report", run_dir, *args, "-o", out, "--device", "cpu"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    assert all(w in lines[0] for w in words), (words, lines[0])
    assert not out.exists() and not list(tmp_path.glob(".r.*"))


# ------------------------------------------------------------------ the demo writes with the same code


def _recovery(default=(0.6, 0.5), path=(0.4, 0.3)):
    figs = lambda mrr, map_: {
        "mrr": {"mean": mrr, "std": 0.1},
        "map": {"mean": map_, "std": 0.1},
        **{k: {"mean": 0.5, "std": 0.1} for k in ("hits@1", "hits@3", "hits@10", "recall@10")},
    }
    summ = {
        "tracin": figs(0.2, 0.2),
        "tracin-margin-path": figs(*default),
        "random": figs(0.1, 0.1),
        "degree": figs(0.05, 0.05),
        "path": figs(*path),
    }
    return {
        "summary": summ,
        "graded": 2,
        "mean_candidates": 4.0,
        "mechanism_edge_coverage": 1.0,
        "influence": {"loss": "logit", "checkpoints": [{}, {}]},
        "definition": {"candidates": "<c>", "relevant": "r", "ties": "t", "baselines": {"degree": "d", "path": "p"}},
    }


def test_demo_page_tags_planted_edges_in_the_general_explained_section(explained, page, tmp_path):
    from tracegraph.kg.demo.report import write_report

    run_dir, dirs = explained
    first = csv_rows(sorted(dirs["default"].glob("triple_000_*_tracin.csv"))[0])
    pro, opp = expected_tables(first)
    marks = {EXPLAINED[0]: {pro[1], opp[0]} if opp else {pro[1]}}
    metrics = {
        s: {"mrr": 0.5, "mr": 2.0, "hits@1": 0.5, "hits@3": 1.0, "hits@10": 1.0} for s in ("tail", "head", "both")
    }
    out = write_report(
        tmp_path / "demo.html",
        run=tracegraph.open_run(run_dir, device="cpu"),
        explanations=dirs["default"],
        metrics=metrics,
        counts={"test": 2},
        marks=marks,
        fidelity={"recovery": _recovery(), "necessity": {"summary": {}, "note": "<none>"}},
        settings={"x": "<y>"},
        stage_seconds={"train": 1.0},
        n_checkpoints=2,
    )
    text = out.read_text(encoding="utf-8")
    demo_blocks, general = Page(text).blocks, Page(page).blocks[:2]
    drop_relation = lambda b: [[row[:2] + row[3:] for row in table] for table in b["tables"]]  # tags sit there
    assert [drop_relation(b) for b in demo_blocks] == [drop_relation(b) for b in general]  # same rows, same order
    block = text[
        text.index('<div class="pred">') : text.index('<div class="pred">', text.index('<div class="pred">') + 1)
    ]
    assert block.count('<tr class="mark">') == len(marks[EXPLAINED[0]])
    assert "&lt;none&gt;" in text and "&lt;y&gt;" in text and "&lt;c&gt;" in text and "<none>" not in text
    assert "http://" not in text and "https://" not in text


def test_questions_explain_set_aside_are_listed_on_the_report(explained, tmp_path):
    run_dir, _ = explained
    questions = tmp_path / "q.txt"
    questions.write_text("\t".join(EXPLAINED[0]) + "\n" + "steroidz\tinteracts_with\teicosanoid\n")
    out = tmp_path / "expl"
    res = run_cli(
        [
            "explain",
            "--model-dir",
            run_dir,
            "--test-triples",
            questions,
            "-o",
            out,
            "--top-k",
            "3",
            "--device",
            "cpu",
            "--skip-unresolved",
        ]
    )
    assert res.exit_code == 0, res.output
    page = tmp_path / "r.html"
    assert run_cli(["report", run_dir, "--explanations", out, "-o", page, "--device", "cpu"]).exit_code == 0
    text = page.read_text(encoding="utf-8")
    section = text.split("Questions not explained", 1)[1]
    assert "steroidz" in section and "closest" in section  # the question as asked, and why it was set aside
    assert section.split("</table>", 1)[0].count("<td><code>") == 1  # one row: the explained question is not there
