"""The demo's figures in the README, the demo page and the benchmarks page are benchmarks/results/demo.json's."""

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("demo_replicates", ROOT / "benchmarks" / "demo_replicates.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
RES = json.loads((ROOT / "benchmarks" / "results" / "demo.json").read_text())
PAGE = (ROOT / "docs" / "demo.md").read_text()
NUMBER = re.compile(r"[−+-]?\d+\.\d+")


def numbers(text: str) -> set[str]:
    return {n.replace("−", "-").lstrip("+") for n in NUMBER.findall(text)}


def section(page: str, title: str) -> str:
    return page.split(title, 1)[1].split("\n## ", 1)[0]


def test_the_demo_page_blocks_are_rendered_from_the_results_file():
    for name, block in bench.page_blocks(RES).items():
        shown = PAGE.split(f"<!-- {name} -->", 1)[1].split(f"<!-- /{name} -->", 1)[0]
        assert shown.strip() == block.strip(), f"docs/demo.md's {name} block differs from the results file"


def test_every_figure_in_the_demo_pages_prose_is_in_its_tables():
    tables = "".join(bench.page_blocks(RES).values())
    for title in ("### Figures of the current demo", "## Ground-truth recovery", "## Necessity in the demo"):
        prose = re.sub(r"<!-- (demo-[a-z]+) -->.*?<!-- /\1 -->", "", section(PAGE, title), flags=re.S)
        # passages quoting the UMLS evidence page: tests/test_benchmarks_page_matches_results.py holds them
        prose = "\n\n".join(p for p in re.split(r"\n\s*\n|\n(?=- )", prose) if "demo-evidence.md" not in p)
        missing = numbers(prose) - numbers(tables)
        assert not missing, f"figures under {title!r} that the results file does not hold: {sorted(missing)}"


def test_readme_demo_row_reads_the_results_file():
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if "[the demo]" in line)
    s0, lead = RES["seeds"]["0"], RES["across_seeds"]["lead_over"]["tracin-margin-path"]["neighbour"]
    nec = s0["necessity"]
    assert numbers(row) == {f"{s0['test']['mrr_tail']:.3f}", f"{lead['mean']:.2f}", *(f"{x:.2f}" for x in lead["ci95"])}
    assert f"flips {nec['tracin-margin-path']['flipped']} of {s0['n_facts']}" in row
    assert f"random neighbours {nec['neighbour']['flipped']}, random far {nec['far']['flipped']}" in row
    assert f"{len(RES['seeds'])} seeds" in row


def test_benchmarks_page_demo_rows_read_the_results_file():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    s0, acr = RES["seeds"]["0"], RES["across_seeds"]
    rec = next(line for line in page.splitlines() if line.startswith("| recovery of the demo's"))
    want = {
        f"{s0['recovery'][m][q]:.3f}" for m in ("tracin-margin-path", "path", "tracin-path") for q in ("mrr", "map")
    }
    assert numbers(rec) == want and RES["commit"] in rec
    nec = next(line for line in page.splitlines() if line.startswith("| necessity on the demo"))
    lead = acr["lead_over"]["tracin-margin-path"]["neighbour"]
    want = {f"{s0['necessity'][a]['delta_hits@1']:.2f}" for a in ("tracin-margin-path", "neighbour", "far")}
    want |= {f"{lead['mean']:.2f}", *(f"{x:.2f}" for x in lead["ci95"])}
    assert numbers(nec) == want and RES["commit"] in nec


def test_the_lead_is_the_paired_difference_of_facts_kept_first():
    def seed(default, neighbour):
        return {"necessity": {"tracin-margin-path": {"ranks": default}, "neighbour": {"ranks": neighbour}}}

    per_seed = {"0": seed([1, 2, 3, 1], [1, 1, 2, 4]), "1": seed([5, 1], [1, 1])}
    got = bench.lead(per_seed, "neighbour", draws=500)
    naive = {}
    for s, r in per_seed.items():
        d, n = r["necessity"]["tracin-margin-path"]["ranks"], r["necessity"]["neighbour"]["ranks"]
        naive[s] = sum((a > 1) - (b > 1) for a, b in zip(d, n)) / len(d)
    assert got["per_seed"] == pytest.approx(naive)
    assert got["mean"] == pytest.approx(np.mean(list(naive.values())))
    assert got["ci95"][0] <= got["mean"] <= got["ci95"][1]


def test_the_treats_share_counts_the_removed_triples_by_relation():
    assert bench.treats_share({"removed_relations": {"biolink:treats": 3, "biolink:affects": 1}}) == 0.75
    assert bench.treats_share({"removed_relations": {}}) == 0.0
    s0 = RES["seeds"]["0"]["necessity"]["tracin-margin-path"]
    assert sum(s0["removed_relations"].values()) == s0["triples_removed"]  # every removed triple counted once


def test_the_explaining_pages_recovery_figures_are_the_demo_pages():
    text = (ROOT / "docs" / "explaining.md").read_text()
    passage = next(p for p in re.split(r"\n\s*\n", text) if p.startswith("**Recovery** of the demo's"))
    assert numbers(passage) <= numbers(bench.page_blocks(RES)["demo-recovery"])
