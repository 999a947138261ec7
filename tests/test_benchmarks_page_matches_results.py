"""The benchmarks page, and the README and docs sentences that quote it, read benchmarks/results/."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


sys.path.append(str(BENCH))  # the scripts import the ones beside them, as when run from the command line


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


page = load_script("benchmarks_page")
record = load_script("record")
PAGE = (ROOT / "docs" / "benchmarks.md").read_text()
EVIDENCE = (ROOT / "docs" / "demo-evidence.md").read_text()
TESTING = (ROOT / "docs" / "testing.md").read_text()
GPU = (ROOT / "docs" / "gpu.md").read_text()
BLOCKS = page.page_blocks()
EVIDENCE_BLOCKS = page.evidence_blocks()
TESTING_BLOCKS = page.testing_blocks()
GPU_BLOCKS = page.gpu_blocks()
# Published figures the pages cite beside ours (ConvE paper; LibKGE's tuned ConvE), not measurements of ours.
PUBLISHED = {"0.94", "0.99", "0.325", "0.501", "0.43", "0.52", "0.339", "0.442"}
# Settings quoted beside the figures: ConvE's learning rate, label smoothing and dropouts; the step's 1.5× target.
SETTINGS = {"0.003", "0.1", "0.2", "0.3", "1.5"}
# Rows held to benchmarks/results/demo.json by tests/test_demo_page_matches_results.py.
DEMO_ROWS = ("| recovery of the demo's", "| necessity on the demo")


def numbers(text: str) -> set[str]:
    """Decimal figures and ratios (``41×``) in ``text``, signs dropped (a drop is quoted as −0.29 or -0.29)."""
    return set(re.findall(r"\d+\.\d+", text)) | set(re.findall(r"(?<![\d.])(\d+)×(?!\d)", text))


def without_blocks(text: str) -> str:
    return re.sub(r"<!-- (bench:[a-z-]+) -->.*?<!-- /\1 -->", "", text, flags=re.S)


@pytest.mark.parametrize(
    "text, blocks",
    [(PAGE, BLOCKS), (EVIDENCE, EVIDENCE_BLOCKS), (TESTING, TESTING_BLOCKS), (GPU, GPU_BLOCKS)],
    ids=["benchmarks", "evidence", "testing", "gpus-page"],
)
def test_the_pages_blocks_are_rendered_from_the_results_files(text, blocks):
    for name, block in blocks.items():
        shown = text.split(f"<!-- {name} -->", 1)[1].split(f"<!-- /{name} -->", 1)[0]
        assert shown.strip() == block.strip(), f"the page's {name} block differs from benchmarks/results/"


def test_every_figure_in_the_evidence_pages_prose_is_in_its_tables():
    prose = re.sub(r"<!-- (evidence:[a-z-]+) -->.*?<!-- /\1 -->", "", EVIDENCE, flags=re.S)
    assert not numbers(prose) - numbers("".join(EVIDENCE_BLOCKS.values()))


@pytest.mark.parametrize("doc", ["docs/demo.md", "docs/explaining.md"])
def test_passages_quoting_the_evidence_page_quote_its_figures(doc):
    known = numbers("".join(EVIDENCE_BLOCKS.values()))
    paragraphs_and_items = re.split(r"\n\s*\n|\n(?=- )", (ROOT / doc).read_text())
    passages = [p for p in paragraphs_and_items if "demo-evidence.md" in p]
    assert passages
    for passage in passages:
        assert not numbers(passage) - known, passage


def test_every_figure_in_the_benchmarks_pages_prose_is_in_its_blocks():
    prose = "\n".join(ln for ln in without_blocks(PAGE).splitlines() if not ln.startswith(DEMO_ROWS))
    missing = numbers(prose) - numbers("".join(BLOCKS.values())) - PUBLISHED - SETTINGS
    assert not missing, f"figures on the benchmarks page that no results file holds: {sorted(missing)}"


def quoting_passages(text: str) -> list[str]:
    """Table rows and paragraphs that link to the benchmarks page."""
    parts = [p for p in re.split(r"\n\s*\n", text) if "benchmarks.md" in p]
    rows = [ln for p in parts for ln in p.splitlines() if ln.startswith("|") and "benchmarks.md" in ln]
    return rows + [p for p in parts if not p.lstrip().startswith("|")]


@pytest.mark.parametrize(
    "doc", ["README.md", "docs/training.md", "docs/explaining.md", "docs/filtering.md", "docs/trees.md"]
)
def test_pages_quoting_the_benchmarks_quote_its_figures(doc):
    known = numbers("".join(BLOCKS.values())) | PUBLISHED | SETTINGS
    for passage in quoting_passages((ROOT / doc).read_text()):
        if passage.startswith(DEMO_ROWS) or "[the demo]" in passage:
            continue
        missing = numbers(passage) - known
        assert not missing, (
            f"{doc} quotes figures the benchmarks' results files do not hold: {sorted(missing)}\n{passage}"
        )


def test_numbers_reads_decimals_and_ratios_without_their_sign():
    assert numbers("ΔHits@1 −0.29 [-0.38, +0.20]; 41× faster, 1.34× the floor") == {
        "0.29",
        "0.38",
        "0.20",
        "41",
        "1.34",
    }


def test_record_files_the_json_lines_a_command_prints_beside_the_files_earlier_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    (tmp_path / "b.json").write_text(json.dumps({"about": "b", "runs": {"gpu": {"kept": True}}}))
    out = tmp_path / "out.json"
    code = f"import json; print('progress'); print(json.dumps({{'setting': 's', 'value': 1.5}})); open({str(out)!r}, 'w').write('[3]')"
    record.main(["b", "--label", "cpu", "--load", "idle", "--read", str(out), "--", "python", "-c", code])
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["runs"]["gpu"] == {"kept": True}
    got = doc["runs"]["cpu"]
    assert got["lines"] == [{"setting": "s", "value": 1.5}] and got["files"] == {str(out): [3]}
    assert got["command"].startswith("python -c ") and got["load"] == "idle"
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    assert got["commit"].startswith(head.stdout.strip()) and got["machine"]["cpu_cores"] >= 1


def test_record_files_nothing_when_the_command_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    code = "import json, sys; print(json.dumps({'value': 1})); sys.exit(3)"
    with pytest.raises(SystemExit, match="exited with 3; nothing filed"):
        record.main(["b", "--", "python", "-c", code])
    assert not list(tmp_path.iterdir())


def test_record_runs_the_checkouts_python_and_tracegraph():
    assert record.resolve(["python", "x.py"]) == [sys.executable, "x.py"]
    assert Path(record.resolve(["tracegraph", "train"])[0]).name == "tracegraph"
    assert record.resolve(["ls"]) == ["ls"]


def test_record_keeps_only_the_json_object_lines():
    text = 'INFO start\n{"a": 1}\n[1, 2]\n{not json\n  {"b": 2}  \n'
    assert record.json_lines(text) == [{"a": 1}, {"b": 2}]


def test_record_marks_the_commit_when_code_differs_but_not_for_pages_or_results(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for rel in ("lib.py", "docs/page.md", "benchmarks/results/x.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("0\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(record, "ROOT", tmp_path)
    (tmp_path / "docs/page.md").write_text("1\n")
    (tmp_path / "benchmarks/results/x.json").write_text("1\n")
    (tmp_path / "new.py").write_text("untracked\n")
    assert "uncommitted" not in record.git_commit()
    (tmp_path / "lib.py").write_text("1\n")
    assert record.git_commit().endswith(" (with uncommitted changes)")


def test_write_blocks_replaces_each_marked_block_and_keeps_the_rest(tmp_path):
    p = tmp_path / "page.md"
    p.write_text("intro\n<!-- bench:a -->\nold\n<!-- /bench:a -->\nmiddle\n<!-- bench:b -->\n<!-- /bench:b -->\nend\n")
    page.write_blocks(p, {"bench:a": "new a", "bench:b": "| x |"})
    assert p.read_text() == (
        "intro\n<!-- bench:a -->\nnew a\n<!-- /bench:a -->\nmiddle\n<!-- bench:b -->\n| x |\n<!-- /bench:b -->\nend\n"
    )
    with pytest.raises(SystemExit, match="no <!-- bench:c --> marker"):
        page.write_blocks(p, {"bench:c": "x"})


def test_the_necessity_block_shows_a_dataset_once_its_default_arm_is_measured():
    def arm(x):
        return {"facts_removed": 31, "original": {"change_hits@1": x, "change_hits@1_ci95": [x - 0.1, x + 0.1]}}

    def dataset(finished):
        summary = {a: arm(-0.3) for a in finished}
        fs = {"n_facts": 9, "finished": finished, "summary": summary}
        return {"machine": "2 CPU cores (x)", "commit": "abc1234", "load": "", "fact_sets": {"kelpie-facts": fs}}

    umls = {"machine": "m", "commit": "c", "load": "", "datasets": {}}
    kelpie = {
        "datasets": {
            "fb15k-237-cpu": dataset(["kelpie", "noise"]),
            "wn18rr-cpu": dataset(["tracin-margin-path", "far", "noise"]),
        }
    }
    block = page.necessity_block(umls, kelpie)
    assert "FB15k-237" not in block
    wn = [ln for ln in block.splitlines() if ln.startswith("| WN18RR")]
    far = "far facts, 31 in all (neither end of a graded fact; as many as the random arm, or all there are)"
    assert [ln.split(" | ")[1] for ln in wn] == ["tracegraph's default", far, "nothing removed, another seed"]
    assert wn[0].split(" | ")[2] == "-0.30 [-0.40, -0.20]" and "abc1234" in wn[0]


def test_replicates_are_reproduced_exactly_by_every_run_that_repeats_an_arm():
    nec = json.loads((BENCH / "results" / "necessity_umls.json").read_text())
    seen: dict[str, list] = {}
    for run in nec["runs"].values():
        for ln in run["lines"]:
            if ln.get("figure") == "necessity_replicates":
                seen.setdefault(ln["arm"], []).append(ln["delta_hits1"])
    repeated = {arm: runs for arm, runs in seen.items() if len(runs) > 1}
    assert {"tracin-margin-path@4", "neighbour@4", "far@4"} <= set(repeated)
    assert all(runs[0] == r for runs in repeated.values() for r in runs[1:])


@pytest.mark.parametrize(
    "argv, said",
    [
        (["b"], "error: give the benchmark's command after --"),
        (["b", "--"], "error: give the benchmark's command after --"),
        (["../b", "--", "true"], "error: NAME '../b': letters, digits, - and _ only"),
    ],
)
def test_record_usage_errors_are_one_error_line_and_status_2(argv, said, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    with pytest.raises(SystemExit) as e:
        record.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(said) and "\n" not in err
    assert not list(tmp_path.iterdir())


def test_record_files_nothing_when_a_read_file_is_missing_or_not_json(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    bad = tmp_path / "bad.json"
    code = f"open({str(bad)!r}, 'w').write('{{\\n oops')"
    with pytest.raises(SystemExit, match=r"bad.json: line 2: not JSON"):
        record.main(["b", "--read", str(bad), "--", "python", "-c", code])
    with pytest.raises(SystemExit, match=r"the command did not write it"):
        record.main(["b", "--read", str(tmp_path / "absent.json"), "--", "python", "-c", "print('{}')"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_suite_time_reads_pytests_last_summary_line():
    suite_time = load_script("suite_time")
    out = "collected\n===== 1 failed in 0.10s =====\nrerun\n== 2386 passed, 17 skipped, 1 warning in 91.23s (0:01:31) ==\n"
    assert suite_time.summary(out) == {
        "counts": {"passed": 2386, "skipped": 17, "warnings": 1},
        "pytest_seconds": 91.23,
    }
    assert suite_time.summary("= 3 passed, 2 errors in 4s =")["counts"] == {"passed": 3, "errors": 2}
    with pytest.raises(ValueError, match="no pytest summary"):
        suite_time.summary("ImportError while loading conftest\n")


def test_compare_results_keeps_what_the_faithfulness_page_reads_of_a_compare_folder(tmp_path):
    compare_results = load_script("compare_results")
    sizes = [{"arms": ["a", "kelpie"], "same": {"facts": 2, "fell": {"a": 1, "kelpie": 0}}}]
    doc = {
        "offered": 9,
        "n_facts": 2,
        "arms": ["a", "kelpie"],
        "finished": ["a"],
        "summary": {"a": {"facts_removed": 3}},
        "groups": {"margin": ["near tie", "confident"]},
        "same_explanation": [{"arms": ["a", "kelpie"], "facts": 1}],
        "contents": {"a": {"fell": 1}},
        "sizes": sizes,
        "joins": [{"arms": ["a", "kelpie"], "first": {"facts": 1, "fell": {"a": 1, "kelpie": 0}}}],
        "config": {"k": 4, "candidates": "head", "random_like": "a", "local": {"steps": 60}, "seed": 0},
        "model_dir": "/elsewhere",
    }
    (tmp_path / "compare.json").write_text(json.dumps(doc))
    (tmp_path / "explanations").mkdir()
    (tmp_path / "explanations" / "a.json").write_text(json.dumps({"seconds_per_explanation": 0.25}))
    got = compare_results.fact_set(tmp_path)
    assert got["sizes"] == sizes and got["contents"] == doc["contents"] and got["joins"] == doc["joins"]
    assert got["same_explanation"] == doc["same_explanation"]
    assert got["config"] == {"k": 4, "candidates": "head", "random_like": "a", "local": {"steps": 60}}
    assert got["explained"] == {"a": 0.25} and "model_dir" not in got
    for key in ("same_explanation", "contents", "sizes", "joins"):  # an older compare.json without them
        del doc[key]
    (tmp_path / "compare.json").write_text(json.dumps(doc))
    older = compare_results.fact_set(tmp_path)
    assert (older["same_explanation"], older["contents"], older["sizes"], older["joins"]) == ([], {}, [], [])


@pytest.mark.parametrize(
    "text, want",
    [
        ("NVIDIA H200, 16 CPU cores, torch 2.11.0+cu130, x86_64", "H200"),
        ("NVIDIA H100 80GB HBM3, 16 CPU cores, torch 2.11.0+cu130, x86_64", "H100"),
        ("2 CPU cores (AMD EPYC), no GPU, torch 2.13.0+cpu, x86_64", "2 CPU cores"),
    ],
)
def test_a_machine_cell_is_the_legends_short_name_whatever_file_words_it(text, want):
    cells = load_script("page_cells")
    assert cells.machine_name(text) == want
    assert cells.machine({"machine": {"gpu": text.split(",")[0]} if "NVIDIA" in text else {"cpu_cores": 2}}) == want
