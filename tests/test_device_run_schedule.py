"""benchmarks/gpu/device_run.py: what a lent GPU's one call runs, in which order, and its MPS start.

The schedule is built (not run) on the --quick plan (UMLS, two copies), whose job names and
commands are the real ones; the MPS start is driven with stand-in programs written here.
"""

import importlib
import os
import stat
import sys
import time
from pathlib import Path

import pytest

GPU_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"


@pytest.fixture(scope="module")
def device_run():
    sys.path.insert(0, str(GPU_DIR))
    try:
        yield importlib.import_module("device_run")
    finally:
        sys.path.remove(str(GPU_DIR))


def schedule(device_run, tmp_path, *flags, device="cpu"):
    args = device_run.parser().parse_args(
        ["--quick", "--device", device, "--inputs", str(tmp_path), "--work", str(tmp_path / "w"), *flags]
    )
    return device_run.jobs(args)


def arm_jobs(jobs):
    """The retrain jobs, in schedule order (dataset/fact-set-or-seed/arm)."""
    return [j.name for j in jobs if j.name.count("/") == 2 and not j.name.endswith(("/explain", "/summary"))]


SEEDED = "tracin-margin-path,kelpie,noise"


def test_seeds_first_puts_every_seeded_retrain_before_any_other_arm(device_run, tmp_path):
    jobs = schedule(device_run, tmp_path, "--retrain-seeds", "43,44", "--seeds-first", "--seeded-arms", SEEDED)
    names = arm_jobs(jobs)
    seeded = [n for n in names if n.split("/")[1] != "own-facts" and n.split("/")[2] in SEEDED.split(",")]
    assert names[: len(seeded)] == seeded  # nothing else comes first
    for ds in ("umls", "umls2"):
        for folder in ("kelpie-facts", "seed43", "seed44"):
            assert {f"{ds}/{folder}/{a}" for a in SEEDED.split(",")} <= set(seeded)
    assert [n for n in names if n not in seeded]  # the other arms are still there, after
    # the pool waits for exactly the seeded arms of its dataset at all three seeds
    pool = next(j for j in jobs if j.name == "umls/pooled")
    assert sorted(pool.deps) == sorted(n for n in seeded if n.startswith("umls/"))
    assert pool.cmd[pool.cmd.index("compare-pool") + 1 :][:3] == [
        str(tmp_path / "w" / "umls" / f) for f in ("kelpie-facts", "kelpie-facts-seed43", "kelpie-facts-seed44")
    ]


def test_without_seeds_first_the_seeds_come_after_every_other_arm(device_run, tmp_path):
    names = arm_jobs(schedule(device_run, tmp_path, "--retrain-seeds", "43", "--seeded-arms", SEEDED))
    first_seed = min(i for i, n in enumerate(names) if "/seed43/" in n)
    assert all("/seed43/" in n for n in names[first_seed:])
    assert first_seed > 0


def test_the_seeded_folders_retrain_at_their_seed_with_the_seeded_methods_only(device_run, tmp_path):
    jobs = schedule(device_run, tmp_path, "--retrain-seeds", "43", "--seeded-arms", "tracin-margin-path,kelpie")
    explain = next(j for j in jobs if j.name == "umls/seed43/explain")
    cmd = explain.cmd
    assert cmd[cmd.index("--retrain-seed") + 1] == "43"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--method"] == ["tracin-margin-path"]
    assert {n.split("/")[2] for n in arm_jobs(jobs) if "/seed43/" in n} == {"tracin-margin-path", "kelpie"}


def test_methods_chooses_our_methods_explained_and_retrained(device_run, tmp_path):
    jobs = schedule(device_run, tmp_path, "--methods", "tracin-margin-path")
    explain = next(j for j in jobs if j.name == "umls/kelpie-facts/explain")
    assert [explain.cmd[i + 1] for i, a in enumerate(explain.cmd) if a == "--method"] == ["tracin-margin-path"]
    ours = {n.split("/")[2] for n in arm_jobs(jobs)} & set(device_run.OURS)
    assert ours == {"tracin-margin-path"}
    everything = {n.split("/")[2] for n in arm_jobs(schedule(device_run, tmp_path))} & set(device_run.OURS)
    assert len(everything) > 1  # the default explains and retrains more of ours


@pytest.mark.parametrize("device", ["cpu", "cuda"])  # a GPU explains our facts beside the rest, a CPU after
def test_no_own_facts_drops_our_own_facts_entirely(device_run, tmp_path, device):
    assert any("/own-facts/" in j.name for j in schedule(device_run, tmp_path, device=device))
    assert not any("/own-facts/" in j.name for j in schedule(device_run, tmp_path, "--no-own-facts", device=device))


def test_our_own_facts_retrain_the_default_then_its_floors_after_kelpies_facts(device_run, tmp_path):
    names = arm_jobs(schedule(device_run, tmp_path))
    own = [n.split("/")[2] for n in names if n.startswith("umls/own-facts/")]
    assert own == ["tracin-margin-path", "random-head", "noise", "far"]
    assert min(names.index(f"umls/own-facts/{a}") for a in own) > max(
        i for i, n in enumerate(names) if n.startswith("umls/kelpie-facts/")
    )


