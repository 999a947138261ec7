"""Scaling out: torchrun + torch.distributed (Gloo on 2 CPU processes) against one process.

Contracts checked here (docs/scaling.md):
- training: with the same global --batch-size, 2 ranks give the single-process loss curve
  (rtol 1e-5; measured ~4e-8) — including a resumed run and uneven per-rank shards; validation
  sharded over ranks gives exactly the ranks one process computes for the same weights;
- explain: 2 ranks (training triples sharded) write the same CSV rows as one process (scores to
  1e-5; measured identical), with --top-k (per-rank candidates merged on rank 0) and without;
  --devices cpu,cpu (test triples sharded, threads) too;
- a rank that raises, or hangs past TRACEGRAPH_DIST_TIMEOUT, stops the whole run with a non-zero
  exit and the failing rank's error, within a bounded time.
"""

import csv
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.evaluate import evaluate
from tracegraph.kg.model.model_io import load_model
from tracegraph.kg.explain.tracin.explain import ExplainConfig
from tracegraph.kg.outputs import explain_files
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.kg.data.triples import KnownTails, encode_triples, read_labeled_triples, with_reciprocals
from tracegraph.runtime.devices import parse_devices, run_on_devices
from tracegraph.runtime.distributed import (
    ShardedBatchSampler,
    batch_aligned_shard,
    shard_range,
    timeout_seconds,
)

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=4)
NO_DROPOUT = dict(input_dropout=0.0, feature_map_dropout=0.0, output_dropout=0.0)
MODEL_FLAGS = [
    "--embedding-dim",
    "12",
    "--embedding-height",
    "3",
    "--embedding-width",
    "4",
    "--output-channels",
    "4",
    "--input-dropout",
    "0",
    "--feature-map-dropout",
    "0",
    "--output-dropout",
    "0",
]
BATCH = 255  # odd: ranks get 128 and 127 samples of every step; 1560 kvsall samples -> a last step of 30


