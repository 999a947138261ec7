"""What ``--memory-cleanup`` (gc + CUDA empty_cache every 8 batches) does on this device.

Trains ConvE on UMLS (``tracegraph.kg.model.train.train``, default model, kvsall, batch 128, no
validation) for a few epochs with ``memory_cleanup`` off and on, each run in its own subprocess
(peak RSS cannot be reset in-process), the two settings interleaved over ``--repeats`` rounds so
machine-load drift hits both alike. Reports per setting: median seconds per epoch (first epoch
dropped as warm-up, with the per-round medians) and peak RSS (median over rounds), the on/off
ratios, and — because epoch times on a shared machine are noisy — the direct cost: one
``cleanup()`` call timed in the trained process × calls per epoch.

    python benchmarks/memory_cleanup.py [--quick] [--data tracegraph/kg/data/datasets/umls] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from tracegraph.runtime.memory import peak_rss_bytes

HERE = os.path.abspath(__file__)
DEFAULT_DATA = Path(__file__).resolve().parents[1] / "tracegraph" / "kg" / "data" / "datasets" / "umls"


def worker(a) -> dict:
    os.environ.setdefault("TRACEGRAPH_PROGRESS", "0")
    import torch

    from tracegraph.kg.model.train import TrainConfig, train

    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(
            train=str(Path(a.data) / "train.txt"),
            output_dir=out,
            epochs=a.epochs,
            batch_size=128,
            device=a.device,
            memory_cleanup=a.worker == "on",
            seed=0,
        )
        train(cfg)
        hist = json.loads((Path(out) / "training_history.json").read_text())
        n_samples = json.loads((Path(out) / "config.json").read_text())["sizes"]["training_samples"]
        n_batches = -(-n_samples // 128)
    # the cost of one cleanup call in this process (same heap as during training)
    from tracegraph.runtime.memory import cleanup

    dev = torch.device(a.device)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        cleanup(dev)
        ts.append(time.perf_counter() - t0)
    return {
        "epoch_seconds": [h["seconds"] for h in hist],
        "peak_rss": peak_rss_bytes(),
        "device": a.device,
        "torch_threads": torch.get_num_threads(),
        "cleanup_call_s": statistics.median(ts),
        "batches_per_epoch": n_batches,
        "cleanup_calls_per_epoch": -(-n_batches // 8),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 epochs, 1 round (default 5 epochs, 3 rounds)")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a)), flush=True)
        return
    if a.quick:
        a.epochs, a.repeats = 3, 1
    runs = {"off": [], "on": []}
    for rnd in range(a.repeats):
        for setting in ("off", "on") if rnd % 2 == 0 else ("on", "off"):
            cmd = [
                sys.executable,
                HERE,
                "--worker",
                setting,
                "--data",
                a.data,
                "--epochs",
                str(a.epochs),
                "--device",
                a.device,
            ]
            print(f"[round {rnd + 1}] memory_cleanup={setting}", file=sys.stderr, flush=True)
            p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            if p.returncode != 0:
                raise SystemExit(f"worker failed (exit {p.returncode})")
            runs[setting].append(json.loads(p.stdout.strip().splitlines()[-1]))
    summary = {}
    for setting, rs in runs.items():
        per_epoch = [s for r in rs for s in r["epoch_seconds"][1:]] or [s for r in rs for s in r["epoch_seconds"]]
        summary[setting] = {
            "s_per_epoch": statistics.median(per_epoch),
            "per_round": [round(statistics.median(r["epoch_seconds"][1:] or r["epoch_seconds"]), 3) for r in rs],
            "peak_rss_mb": statistics.median(r["peak_rss"] for r in rs) / 2**20,
        }
    calls = runs["on"][0]["cleanup_calls_per_epoch"]
    call_s = statistics.median(r["cleanup_call_s"] for rs in runs.values() for r in rs)
    for setting in ("off", "on"):
        s = summary[setting]
        line = {
            "benchmark": "memory_cleanup",
            "setting": f"memory_cleanup_{setting}",
            "device": a.device,
            "epochs": a.epochs,
            "rounds": a.repeats,
            "value": round(s["s_per_epoch"], 3),
            "unit": "s/epoch",
            "per_round_s_per_epoch": s["per_round"],
            "peak_rss_mb": round(s["peak_rss_mb"], 1),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        }
        if setting == "on":
            line.update(
                time_ratio_on_over_off=round(s["s_per_epoch"] / summary["off"]["s_per_epoch"], 3),
                peak_rss_ratio_on_over_off=round(s["peak_rss_mb"] / summary["off"]["peak_rss_mb"], 3),
                cleanup_call_ms=round(call_s * 1e3, 2),
                cleanup_calls_per_epoch=calls,
                predicted_cost_s_per_epoch=round(call_s * calls, 4),
            )
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
