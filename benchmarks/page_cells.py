"""The pieces every generated docs block is made of: a results file, its lines, a table row, the machine cell."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def lines(run: dict) -> dict[str, dict]:
    """A record's JSON lines by their ``setting`` name."""
    return {ln["setting"]: ln for ln in run["lines"]}


def machine(run: dict) -> str:
    """The machine column of a run ``record.py`` filed: the GPU's short name, else the CPU cores."""
    m = run["machine"]
    return machine_name(m["gpu"]) if m.get("gpu") else f"{m['cpu_cores']} CPU cores"


def machine_name(text: str) -> str:
    """A machine's short name in a table cell, as the benchmarks page's legend defines them: H100, H200, "2 CPU cores".

    ``text`` is a machine as a results file words it ("NVIDIA H200, 16 CPU cores, torch ...",
    "2 CPU cores (AMD EPYC), no GPU, ...").
    """
    first = text.split(" (")[0].split(",")[0]
    return first.removeprefix("NVIDIA ").split()[0] if first.startswith("NVIDIA ") else first


def row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def run_row(figure: str, measured: str, run: dict) -> str:
    """A table row of a figure measured by one recorded run: its command, machine and commit beside it."""
    return row(figure, measured, f"`{run['command']}`", machine(run), run["commit"])


def header(*names) -> str:
    return row(*names) + "\n" + row(*["---"] * len(names))