def torchrun(args, timeout=180, extra_env=None):
    """`python -m torch.distributed.run --standalone --nproc-per-node 2 ARGS` (no torchrun binary needed)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TRACEGRAPH_PROGRESS="0", PYTHONPATH=str(ROOT), **(extra_env or {}))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *map(str, args)]
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    res.elapsed = time.monotonic() - t0
    res.finished_at = time.time()
    return res


# ---- fast unit tests -----------------------------------------------------------------------


def test_sharded_batch_sampler_partitions_every_global_batch():
    gen = torch.Generator().manual_seed(3)
    single = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(range(23), generator=gen), 5, drop_last=False)
    epochs = []
    gens = [torch.Generator().manual_seed(3) for _ in range(3)]
    shards = [
        ShardedBatchSampler(
            torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(range(23), generator=g), 5, drop_last=False),
            r,
            3,
        )
        for r, g in enumerate(gens)
    ]
    for _ in range(2):
        ref = list(single)
        per_rank = [list(s) for s in shards]
        assert all(len(p) == len(ref) == len(s) for p, s in zip(per_rank, shards))  # same number of steps
        for i, batch in enumerate(ref):
            parts = [p[i] for p in per_rank]
            assert sorted(sum(parts, [])) == sorted(batch)  # union of the shards = the single-process batch
            assert max(map(len, parts)) - min(map(len, parts)) <= 1
        epochs.append(ref)
    assert epochs[0] != epochs[1]  # reshuffled every epoch


def test_shard_helpers():
    for n in (0, 1, 7, 100):
        for world in (1, 2, 3):
            r = [shard_range(n, k, world) for k in range(world)]
            assert r[0][0] == 0 and r[-1][1] == n and all(a[1] == b[0] for a, b in zip(r, r[1:]))
            b = [batch_aligned_shard(n, 8, k, world) for k in range(world)]
            assert b[0][0] == 0 and b[-1][1] == n and all(x[1] == y[0] for x, y in zip(b, b[1:]))
            assert all(lo % 8 == 0 for lo, _ in b)


def test_timeout_and_devices_options(monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_DIST_TIMEOUT", "12.5")
    assert timeout_seconds() == 12.5
    monkeypatch.setenv("TRACEGRAPH_DIST_TIMEOUT", "soon")
    with pytest.raises(TracegraphError, match="TRACEGRAPH_DIST_TIMEOUT"):
        timeout_seconds()
    assert [str(d) for d in parse_devices("cpu, cpu")] == ["cpu", "cpu"]
    with pytest.raises(TracegraphError):
        parse_devices(" , ")
    assert run_on_devices(parse_devices("cpu,cpu,cpu"), 7, lambda d, lo, hi: (lo, hi)) == [(0, 2), (2, 4), (4, 7)]
    with pytest.raises(ValueError, match="boom"):
        run_on_devices(parse_devices("cpu,cpu"), 4, lambda d, lo, hi: (_ for _ in ()).throw(ValueError("boom")))


# ---- training --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def single_run(umls_dir, tmp_path_factory):
    """The single-process reference: 3 epochs, global batch BATCH, no dropout (see docs/scaling.md)."""
    out = tmp_path_factory.mktemp("single")
    train(
        TrainConfig(
            train=str(umls_dir / "train.txt"),
            valid=str(umls_dir / "valid.txt"),
            test=str(umls_dir / "test.txt"),
            output_dir=str(out),
            epochs=3,
            batch_size=BATCH,
            lr_decay=0.5,
            model=dict(TINY, **NO_DROPOUT),
        )
    )
    return out


def history(run: Path) -> list[dict]:
    return json.loads((run / "training_history.json").read_text())


def train_commands(umls_dir, out: Path) -> dict[str, list]:
    """2 epochs, then resumed to 3: the resumed 2-rank curve must still be the uninterrupted 1-process one."""
    base = ["train", "--train", umls_dir / "train.txt", "--valid", umls_dir / "valid.txt"]
    base += ["--test", umls_dir / "test.txt", "-o", out, "--batch-size", BATCH, "--lr-decay", "0.5"]
    base += ["--device", "cpu", *MODEL_FLAGS]
    return {"train": [*base, "--epochs", "2"], "resume": [*base, "--epochs", "3", "--resume"]}


@pytest.mark.slow
def test_distributed_training_matches_single_process(umls_dir, single_run, launched):
    out = launched.dirs["train"]
    first, resumed = launched.outputs["train"], launched.outputs["resume"]
    assert first.count("test MRR") == resumed.count("test MRR") == 1  # rank 0 alone prints (and writes)

    one, two = history(single_run), history(out)
    assert [h["epoch"] for h in two] == [1, 2, 3] and [h["lr"] for h in two] == [h["lr"] for h in one]
    # float32 reduction order (DDP's gradient all-reduce, BatchNorm statistics) is the only difference
    l1, l2 = np.array([h["loss"] for h in one]), np.array([h["loss"] for h in two])
    np.testing.assert_allclose(l2, l1, rtol=1e-5)
    print(f"training: max relative loss difference {np.abs(l2 - l1).max() / np.abs(l1).max():.1e}")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["resolved"]["world_size"] == 2 and cfg["resolved"]["backend"] == "gloo"
    assert cfg["resolved"]["batch_size_semantics"] == "global (per process: about batch_size / world_size)"
    for f in ("best_model.pt", "final_model.pt", "test_results.json", "checkpoints/epoch_0003.pt"):
        assert (out / f).is_file(), f

    # validation sharded over the ranks and gathered = one process evaluating the same weights
    lm = load_model(out / "checkpoints" / "epoch_0003.pt")
    enc = lambda name: encode_triples(read_labeled_triples(umls_dir / name), lm.entities, lm.relations)
    R = len(lm.relations)
    known = KnownTails(
        [with_reciprocals(np.concatenate([enc("train.txt"), enc("valid.txt"), enc("test.txt")]), R)], 2 * R
    )
    res, _ = evaluate(lm.model, enc("valid.txt"), known, batch_size=256)
    assert res["both"]["mrr"] == two[-1]["valid"]["mrr"]
    # against the single-process run the weights differ by float noise (Adam normalises the
    # ~zero gradients of biases before BatchNorm), which moves near-tied ranks a little
    assert abs(two[-1]["valid"]["mrr"] - one[-1]["valid"]["mrr"]) < 0.01


# ---- explain ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def explain_inputs(single_run, umls_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("explain_inputs")
    lines = (umls_dir / "train.txt").read_text().splitlines()
    test = (umls_dir / "test.txt").read_text().splitlines()[:3]
    ends = {x for line in test for x in line.split("\t")[::2]}
    near = [line for line in lines if set(line.split("\t")[::2]) & ends][::6]  # head–tail walks (tracin-margin-path)
    (d / "train.txt").write_text("\n".join(dict.fromkeys(lines[::40] + near)) + "\n")  # about 200 training triples
    (d / "test.txt").write_text("\n".join(test + ["nope\tisa\tsteroid"]) + "\n")
    return d


def explain_cfg(single_run, inputs, out, **kw):
    return ExplainConfig(
        model_dir=str(single_run),
        train=str(inputs / "train.txt"),
        test_triples=str(inputs / "test.txt"),
        output_dir=str(out),
        batch_size=32,
        device="cpu",
        skip_unresolved=True,  # the test file's last line names an entity the run lacks
        **kw,
    )


def read_rows(path: Path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # labels and Role; TracInScore, SelfInfluence and (methods other than tracin) MethodScore,
    # (tracin-margin-path) HeadTailWalk
    return (rows[0], [r[:12] + r[-1:] for r in rows[1:]], np.array([[float(x) for x in r[12:-1]] for r in rows[1:]]))


def assert_same_outputs(ref: Path, got: Path) -> float:
    """Same files, same rows in the same order, scores to 1e-5 (relative to the largest)."""
    want = sorted(p.name for p in ref.glob("*_tracin.csv"))
    assert want and sorted(p.name for p in got.glob("*_tracin.csv")) == want
    worst = 0.0
    for name in want:
        h1, rows1, s1 = read_rows(ref / name)
        h2, rows2, s2 = read_rows(got / name)
        assert h1 == h2 and rows1 == rows2, name
        diff = np.abs(np.where(s1 == s2, 0.0, s1 - s2))  # equal infinities (no head–tail walk) agree
        err = (diff.max(0) / np.maximum(np.abs(np.where(np.isfinite(s1), s1, 0.0)).max(0), 1e-30)).max()  # per column
        assert err <= 1e-5, (name, err)
        worst = max(worst, err)
        m1, m2 = (json.loads((d / name.replace(".csv", ".json")).read_text()) for d in (ref, got))
        assert m1["training_triples_ranked"] == m2["training_triples_ranked"] and len(m1["rows"]) == len(m2["rows"])
        assert m1["test_self_influence"] == pytest.approx(m2["test_self_influence"], rel=1e-5)
    s_ref, s_got = (json.loads((d / "summary.json").read_text()) for d in (ref, got))
    for k in ("explained", "failed", "failures", "unresolved", "files", "training_triples", "layers"):
        assert s_ref[k] == s_got[k], k
    return worst


EXPLAINS = [("tracin-margin", 5), ("tracin-margin", None), ("tracin", 5), ("tracin-margin-path", 3)]

# every 2-rank CLI command of this module in one torchrun launch: each launch starts three
# interpreters (about 15 s of CPU, torch and its optimisers' imports), and the process group is set
# up once and kept (init_distributed is idempotent). Rank 0 marks where each command's output begins.
SEVERAL_COMMANDS = """
import json, os, sys
from tracegraph.cli import app
for args in json.loads(sys.argv[1]):
    if os.environ["RANK"] == "0":
        print("== command", flush=True)
    app(args, standalone_mode=False)
