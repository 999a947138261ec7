"""ConvE training speed and memory: tracegraph vs PyKEEN's LCWA ConvE, and the GEMM floor.

A generated graph (10,000 entities, 50 relations, ~50k triples, reciprocal/inverse triples on),
ConvE d=200 (10x20 images, 32 3x3 filters), batch 512 of (head, relation) pairs with all their
known tails (tracegraph kvsall = PyKEEN LCWA), label smoothing 0.1, Adam.

Every system runs in its own subprocess, because peak RSS cannot be reset inside a process:

* ``tracegraph``        the real step from tracegraph.kg: ConvE forward, bce_1n on the B×N logits
                        (what ``train --loss-impl auto`` picks at this size), backward, Adam step;
* ``tracegraph_fused``  the same with fused_bce_1n (never stores the logits; recomputes them in backward);
* ``tracegraph_compile`` (optional, ``--systems``) the standard step with ``torch.compile(model)`` as
                        ``train --compile`` does;
* ``pykeen``            PyKEEN 1.11's own LCWATrainingLoop._forward_pass (forward, BCEAfterSigmoid loss,
                        backward) + Adam step, on the same graph and batch size;
* ``gemm``              fp32 torch.matmul throughput on exactly the GEMM shapes of one batch
                        (forward and backward of the conv-as-GEMM, the fc layer and the scoring x·Eᵀ).

Per system: median wall seconds per batch over ``--batches`` batches after ``--warmup`` warm-up
batches (``value``), the median CPU seconds of the process per batch (``cpu_s``: less sensitive to
other jobs on a shared machine, so its ratios are reported too), and the subprocess's peak RSS. The *floor* is the batch's matmul FLOPs (3× forward: forward, grad
wrt inputs, grad wrt weights) divided by the measured GEMM throughput.

On a shared machine the throughput drifts by a third between the ``gemm`` and ``tracegraph``
subprocesses, so with both requested a third subprocess times the step and one pass over the
floor's shapes alternately: ``paired_ratio_to_floor`` is the median of those per-batch ratios
(with its interquartile range), the figure to compare with the 1.5× target.

Prints one JSON line per setting on stdout (figure, target, ratio); progress on stderr.

    python benchmarks/train_vs_pykeen.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from tracegraph.runtime.memory import peak_rss_bytes

HERE = os.path.abspath(__file__)


def make_graph(n_ent: int, n_rel: int, n_triples: int, seed: int = 0) -> np.ndarray:
    """Unique random (h, r, t) id triples, heads/tails with a mild power law (hubs exist)."""
    rng = np.random.default_rng(seed)
    w = np.arange(1, n_ent + 1, dtype=np.float64) ** -0.5
    p = w / w.sum()
    perm = rng.permutation(n_ent)
    h = perm[rng.choice(n_ent, size=2 * n_triples, p=p)]
    t = perm[rng.choice(n_ent, size=2 * n_triples, p=p)]
    r = rng.integers(0, n_rel, size=2 * n_triples)
    ids = np.unique(np.stack([h, r, t], 1), axis=0)
    ids = ids[ids[:, 0] != ids[:, 2]]
    return ids[rng.permutation(len(ids))[:n_triples]].astype(np.int64)


# --------------------------------------------------------------------------- workers


def worker_tracegraph(a, fused: bool, compile: bool = False, paired: bool = False) -> dict:
    """The real training step; with ``paired``, each timed step is followed by one pass over the
    floor's GEMM shapes, so step and floor see the same machine state (its own subprocess: the
    GEMM buffers would inflate the step's peak RSS)."""
    import torch

    from tracegraph.kg.model.conve import ConvE, ConvEConfig
    from tracegraph.kg.model.loss import auto_chunk_size
    from tracegraph.kg.model.objective import TrainingObjective
    from tracegraph.kg.model.schedules import make_optimizer
    from tracegraph.kg.data.triples import KnownTails, with_reciprocals
    from tracegraph.runtime.allocator import keep_freed_buffers

    keep_freed_buffers()  # as train() does on a CPU
    torch.manual_seed(0)
    ids = make_graph(a.entities, a.relations, a.triples)
    mcfg = ConvEConfig(
        num_entities=a.entities, num_relations=a.relations, embedding_dim=200, embedding_height=10, embedding_width=20
    )
    train_ids = with_reciprocals(ids, a.relations)
    known = KnownTails([train_ids], mcfg.num_relation_rows)
    samples = np.stack(known.pairs(), axis=1)
    model = ConvE(mcfg)
    model.train()
    opt = make_optimizer(model, 0.003, torch.device("cpu"))
    # the trainer's own loss module; compiled as train --compile does
    objective = TrainingObjective(model, fused, auto_chunk_size(a.batch_size), 0.1)
    step = torch.compile(objective) if compile else objective
    rng = np.random.default_rng(1)
    order = rng.permutation(len(samples))
    floor_pass = _floor_pass(a) if paired else None
    times, cpu, floors = [], [], []
    for i in range(a.warmup + a.batches):
        s = samples[order[(i * a.batch_size) % len(samples) :][: a.batch_size]]
        bi, tails = known.batch(s[:, 0], s[:, 1])  # data preparation is outside the timed step
        h, r = torch.from_numpy(s[:, 0]), torch.from_numpy(s[:, 1])
        bi, tails = torch.as_tensor(bi), torch.as_tensor(tails)
        t0, c0 = time.perf_counter(), time.process_time()
        # the step of tracegraph.kg.model.train.train(), fp32
        loss = step(h, r, bi, tails)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        float(loss.detach())
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if floor_pass is not None:
            floors.append(floor_pass())
        print(
            f"  tracegraph{'_fused' if fused else ''}{'_compile' if compile else ''} batch {i}: {times[-1]:.3f}s",
            file=sys.stderr,
            flush=True,
        )
    return {
        "times": times[a.warmup :],
        "cpu": cpu[a.warmup :],
        "floors": floors[a.warmup :],
        "pairs": len(samples),
        "triples": len(ids),
    }


