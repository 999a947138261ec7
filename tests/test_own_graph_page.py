"""docs/own-graph.md runs as written on the KGX TSV pair it ships (docs/data/drugs_*.tsv): every bash
block in order, in a folder holding only the two files; an output block right after a command is
what that command prints; the page's claims about the example (its sizes, its quirks, the held-out
fact it explains, what predicate:0 stands for) hold; its Python block runs too."""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import run_cli
from tracegraph.kg.data.triples import read_edge_map

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "own-graph.md"
DATA = ROOT / "docs" / "data"


def blocks() -> list[tuple[str, str, bool]]:
    """The page's fenced blocks in order: (language, body, whether it follows the previous block directly)."""
    text = PAGE.read_text()
    found = []
    end = 0
    for m in re.finditer(r"^```(\w+)\n(.*?)^```\n", text, flags=re.S | re.M):
        found.append((m.group(1), m.group(2), not text[end : m.start()].strip() and bool(found)))
        end = m.end()
    return found


def run_line(line: str, cwd: Path) -> str:
    """One command: ``tracegraph …`` in-process (stdout then stderr), anything else in bash."""
    if line.startswith("tracegraph "):
        res = run_cli(shlex.split(line, comments=True)[1:])
        assert res.exit_code == 0, (line, res.output[-2000:])
        return res.stdout + res.stderr
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, (line, done.stderr[-2000:])
    return done.stdout


def test_the_example_is_what_the_page_says_it_is():
    nodes = pd.read_csv(DATA / "drugs_nodes.tsv", sep="\t", dtype=str, keep_default_na=False, quoting=3)
    edges = pd.read_csv(DATA / "drugs_edges.tsv", sep="\t", dtype=str, keep_default_na=False, quoting=3)
    assert nodes.id.nunique() == 47 and nodes.duplicated().sum() == 1 and len(nodes) == 48
    assert (nodes.category.str.split("|").str[0] == "biolink:SmallMolecule").groupby(nodes.id).first().sum() == 14
    assert len(edges) == 85 and (edges.negated.str.lower() == "true").sum() == 2
    prefixes = set(nodes.id.str.split(":").str[0])
    assert prefixes == {"CHEBI", "NCBIGene", "MONDO", "HP", "GO"}
    text = PAGE.read_text()
    assert "hand-made graph of 47 nodes" in text and "in 85 textbook edges" in text and "14 drugs" in text


@pytest.mark.slow
def test_the_page_runs_as_written(tmp_path, monkeypatch, capsys):
    for f in ("drugs_nodes.tsv", "drugs_edges.tsv"):
        shutil.copy(DATA / f, tmp_path / f)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "cpu")
    printed = {}
    previous = None
    for language, body, follows in blocks():
        if language == "bash":
            out = ""
            for line in body.replace("\\\n", " ").splitlines():
                if line.strip():
                    out += run_line(line, tmp_path)
            previous = (body, out)
        elif language == "text" and follows and previous:  # what the command above prints
            assert previous[1] == body, (previous[0], previous[1])
            printed[previous[0].split()[2]] = body
        elif language == "python":
            exec(compile(body, str(PAGE), "exec"), {})
    assert set(printed) == {"import-kgx", "split"}

    # the page's claims about what came out
    assert "CHEBI:9150\tpredicate:0\tHP:0003124\n" in (tmp_path / "kg" / "test.txt").read_text()
    emap = read_edge_map(tmp_path / "kg" / "edge_map.json")
    assert emap["predicate:0"] == "biolink:treats"
    assert emap["predicate:1"] == (
        "biolink:affects (object_aspect_qualifier=activity, object_direction_qualifier=decreased)"
    )
    assert sorted(p.name for p in (tmp_path / "runs/drugs/checkpoints").glob("epoch_*.pt")) == [
        "epoch_0020.pt",
        "epoch_0040.pt",
        "epoch_0060.pt",
    ]
    (csv,) = (tmp_path / "explanations").glob("triple_000_*_tracin.csv")
    why = pd.read_csv(csv)
    assert set(why.TestHead_label) == {"simvastatin"} and set(why.TestTail_label) == {"Hypercholesterolemia"}
    assert set(why.Role) == {"proponent", "opponent"} and len(why) <= 10
    for page in ("report.html", "report-py.html"):
        html = (tmp_path / page).read_text()
        assert "simvastatin" in html and "Hypercholesterolemia" in html
    assert "biolink:treats" in capsys.readouterr().out  # the Python block's predictions, by name
