"""What device_run.py writes beside its steps: the summary of each step's status, the machine, the commit, the archive."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def write_summary(work: Path, status: dict, t0: float, args) -> dict:
    """``device_run.json``: each step's status so far, the machine, the commit and the settings.

    Written whenever a step ends, so a run stopped from outside (a session's end on a CPU) still
    says what finished.
    """
    summary = {
        "status": status,
        "seconds": time.monotonic() - t0,
        "machine": machine(),
        "commit": commit(args.inputs),
        "args": vars(args),
    }
    (work / "device_run.json").write_text(json.dumps(summary, indent=1))
    return summary


def machine() -> str:
    try:
        import torch

        rest = f"torch {torch.__version__}, {platform.machine()}"
        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name()}, {os.cpu_count()} CPU cores, {rest}"
        return f"{os.cpu_count()} CPU cores ({cpu_model()}), no GPU, {rest}"
    except Exception as e:  # the summary must be written whatever torch says
        return f"unknown ({e})"


def cpu_model() -> str:
    """The CPU's model name (Linux), else the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip().replace(",", "")
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def commit(inputs: str) -> str:
    """The commit whose tree runs: ``--inputs``/COMMIT when the caller wrote it (a device's copy of the
    tree may carry an older git HEAD than the files it holds), else git's HEAD."""
    given = Path(inputs) / "COMMIT"
    if given.is_file():
        return given.read_text().strip()
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def pack(work: Path, dest: Path) -> None:
    """One archive of the results and logs (no weights), for the trip back."""
    dest.mkdir(parents=True, exist_ok=True)
    keep = (".json", ".md", ".tsv", ".log", ".jsonl", ".txt")
    with tarfile.open(dest / "gpu_results.tar.gz", "w:gz") as tf:
        for p in sorted(work.rglob("*")):
            rel = p.relative_to(work)
            if p.is_file() and p.suffix in keep and rel.parts[0] != "data" and "checkpoints" not in rel.parts:
                if p.name in ("excluded.txt", "plan.txt") or p.stat().st_size > 4_000_000:
                    continue
                tf.add(p, arcname=str(rel))


MPS_DIRS = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/tracegraph-mps/pipe", "CUDA_MPS_LOG_DIRECTORY": "/tmp/tracegraph-mps/log"}


def mps_control() -> str | None:
    """The MPS control program, where the driver's tools are installed."""
    found = shutil.which("nvidia-cuda-mps-control")
    for p in (found, "/usr/local/nvidia/bin/nvidia-cuda-mps-control", "/usr/bin/nvidia-cuda-mps-control"):
        if p and Path(p).is_file():
            return p
    return None


def start_mps(python: str) -> str:
    """Start CUDA's MPS daemon, so that several retrains' small kernels share the GPU at once rather
    than by turns (without it, five processes took about as long as five retrains in a row); a probe
    process must compute through it within a minute, else it is stopped. Returns "on" or why not.
    """
    exe = mps_control()
    if exe is None:
        return "off (nvidia-cuda-mps-control not found)"
    for d in MPS_DIRS.values():
        Path(d).mkdir(parents=True, exist_ok=True)
    os.environ.update(MPS_DIRS)
    probe = "import torch; x = torch.ones(512, 512, device='cuda'); print(float((x @ x).sum()))"
    try:
        subprocess.run([exe, "-d"], check=True, timeout=20, capture_output=True)
        r = subprocess.run([python, "-c", probe], timeout=60, capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() == str(float(512**3)):
            return "on"
        why = f"probe failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"
    except (subprocess.SubprocessError, OSError) as e:
        why = f"{type(e).__name__}: {e}"
    stop_mps()
    return f"off ({why})"


def stop_mps() -> None:
    """Quit the MPS daemon (if one runs) and let later processes use the GPU as usual."""
    exe = mps_control()
    if exe is not None and "CUDA_MPS_PIPE_DIRECTORY" in os.environ:
        try:
            subprocess.run([exe], input="quit\n", text=True, timeout=20, capture_output=True)
        except (subprocess.SubprocessError, OSError):
            pass
    for k in MPS_DIRS:
        os.environ.pop(k, None)