def _floor_pass(a):
    """A function timing one matmul of every GEMM shape of a batch: the floor in seconds (3× the
    forward FLOPs at the pass's own throughput, as ``worker_gemm`` defines it)."""
    import torch

    fwd, bwd = gemm_shapes(a.batch_size, a.entities)
    bufs = [(torch.randn(m, kk), torch.randn(kk, n), torch.empty(m, n)) for m, kk, n in fwd + bwd]
    scale = 3 * flops(fwd) / flops(fwd + bwd)

    def floor_pass() -> float:
        t0 = time.perf_counter()
        for x, y, out in bufs:
            torch.matmul(x, y, out=out)
        return (time.perf_counter() - t0) * scale

    return floor_pass


def worker_pykeen(a) -> dict:
    import torch
    from pykeen.models import ConvE
    from pykeen.training import LCWATrainingLoop
    from pykeen.triples import CoreTriplesFactory

    torch.manual_seed(0)
    ids = make_graph(a.entities, a.relations, a.triples)
    tf = CoreTriplesFactory(
        torch.from_numpy(ids), num_entities=a.entities, num_relations=a.relations, create_inverse_triples=True
    )
    model = ConvE(
        triples_factory=tf,
        embedding_dim=200,
        embedding_height=10,
        embedding_width=20,
        output_channels=32,
        kernel_height=3,
        kernel_width=3,
        random_seed=0,
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    loop = LCWATrainingLoop(model=model, triples_factory=tf, optimizer=opt)
    loader = loop._create_training_data_loader(tf, sampler=None, batch_size=a.batch_size, shuffle=True, drop_last=False)
    model.train()
    times, cpu = [], []
    it = iter(loader)
    for i in range(a.warmup + a.batches):
        batch = next(it)
        B = loop._get_batch_size(batch)
        t0, c0 = time.perf_counter(), time.process_time()
        # what LCWATrainingLoop._train_epoch does per batch (no sub-batching, no slicing)
        opt.zero_grad(set_to_none=True)
        loop._forward_pass(batch, 0, B, B, 0.1, None)
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        print(f"  pykeen batch {i}: {times[-1]:.3f}s", file=sys.stderr, flush=True)
    return {"times": times[a.warmup :], "cpu": cpu[a.warmup :], "pairs": len(loader.dataset)}


def gemm_shapes(B: int, N: int, d: int = 200, C: int = 32, k: int = 3, H: int = 20, W: int = 20):
    """(m, k, n) of every matmul in one ConvE training batch: forward, grad-input, grad-weight."""
    P = (H - k + 1) * (W - k + 1)  # output positions per image
    F = C * P  # flattened feature size
    fwd = [
        (B * P, k * k, C),  # conv as GEMM (im2col [B·P, k²] × [k², C])
        (B, F, d),  # fc
        (B, d, N),  # scores x·Eᵀ
    ]
    bwd = [
        (B * P, C, k * k),  # conv: grad wrt im2col
        (k * k, B * P, C),  # conv: grad wrt filters
        (B, d, F),  # fc: grad wrt input
        (d, B, F),  # fc: grad wrt W
        (B, N, d),  # scores: grad wrt x
        (N, B, d),  # scores: grad wrt E
    ]
    return fwd, bwd


def flops(shapes) -> float:
    """Floating-point operations of the matmuls (m, k, n): 2·m·k·n each."""
    return sum(2.0 * m * kk * n for m, kk, n in shapes)


def worker_gemm(a) -> dict:
    import torch

    fwd, bwd = gemm_shapes(a.batch_size, a.entities)
    total_flops, total_time, total_cpu, per = 0.0, 0.0, 0.0, []
    for m, kk, n in fwd + bwd:
        x, y = torch.randn(m, kk), torch.randn(kk, n)
        out = torch.empty(m, n)
        for _ in range(3):
            torch.matmul(x, y, out=out)
        reps, creps = [], []
        for _ in range(max(5, a.batches // 2)):
            t0, c0 = time.perf_counter(), time.process_time()
            torch.matmul(x, y, out=out)
            reps.append(time.perf_counter() - t0)
            creps.append(time.process_time() - c0)
        t, ct = statistics.median(reps), statistics.median(creps)
        fl = flops([(m, kk, n)])
        total_flops += fl
        total_time += t
        total_cpu += ct
        per.append({"shape": [m, kk, n], "seconds": t, "gflops": fl / t / 1e9})
    return {
        "gemm_gflops": total_flops / total_time / 1e9,
        "gemm_gflops_per_cpu_s": total_flops / total_cpu / 1e9,
        "batch_flops": 3 * flops(fwd),
        "batch_flops_counted": total_flops,
        "gemm_seconds_sum": total_time,
        "per_shape": per,
    }


# --------------------------------------------------------------------------- driver


def run_worker(name: str, a) -> dict:
    cmd = [
        sys.executable,
        HERE,
        "--worker",
        name,
        "--entities",
        str(a.entities),
        "--relations",
        str(a.relations),
        "--triples",
        str(a.triples),
        "--batch-size",
        str(a.batch_size),
        "--batches",
        str(a.batches),
        "--warmup",
        str(a.warmup),
    ]
    print(f"[{name}] {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"worker {name} failed with exit code {p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1])


WORKERS = {
    "tracegraph": lambda a: worker_tracegraph(a, fused=False),
    "tracegraph_fused": lambda a: worker_tracegraph(a, fused=True),
    "tracegraph_compile": lambda a: worker_tracegraph(a, fused=False, compile=True),
    "tracegraph_paired": lambda a: worker_tracegraph(a, fused=False, paired=True),
    "pykeen": worker_pykeen,
    "gemm": worker_gemm,
}


def run_as_worker(a) -> None:
    """One system in this subprocess: its timings and peak RSS as one JSON line on stdout."""
    if a.worker not in WORKERS:
        raise SystemExit(f"unknown worker {a.worker}")
    res = WORKERS[a.worker](a)
    import torch

    res.update(peak_rss_bytes=peak_rss_bytes(), threads=torch.get_num_threads())
    print(json.dumps(res), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="5 timed batches after 1 warm-up (default 20 after 3)")
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--relations", type=int, default=50)
    ap.add_argument("--triples", type=int, default=50_000)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument(
        "--systems",
        default="gemm,tracegraph,tracegraph_fused,pykeen",
        help="comma-separated; also tracegraph_compile (train --compile: torch.compile, needs a C++ compiler)",
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.batches, a.warmup = 5, 1

    if a.worker:
        return run_as_worker(a)
    load_before = os.getloadavg()
    names = a.systems.split(",")
    if "tracegraph" in names and "gemm" in names:
        names.append("tracegraph_paired")  # the ratio's robust figure: step and floor interleaved
    res = {name: run_worker(name, a) for name in names}
    common = {
        "benchmark": "train_vs_pykeen",
        "entities": a.entities,
        "relations": a.relations,
        "triples": a.triples,
        "batch_size": a.batch_size,
        "timed_batches": a.batches,
        "cpu_threads": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    floor = floor_cpu = None
    if "gemm" in res:
        g = res["gemm"]
        floor = g["batch_flops"] / (g["gemm_gflops"] * 1e9)
        floor_cpu = g["batch_flops"] / (g["gemm_gflops_per_cpu_s"] * 1e9)
        print(
            json.dumps(
                {
                    **common,
                    "setting": "floor",
                    "value": round(floor, 4),
                    "unit": "s/batch",
                    "cpu_s": round(floor_cpu, 4),
                    "batch_gflop": round(g["batch_flops"] / 1e9, 3),
                    "gemm_gflops": round(g["gemm_gflops"], 2),
                    "per_shape_gflops": [[*p["shape"], round(p["gflops"], 1)] for p in g["per_shape"]],
                }
            ),
            flush=True,
        )
    report_systems(res, common, floor, floor_cpu)


def report_systems(res: dict, common: dict, floor, floor_cpu) -> None:
    """One JSON line per system: its step, its ratios to the floor, and against PyKEEN."""
    pk = res.get("pykeen")
    pk_s = statistics.median(pk["times"]) if pk else None
    pk_c = statistics.median(pk["cpu"]) if pk else None
    for name in ("tracegraph", "tracegraph_fused", "tracegraph_compile"):
        if name not in res:
            continue
        r = res[name]
        s, c = statistics.median(r["times"]), statistics.median(r["cpu"])
        line = {
            **common,
            "setting": name,
            "value": round(s, 4),
            "unit": "s/batch",
            "cpu_s": round(c, 4),
            "min_s": round(min(r["times"]), 4),
            "max_s": round(max(r["times"]), 4),
            "peak_rss_mb": round(r["peak_rss_bytes"] / 2**20, 1),
            "kvsall_pairs": r["pairs"],
        }
        if floor:
            line.update(
                ratio_to_floor=round(s / floor, 3),
                target_ratio_to_floor=1.5,
                cpu_ratio_to_floor=round(c / floor_cpu, 3),
            )
        if name == "tracegraph" and "tracegraph_paired" in res:
            p = res["tracegraph_paired"]
            ratios = [t / f for t, f in zip(p["times"], p["floors"])]
            q1, q3 = np.percentile(ratios, [25, 75])
            line.update(
                paired_ratio_to_floor=round(statistics.median(ratios), 3), paired_ratio_iqr=[round(q1, 3), round(q3, 3)]
            )
        if pk:
            line.update(
                speedup_vs_pykeen=round(pk_s / s, 2),
                target_speedup=10.0,
                cpu_speedup_vs_pykeen=round(pk_c / c, 2),
                memory_fraction_of_pykeen=round(r["peak_rss_bytes"] / pk["peak_rss_bytes"], 3),
                target_memory_fraction=0.2,
            )
        print(json.dumps(line), flush=True)
    if pk:
        line = {
            **common,
            "setting": "pykeen",
            "value": round(pk_s, 4),
            "unit": "s/batch",
            "cpu_s": round(pk_c, 4),
            "min_s": round(min(pk["times"]), 4),
            "max_s": round(max(pk["times"]), 4),
            "peak_rss_mb": round(pk["peak_rss_bytes"] / 2**20, 1),
            "lcwa_pairs": pk["pairs"],
        }
        if floor:
            line.update(ratio_to_floor=round(pk_s / floor, 3), cpu_ratio_to_floor=round(pk_c / floor_cpu, 3))
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