"""


@dataclass
class Launch:
    dirs: dict  # "train", and (method, top_k) for each of EXPLAINS: the command's output folder
    outputs: dict  # "train", "resume", and (method, top_k) for each of EXPLAINS: the command's standard output


@pytest.fixture(scope="module")
def launched(umls_dir, single_run, explain_inputs, tmp_path_factory) -> Launch:
    """The 2-rank training (2 epochs, then resumed to 3) and every (method, top_k) of EXPLAINS
    explained by 2 ranks, one launch. Training seeds itself from the config at every start, so a
    resume in the same interpreter starts from the checkpoint alone, as in a new one."""
    root = tmp_path_factory.mktemp("launched")
    script = root / "several.py"
    script.write_text(SEVERAL_COMMANDS)
    dirs = {"train": root / "train"}
    commands = train_commands(umls_dir, dirs["train"])
    for method, top_k in EXPLAINS:
        dirs[method, top_k] = root / f"{method}-{top_k}"
        args = ["explain", "--model-dir", single_run, "--train", explain_inputs / "train.txt"]
        args += ["--test-triples", explain_inputs / "test.txt", "-o", dirs[method, top_k], "--batch-size", "32"]
        args += ["--device", "cpu", "--method", method, "--skip-unresolved"] + (
            ["--top-k", str(top_k)] if top_k else []
        )
        commands[method, top_k] = args
    res = torchrun([script, json.dumps([[str(a) for a in c] for c in commands.values()])])
    assert res.returncode == 0, res.stderr[-3000:]
    outputs = res.stdout.split("== command\n")[1:]
    assert len(outputs) == len(commands), res.stdout[-3000:]
    return Launch(dirs, dict(zip(commands, outputs)))


@pytest.mark.slow
@pytest.mark.parametrize("method,top_k", EXPLAINS)
def test_distributed_explain_matches_single_process(single_run, explain_inputs, launched, tmp_path, method, top_k):
    """The default (tracin-margin: each rank's top-k by margin), tracin-margin-path (each rank's
    first k by shell then margin, and its k weakest margins) and plain TracIn, against one process."""
    ref = tmp_path / "single"
    explain_files(explain_cfg(single_run, explain_inputs, ref, top_k=top_k, method=method))
    assert ("MethodScore" in (ref / next(ref.glob("*_tracin.csv")).name).read_text().splitlines()[0]) == (
        method != "tracin"
    )
    if method == "tracin-margin-path":  # walks of several lengths, so the shells reorder the margin
        walks = [read_rows(p)[2][:, -1] for p in ref.glob("*_tracin.csv")]
        assert any(len(set(w[np.isfinite(w)])) > 1 for w in walks)
    got = launched.dirs[method, top_k]
    assert launched.outputs[method, top_k].count("explained 3 of 4 test triples (1 unresolved") == 1  # rank 0 alone
    assert (got / "unresolved.tsv").read_text().splitlines()[1].startswith("4\tnope | isa | steroid\t")
    assert json.loads((got / "summary.json").read_text())["world_size"] == 2
    # whole training batches per rank: the same arithmetic as one process (measured: identical)
    print(f"explain {method} top_k={top_k}: max relative score difference {assert_same_outputs(ref, got):.1e}")


@pytest.mark.slow
def test_devices_shard_test_triples(single_run, explain_inputs, tmp_path):
    ref, got = tmp_path / "single", tmp_path / "devices"
    explain_files(explain_cfg(single_run, explain_inputs, ref, top_k=5))
    summary = explain_files(explain_cfg(single_run, explain_inputs, got, top_k=5, devices=["cpu", "cpu"]))
    assert summary["devices"] == ["cpu", "cpu"]
    # test triples split over devices: other test-batch shapes, float32 rounding only
    print(f"explain --devices cpu,cpu: max relative score difference {assert_same_outputs(ref, got):.1e}")


# ---- failures --------------------------------------------------------------------------------

FAILING = """
import os, sys, time
if os.environ["RANK"] == "1":
    from tracegraph.kg.model.objective import TrainingObjective
    real, calls = TrainingObjective.forward, [0]
    def failing(self, *a, **k):
        calls[0] += 1
        if calls[0] == 3:  # mid-epoch, while rank 0 waits in a collective
            open(os.environ["FAIL_STAMP"], "w").write(repr(time.time()))
            if os.environ["FAIL_MODE"] == "raise":
                raise RuntimeError("simulated failure on rank 1")
            time.sleep(3600)  # hang: only the collective timeout can end this
        return real(self, *a, **k)
    TrainingObjective.forward = failing
