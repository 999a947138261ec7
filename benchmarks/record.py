"""Run a benchmark and file what it printed under benchmarks/results/, with the command, commit and machine.

    python benchmarks/record.py NAME [--label cpu] [--load TEXT] [--read FILE ...] -- COMMAND ...

COMMAND runs as given (its output is shown as it comes); every line it prints that is a JSON object is
kept, and each ``--read`` file (JSON) the command wrote is kept beside them. The record goes to
``benchmarks/results/NAME.json`` under ``runs[LABEL]`` (default ``cpu``; ``gpu`` for a GPU), so a
CPU and a GPU measurement of the same benchmark live in one file. The docs'
benchmark tables are checked against these files (tests/test_benchmarks_page_matches_results.py).
A command that fails files nothing.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def git_commit() -> str:
    """The checkout's short commit, marked when its code differs from it.

    Edits to the pages, the tests and the results files (what a benchmark session writes while it
    measures) change no figure, so they do not mark the commit.
    """
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    code = [".", ":!docs", ":!tests", ":!benchmarks/results", ":!*.md"]
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "-uno", "--", *code], cwd=ROOT, capture_output=True, text=True
    )
    return head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def machine() -> dict:
    """What the figures were measured on: CPU model and cores, memory, torch, and the GPU if one is seen."""
    info = {"arch": platform.machine(), "cpu_cores": os.cpu_count(), "python": platform.python_version()}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        info["cpu"] = names[0] if names else None
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kb = int(meminfo.read_text().split("MemTotal:", 1)[1].split()[0])
        info["memory_gb"] = round(kb / 2**20, 1)
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def json_lines(text: str) -> list[dict]:
    """The lines of ``text`` that are JSON objects, in order."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def run(command: list[str]) -> str:
    """Run ``command`` from the repository root, echoing its stdout; raise on failure."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:
        sys.stdout.write(line)
        seen.append(line)
    if proc.wait() != 0:
        raise SystemExit(f"error: {shlex.join(command)} exited with {proc.returncode}; nothing filed")
    return "".join(seen)


def record(command: list[str], reads: list[str], load: str | None) -> dict:
    """Run ``command`` as given (``python``/``tracegraph`` this checkout's) and return the record ``file`` writes."""
    before, started = os.getloadavg(), datetime.datetime.now(datetime.timezone.utc)
    commit, host = git_commit(), machine()
    lines = json_lines(run(resolve(command)))
    files = {r: read_json(ROOT / r) for r in reads}
    if not lines and not files:
        raise SystemExit(f"error: {shlex.join(command)} printed no JSON line and no --read file; nothing filed")
    return {
        "command": shlex.join(command),
        "commit": commit,
        "machine": host,
        "load": load,
        "load_avg_before": [round(x, 2) for x in before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "date": started.strftime("%Y-%m-%d"),
        "seconds": round((datetime.datetime.now(datetime.timezone.utc) - started).total_seconds(), 1),
        "lines": lines,
        "files": files,
    }


def usage_error(message: str) -> SystemExit:
    """One ``error:`` line on stderr and exit status 2, as every tracegraph command does for bad input."""
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(2)


def read_json(path: Path):
    """A ``--read`` file the command wrote; a missing or malformed one files nothing."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SystemExit(f"error: --read {path}: the command did not write it; nothing filed") from None
    except json.JSONDecodeError as e:
        raise SystemExit(f"error: --read {path}: line {e.lineno}: not JSON ({e.msg}); nothing filed") from None


def file(name: str, label: str, rec: dict, about: str) -> Path:
    """Write ``rec`` as ``runs[label]`` of benchmarks/results/NAME.json, keeping the file's other runs."""
    path = RESULTS / f"{name}.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    runs = {**old.get("runs", {}), label: rec}
    doc = {"about": old.get("about") or about, "runs": dict(sorted(runs.items()))}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)  # a reader never sees half a file
    return path


def script_about(command: list[str]) -> str:
    """The first line of the benchmark script's docstring, when the command runs one."""
    for part in command:
        p = ROOT / part
        if part.endswith(".py") and p.exists():
            doc = ast.get_docstring(ast.parse(p.read_text()))
            if doc:
                return doc.splitlines()[0]
    return shlex.join(command)


def resolve(command: list[str]) -> list[str]:
    """``python`` and ``tracegraph`` as this interpreter's, so a benchmark runs with the checkout's code."""
    head = {"python": sys.executable, "tracegraph": str(Path(sys.executable).with_name("tracegraph"))}
    return [head.get(command[0], command[0]), *command[1:]]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise usage_error("give the benchmark's command after --")
    cut = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", help="results file: benchmarks/results/NAME.json")
    ap.add_argument("--label", default="cpu", help="which run of the file this is (cpu, gpu, ...)")
    ap.add_argument("--load", help="what else ran on the machine, in words")
    ap.add_argument("--read", action="append", default=[], help="a JSON file the command writes, kept too")
    a = ap.parse_args(argv[:cut])
    command = argv[cut + 1 :]
    if not a.name.replace("_", "").replace("-", "").isalnum():
        raise usage_error(f"NAME {a.name!r}: letters, digits, - and _ only (it names benchmarks/results/NAME.json)")
    rec = record(command, a.read, a.load)  # its command as a reader types it, not this machine's paths
    path = file(a.name, a.label, rec, script_about(command))
    print(f"filed {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} [{a.label}]")


if __name__ == "__main__":
    main()
