"""The README's quick starts run as written, on a 1-epoch model (the one substitution below)."""

import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# the only change made to the README's code: 100 epochs of d=200 become 1 epoch of a tiny model
TINY = (
    'epochs=1, checkpoint_every=1, device="cpu", '
    'model={"embedding_dim": 32, "embedding_height": 4, "embedding_width": 8, "output_channels": 4}'
)
TINY_CLI = (
    "--epochs 1 --checkpoint-every 1 --device cpu --embedding-dim 32 --embedding-height 4 "
    "--embedding-width 8 --output-channels 4"
)


def section_blocks(heading: str, language: str) -> list[str]:
    """The ``language`` code blocks under the README's ``## heading``."""
    text = README.read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"^```{language}\n(.*?)^```", section, flags=re.S | re.M)


def test_readme_has_both_quick_starts_within_15_lines():
    (cli,) = section_blocks("CLI quick start", "bash")
    (py,) = section_blocks("Python quick start", "python")
    assert len(cli.splitlines()) <= 15 and len(py.splitlines()) <= 15
    assert cli.count("--epochs 100") == 1 and py.count("epochs=100") == 1  # each substitution has one target
    assert "tracegraph.open_run" in py and "run.explain" in py
    assert len(README.read_text().splitlines()) <= 150


def test_readme_links_point_at_files_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    missing = [link for link in links if not link.startswith("http") and not (ROOT / link).exists()]
    assert links and not missing


def _triples(frame: pd.DataFrame) -> list[tuple]:
    return [tuple(t) for t in frame[["TrainHead", "TrainRel", "TrainTail"]].to_numpy().tolist()]


def _check_default_rows(rows: pd.DataFrame, full: pd.DataFrame, k: int):
    """A top-k listing of the default, tracin-margin-path, is its whole ranking cut by a naive rule:
    up to k proponents (positive margins) by walk shell (a direct edge counts as 2), then margin,
    taken from the front of the whole ranking; then up to k opponents, the most negative first."""
    pro, opp = rows[rows.Role == "proponent"], rows[rows.Role == "opponent"]
    keys = list(zip(pro["HeadTailWalk"].clip(lower=2), -pro["MethodScore"]))
    assert list(rows.Role) == ["proponent"] * len(pro) + ["opponent"] * len(opp) and 0 < len(pro) <= k >= len(opp)
    assert keys == sorted(keys) and (pro["MethodScore"] > 0).all() and (opp["MethodScore"] < 0).all()
    assert len(full) == 5216  # every UMLS training triple
    assert _triples(pro) == _triples(full[full["MethodScore"] > 0].iloc[: len(pro)])
    assert _triples(opp) == _triples(full.sort_values("MethodScore", kind="stable").iloc[: len(opp)])
    assert rows["Role"].tolist() == np.where(rows["MethodScore"] < 0, "opponent", "proponent").tolist()


@pytest.mark.slow
def run_readme_block(block: str, cwd: Path) -> str:
    """Each command of a README bash block, in order: ``tracegraph …`` lines through the CLI in-process
    (the same app as the console script, without a fresh interpreter each), anything else in bash.
    Returns what the tracegraph commands printed."""
    printed = []
    for line in block.replace("\\\n", " ").splitlines():
        if not line.strip():
            continue
        if line.startswith("tracegraph "):
            res = run_cli(shlex.split(line, comments=True)[1:])
            assert res.exit_code == 0, (line, res.output[-2000:])
            printed.append(res.stdout)
        else:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=cwd, capture_output=True, text=True)
            assert done.returncode == 0, (line, done.stderr[-2000:])
    return "".join(printed)


def test_readme_cli_quick_start_runs(tmp_path, monkeypatch):
    (block,) = section_blocks("CLI quick start", "bash")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "cpu")
    stdout = run_readme_block(block.replace("--epochs 100", TINY_CLI), tmp_path)
    assert (tmp_path / "runs/umls/checkpoints/epoch_0001.pt").is_file()
    assert (tmp_path / "runs/umls/evaluation/evaluation.json").is_file()
    page = (tmp_path / "report.html").read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "eicosanoid" in page
    predicted = [line.split(",") for line in stdout.splitlines() if line.startswith("steroid,")]
    assert len(predicted) == 5
    (csv,) = (tmp_path / "why").glob("triple_000_*_tracin.csv")
    why = pd.read_csv(csv)
    # against the whole ranking (no --top-k, in the method's order)
    everything = run_cli(
        ["explain", "--model-dir", "runs/umls", "--dataset", "umls", "--test-triples", "question.txt", "-o", "all"]
    )
    assert everything.exit_code == 0, everything.output[-2000:]
    (full_csv,) = (tmp_path / "all").glob("triple_000_*_tracin.csv")
    _check_default_rows(why, pd.read_csv(full_csv), 10)


@pytest.mark.slow
def test_readme_python_quick_start_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the snippet writes runs/umls-py relative to the working directory
    (block,) = section_blocks("Python quick start", "python")
    namespace: dict = {}
    exec(compile(block.replace("epochs=100", TINY), str(README), "exec"), namespace)
    assert (tmp_path / "runs" / "umls-py" / "checkpoints" / "epoch_0001.pt").is_file()
    run, why = namespace["run"], namespace["why"]
    assert 0 < namespace["ev"].metrics["both"]["mrr"] <= 1
    full = run.explain([("steroid", "interacts_with", "eicosanoid")])  # the default method, every row
    _check_default_rows(why, full, 5)
    out = capsys.readouterr().out
    assert out.count("steroid") >= 5  # the five predictions were printed