def fake_program(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def files(device_run, monkeypatch, tmp_path):
    import device_files

    log = tmp_path / "control.log"
    control = fake_program(tmp_path / "mps-control", f'echo "$@" >> {log}; cat >> {log}\n')
    monkeypatch.setattr(device_files, "mps_control", lambda: control)
    monkeypatch.setattr(device_files, "MPS_DIRS", {k: str(tmp_path / k) for k in device_files.MPS_DIRS})
    for k in device_files.MPS_DIRS:
        monkeypatch.delenv(k, raising=False)
    return device_files, log, tmp_path


def test_mps_is_on_when_a_probe_computes_through_it(files):
    device_files, log, tmp = files
    probe = fake_program(tmp / "py", f"echo {float(512**3)}\n")
    assert device_files.start_mps(probe) == "on"
    assert log.read_text().split() == ["-d"]  # started, not stopped
    assert all(os.environ[k] == v for k, v in device_files.MPS_DIRS.items())
    device_files.stop_mps()
    assert log.read_text().split() == ["-d", "quit"]
    assert not any(k in os.environ for k in device_files.MPS_DIRS)


def test_mps_is_stopped_and_off_when_the_probe_fails(files):
    device_files, log, tmp = files
    probe = fake_program(tmp / "py", "echo 'RuntimeError: no CUDA device' >&2; exit 1\n")
    state = device_files.start_mps(probe)
    assert state.startswith("off (probe failed") and "no CUDA device" in state
    assert log.read_text().split() == ["-d", "quit"]
    assert not any(k in os.environ for k in device_files.MPS_DIRS)


def test_mps_is_off_without_its_control_program(device_run, monkeypatch):
    import device_files

    monkeypatch.setattr(device_files, "mps_control", lambda: None)
    assert device_files.start_mps(sys.executable) == "off (nvidia-cuda-mps-control not found)"


def test_no_kelpie_facts_spends_the_call_on_our_own_facts(device_run, tmp_path):
    jobs = schedule(device_run, tmp_path, "--no-kelpie-facts", "--retrain-seeds", "43", device="cuda")
    names = [j.name for j in jobs]
    assert not any("kelpie-facts" in n or "seed43" in n or n.endswith("/pooled") for n in names)
    assert {n.split("/")[2] for n in arm_jobs(jobs) if n.startswith("umls/")} == {
        "tracin-margin-path",
        "random-head",
        "far",
        "noise",
    }
    assert "umls/own-facts/summary" in names


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def run_schedule(device_run, tmp_path, todo, *flags):
    args = device_run.parser().parse_args(
        ["--work", str(tmp_path), "--inputs", str(tmp_path), "--tick", "0.02", *flags]
    )
    (tmp_path / "logs").mkdir(exist_ok=True)
    return device_run.schedule(todo, tmp_path, args, time.monotonic())


def test_the_scheduler_follows_dependencies_failures_caps_and_finished_steps(device_run, tmp_path):
    Job = device_run.Job
    (tmp_path / "f.done").write_text("")
    mark = tmp_path / "f.ran"
    todo = [
        Job("a", py("pass"), 30),
        Job("b", py("raise SystemExit(3)"), 30, ["a"]),
        Job("c", py("pass"), 30, ["b"]),  # needs b, which fails
        Job("d", py("pass"), 30, ["b", "c"], after_any=True),  # waits for both to end, however
        Job("e", py("import time; time.sleep(30)"), 0.3),  # past its cap
        Job("f", py(f"open({str(mark)!r}, 'w')"), 30, done=tmp_path / "f.done"),  # finished earlier
    ]
    status = run_schedule(device_run, tmp_path, todo, "--deadline", "20")  # a scheduler that hangs fails, not waits
    assert status == {
        "a": "done",
        "b": "failed (3)",
        "c": "not run (a step it needs failed)",
        "d": "done",
        "e": "failed (killed)",
        "f": "done",
    }
    assert not mark.exists()
    assert (tmp_path / "logs" / "a.log").is_file() and (tmp_path / "device_run.json").is_file()


def test_the_scheduler_keeps_at_most_concurrency_gpu_jobs_and_stops_at_the_deadline(device_run, tmp_path):
    Job = device_run.Job
    spans = tmp_path / "spans"

    def timed(name, seconds):  # appends "name start end" once it ends; a shell starts fast on a loaded machine
        return ["sh", "-c", f's=$(date +%s.%N); sleep {seconds}; echo "{name} $s $(date +%s.%N)" >> {spans}']

    todo = [Job(f"g{i}", timed(f"g{i}", 0.4), 30) for i in range(4)]
    todo.append(Job("cpu", timed("cpu", 0.4), 30, gpu=False))  # beside the GPU jobs, not counted
    todo.append(Job("late", ["sleep", "30"], 60, ["g0", "g1", "g2", "g3"]))
    todo.append(Job("never", ["true"], 60, ["late"]))
    status = run_schedule(device_run, tmp_path, todo, "--concurrency", "2", "--deadline", "4")
    assert status["late"] == "failed (killed)" and status["never"] == "not run (deadline)"
    rows = [ln.split() for ln in spans.read_text().splitlines()]
    span = {n: (float(a), float(b)) for n, a, b in rows}
    assert set(span) == {"g0", "g1", "g2", "g3", "cpu"}
    for n, (a, b) in span.items():  # at no moment more than two GPU jobs
        if n != "cpu":
            assert sum(1 for m, (c, d) in span.items() if m != "cpu" and c < (a + b) / 2 < d) <= 2
    # the CPU job ran beside the first two GPU jobs
    assert span["cpu"][0] < min(span["g0"][1], span["g1"][1])