from tracegraph.cli import main
sys.argv = ["tracegraph", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["raise", "hang"])
def test_a_failing_rank_stops_the_whole_run(umls_dir, tmp_path, mode):
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    stamp = tmp_path / "failed_at"
    res = torchrun(
        [
            script,
            "train",
            "--train",
            umls_dir / "train.txt",
            "-o",
            tmp_path / "run",
            "--epochs",
            "2",
            "--batch-size",
            "256",
            "--device",
            "cpu",
            *MODEL_FLAGS,
        ],
        timeout=120,
        extra_env={"FAIL_MODE": mode, "FAIL_STAMP": str(stamp), "TRACEGRAPH_DIST_TIMEOUT": "5"},
    )
    assert res.returncode != 0
    assert stamp.is_file(), res.stderr[-3000:]
    after_failure = res.finished_at - float(stamp.read_text())
    err = res.stderr
    print(f"failing rank ({mode}): run ended {after_failure:.1f}s after the failure")
    assert "Root Cause (first observed failure)" in err
    if mode == "raise":
        assert "simulated failure on rank 1" in err and "rank      : 1" in err
        assert after_failure < 30, after_failure  # torchrun stops rank 0 at once (measured ~1-3 s)
    else:
        assert "Timed out" in err and "TRACEGRAPH_DIST_TIMEOUT" in err  # rank 0 gave up, said why
        assert after_failure < 5 + 30, after_failure  # the 5 s collective timeout, then teardown
    assert not (tmp_path / "run" / "final_model.pt").exists()
