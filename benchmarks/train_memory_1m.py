"""Peak memory of one ConvE training step at 1,000,000 entities, batch 1024.

The step is tracegraph's own (ConvE forward, loss, backward, Adam step, fp32, d=200), with:

* ``fused``        fused_bce_1n: entity-chunked, never stores the B×N logits (target: peak < 1.5 GB);
* ``standard``     bce_1n on the full B×N logits (label-matrix-free, but the logits alone are
                   B·N·4 bytes = 4.1 GB at N=1M, B=1024);
* ``dense_labels`` the earlier codebase's loss: a dense B×N smoothed label matrix and
                   binary_cross_entropy_with_logits (logits + labels: 8.2 GB before backward).

Each run is a separate subprocess (peak RSS cannot be reset in-process), watched by this driver:
a run whose RSS would pass ``--max-rss-gb`` (default: available memory − 3 GB, at most 16 GB) is
killed and reported as such. Settings that do not fit (or are skipped) are *estimated* by a
linear fit of peak RSS over N measured at smaller N (``--fit-n``), labelled ``"estimated": true``.

Per run it reports: RSS after building the model (the weights: E is N·d·4 = 0.8 GB), the peak
during forward+backward, and the peak after the Adam step (Adam's two moment tables add
2·N·d·4 = 1.6 GB: no dense-Adam step at N=1M can peak below ~3.2 GB, whatever the loss).

Prints one JSON line per setting on stdout; progress on stderr.

    python benchmarks/train_memory_1m.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from tracegraph.runtime.memory import current_rss_bytes, peak_rss_bytes

HERE = os.path.abspath(__file__)
GB = 1e9


def worker(a) -> dict:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from tracegraph.kg.model.conve import ConvE, ConvEConfig
    from tracegraph.kg.model.loss import Targets, auto_chunk_size
    from tracegraph.kg.model.objective import TrainingObjective
    from tracegraph.kg.model.schedules import make_optimizer

    torch.manual_seed(0)
    N, B = a.entities, a.batch_size
    model = ConvE(ConvEConfig(num_entities=N, num_relations=a.relations))
    model.train()
    opt = make_optimizer(model, 0.003, torch.device("cpu"))  # the trainer's own optimizer
    rng = np.random.default_rng(0)
    h = torch.from_numpy(rng.integers(0, N, B))
    r = torch.from_numpy(rng.integers(0, 2 * a.relations, B))
    # kvsall-like targets: 1..4 true tails per sample
    k = rng.integers(1, 5, B)
    targets = Targets(torch.from_numpy(np.repeat(np.arange(B), k)), torch.from_numpy(rng.integers(0, N, int(k.sum()))))
    rss_model = current_rss_bytes()
    t0 = time.perf_counter()
    if a.worker in ("fused", "standard"):  # the trainer's own loss module, as `train` runs it
        objective = TrainingObjective(model, a.worker == "fused", auto_chunk_size(B), 0.1)
        loss = objective(h, r, targets.batch_index, targets.entity_index)
    elif a.worker == "dense_labels":  # the earlier codebase: a dense smoothed label matrix
        scores = model(h, r)
        labels = torch.zeros(B, N)
        labels[targets.batch_index, targets.entity_index] = 1.0
        labels = (1.0 - 0.1) * labels + 0.1 / N
        loss = F.binary_cross_entropy_with_logits(scores, labels)
    else:
        raise SystemExit(f"unknown worker {a.worker}")
    opt.zero_grad(set_to_none=True)
    loss.backward()
    peak_fb = peak_rss_bytes()
    opt.step()
    float(loss.detach())
    return {
        "rss_model": rss_model,
        "peak_forward_backward": peak_fb,
        "peak_step": peak_rss_bytes(),
        "seconds": time.perf_counter() - t0,
        "loss": float(loss.detach()),
    }


def _rss_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run(name: str, n: int, a, max_rss: float) -> dict | None:
    cmd = [
        sys.executable,
        HERE,
        "--worker",
        name,
        "--entities",
        str(n),
        "--batch-size",
        str(a.batch_size),
        "--relations",
        str(a.relations),
    ]
    print(f"[{name} N={n}] running (kill above {max_rss / GB:.1f} GB RSS)", file=sys.stderr, flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    killed = {"at": None}

    def watch():
        while p.poll() is None:
            rss = _rss_of(p.pid)
            if rss > max_rss:
                killed["at"] = rss
                p.kill()
                return
            time.sleep(0.05)

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    out, _ = p.communicate()
    th.join()
    if killed["at"] is not None:
        print(f"[{name} N={n}] killed at {killed['at'] / GB:.1f} GB", file=sys.stderr, flush=True)
        return {"killed_at_rss": killed["at"]}
    if p.returncode != 0:
        print(f"[{name} N={n}] failed (exit {p.returncode})", file=sys.stderr, flush=True)
        return None
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N=200,000 instead of 1,000,000 (fits run at 50k/100k)")
    ap.add_argument("--entities", type=int, default=1_000_000)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--relations", type=int, default=50)
    ap.add_argument("--settings", default="fused,standard,dense_labels")
    ap.add_argument("--fit-n", default="125000,250000", help="smaller N measured to fit peak = a + b·N")
    ap.add_argument("--max-rss-gb", type=float, default=None)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a)), flush=True)
        return
    if a.quick:
        a.entities, a.fit_n = 200_000, "50000,100000"
    avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        pass
    max_rss = a.max_rss_gb * GB if a.max_rss_gb else min(avail - 3 * GB, 16 * GB)
    fit_n = [int(x) for x in a.fit_n.split(",") if x]
    N, B, d = a.entities, a.batch_size, 200
    results = {}
    for name in a.settings.split(","):
        res = run(name, N, a, max_rss)
        line = {
            "benchmark": "train_memory_1m",
            "setting": name,
            "entities": N,
            "batch_size": B,
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "logits_gb": round(B * N * 4 / GB, 2),
            "weights_gb": round(N * d * 4 / GB, 2),
            "adam_state_gb": round(2 * N * d * 4 / GB, 2),
        }
        if res and "peak_step" in res:
            line.update(
                estimated=False,
                value=round(res["peak_step"] / GB, 3),
                unit="GB peak RSS (step)",
                peak_forward_backward_gb=round(res["peak_forward_backward"] / GB, 3),
                rss_after_model_gb=round(res["rss_model"] / GB, 3),
                loss_overhead_gb=round((res["peak_forward_backward"] - res["rss_model"]) / GB, 3),
                seconds=round(res["seconds"], 1),
            )
        else:
            # too big for this machine (or failed): fit a + b·N at smaller N and extrapolate
            pts = [(n, run(name, n, a, max_rss)) for n in fit_n]
            pts = [(n, p) for n, p in pts if p and "peak_step" in p]
            if res and "killed_at_rss" in res:
                line["killed_at_rss_gb"] = round(res["killed_at_rss"] / GB, 2)
            if len(pts) >= 2:
                (n1, p1), (n2, p2) = pts[0], pts[-1]
                ext = lambda key: p1[key] + (p2[key] - p1[key]) * (N - n1) / (n2 - n1)
                line.update(
                    estimated=True,
                    value=round(ext("peak_step") / GB, 3),
                    unit="GB peak RSS (step)",
                    peak_forward_backward_gb=round(ext("peak_forward_backward") / GB, 3),
                    rss_after_model_gb=round(ext("rss_model") / GB, 3),
                    loss_overhead_gb=round((ext("peak_forward_backward") - ext("rss_model")) / GB, 3),
                    fit_points=[[n, round(p["peak_step"] / GB, 3)] for n, p in pts],
                )
            else:
                line.update(estimated=True, value=None, unit="GB peak RSS (step)")
        results[name] = line
        if name == "fused":
            line.update(target_gb=1.5, ratio_to_target=round(line["value"] / 1.5, 3) if line.get("value") else None)
        print(json.dumps(line), flush=True)
    f = results.get("fused", {}).get("value")
    for other in ("standard", "dense_labels"):
        o = results.get(other, {}).get("value")
        if f and o:
            print(
                json.dumps(
                    {
                        "benchmark": "train_memory_1m",
                        "setting": f"{other}_over_fused",
                        "value": round(o / f, 2),
                        "unit": "ratio of peak RSS",
                        "estimated": results[other].get("estimated"),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
