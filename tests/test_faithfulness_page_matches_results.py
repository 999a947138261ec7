"""The side-by-side necessity figures on the faithfulness page and in the README are the results file's."""

import importlib.util
import re
from pathlib import Path

from tracegraph.kg.explain.compare_page import load_page_results, page_blocks, page_panels

ROOT = Path(__file__).resolve().parents[1]
ALL = load_page_results(ROOT / "benchmarks" / "results")
RESULTS = ALL["necessity_kelpie"]
PAGE = (ROOT / "docs" / "faithfulness.md").read_text()
NUMBER = re.compile(r"[−+-]?\d+\.\d+")


def numbers(text: str) -> set[str]:
    return {n.replace("−", "-").lstrip("+") for n in NUMBER.findall(text)}


def test_the_page_tables_are_rendered_from_the_results_file():
    for (start, end), block in page_blocks(ALL).items():
        shown = PAGE.split(start, 1)[1].split(end, 1)[0]
        assert shown.strip() == block.strip(), f"the block after {start} differs from the results file"


def test_every_figure_in_the_side_by_side_prose_is_in_its_tables():
    section = PAGE.split("## Side by side with Kelpie", 1)[1].split("\n## ", 1)[0]
    tables = "".join(page_blocks(ALL).values())
    prose = re.sub(r"<!-- side-by-side.*?<!-- /side-by-side[^>]*-->", "", section, flags=re.S)
    prose = re.sub(r"```.*?```", "", prose, flags=re.S)  # the example command's settings
    settings = {"0.003", "0.995", "0.2", "0.3", "0.1"}  # Kelpie's training settings, quoted from its protocol
    missing = numbers(prose) - numbers(tables) - settings
    assert not missing, f"figures on the page that no results file holds: {sorted(missing)}"


def test_readme_headline_row_reads_the_results_file():
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if "side by side with Kelpie" in line)
    want = set()

    def figure(x, key):
        return {f"{x[key]:.2f}", *(f"{v:.2f}" for v in x.get(f"{key}_ci95", []))}

    fb, wn = RESULTS["datasets"]["fb15k-237"], RESULTS["datasets"]["wn18rr-cpu"]
    # FB15k-237: pooled over retrain seeds (one retrain cannot separate four facts from its chaos); WN18RR: one
    for arms in (fb["pooled"]["summary"], wn["fact_sets"]["kelpie-facts"]["summary"]):
        ours, kelpie, noise = arms["tracin-margin-path"], arms["kelpie"], arms["noise"]
        for f in ("original", "reduced"):
            want |= {f"{ours[f]['change_hits@1']:.2f}", f"{kelpie[f]['change_hits@1']:.2f}"}
            want |= figure(ours[f], "beyond_kelpie_hits@1")
        want |= {f"{noise['original']['change_hits@1']:.2f}"} | figure(ours["original"], "beyond_noise_hits@1")
    assert numbers(row) == want


def test_the_page_figure_is_drawn_at_build_from_every_measured_fact_set(tmp_path):
    spec = importlib.util.spec_from_file_location("docs_conf", ROOT / "docs" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert f"]({conf.SIDE_BY_SIDE_FIGURE})" in PAGE
    conf.draw_side_by_side(tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    measured = []
    for name, fs in (
        ("necessity_kelpie", "kelpie-facts"),
        ("necessity_kelpie", "own-facts"),
        ("compare_umls", "own-facts"),
    ):
        for d in ALL[name]["datasets"].values():
            if d["fact_sets"].get(fs, {}).get("summary"):
                measured.append((d["fact_sets"][fs]["n_facts"], d["fact_sets"][fs]["summary"]))
                if "pooled" in d:  # the same facts over several retrain seeds, right below
                    measured.append((d["pooled"]["n_facts"], d["pooled"]["summary"]))
    panels = page_panels(ALL)
    assert any("pooled over 3 retrain seeds" in title for title in panels)
    assert [s for s in panels.values()] == [s for _, s in measured]
    assert all(f" {n} " in title for title, (n, _) in zip(panels, measured))


def test_kelpies_released_figures_cover_every_filed_series_of_kelpies_facts_on_the_same_facts():
    graded = {s: g for d in ALL["kelpie_released"]["datasets"].values() for s, g in d["graded"].items()}
    measured = {
        name: d["fact_sets"]["kelpie-facts"]["n_facts"]
        for name, d in RESULTS["datasets"].items()
        if d["fact_sets"].get("kelpie-facts", {}).get("summary")
    }
    # a series filed after benchmarks/kelpie_released.py last ran would be missing from its table
    assert {s: g["n_facts"] for s, g in graded.items()} == measured
    for series in graded:
        facts = (
            ROOT / "benchmarks" / "results" / "necessity_kelpie" / series / "kelpie-facts" / "facts.tsv"
        ).read_text()
        assert len(facts.strip().splitlines()) - 1 == measured[series]
