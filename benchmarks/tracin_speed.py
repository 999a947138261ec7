"""TracIn speed: exact factor engine vs the per-example autograd loop vs a plain forward.

A generated ConvE-sized problem (d=200 as 10×20, 32 channels, 3×3 kernel; 10,000 entities,
50 relations with reciprocals; random weights: timing does not depend on training) with 32,000
training triples. Prints one JSON line per setting:
  - forward:   a plain no-grad forward (both directions, scores against all entities) over the
               training triples — the yardstick;
  - exact T=1 and T=256: seconds per test triple, and the ratio to the forward;
  - autograd:  per-example loop, *timed on a sample of training triples and extrapolated*
               (it would take hours in full), for T=1 and T=256; ratios exact/autograd.

Usage: python benchmarks/tracin_speed.py [--quick] [--train 32000] [--sample 24]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.explain.tracin.engine import InfluenceOptions, compute_influence
from tracegraph.kg.explain.tracin.factors import select_layers
from tracegraph.kg.explain.tracin.reference import autograd_gradients
from tracegraph.runtime.checkpoints import save_checkpoint


def emit(**kw):
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    kw.update(
        machine=f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}{gpu}",
        load_avg_1m=round(os.getloadavg()[0], 2),
    )
    print(json.dumps(kw), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--train", type=int, default=32000)
    ap.add_argument("--entities", type=int, default=10000)
    ap.add_argument("--sample", type=int, default=24, help="training triples timed for the autograd loop")
    ap.add_argument("--batch-size", type=int, default=1024, help="plain forward: triples per step")
    ap.add_argument(
        "--tracin-batch", type=int, default=0, help="exact TracIn: training triples per step (0 = the engine's auto)"
    )
    ap.add_argument(
        "--precision", default="fp32", help="exact TracIn's factors: fp32, or bf16 (its error vs fp32 is reported)"
    )
    ap.add_argument("--device", default="cpu", help="cpu or cuda (timings synchronise CUDA)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    if args.quick:
        args.train, args.entities, args.sample = 2000, 1000, 4
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    E, R, M = args.entities, 50, args.train
    cfg = ConvEConfig(num_entities=E, num_relations=R)
    model = ConvE(cfg).to(dev).eval()
    train = np.stack([rng.integers(0, E, M), rng.integers(0, R, M), rng.integers(0, E, M)], 1)
    tests = np.stack([rng.integers(0, E, 256), rng.integers(0, R, 256), rng.integers(0, E, 256)], 1)
    tmp = Path(tempfile.mkdtemp())
    ckpt = tmp / "epoch_0001.pt"
    save_checkpoint(ckpt, {"model": model.state_dict(), "model_config": cfg.to_dict(), "epoch": 1, "lr": 0.003})
    common = dict(problem=f"ConvE d=200, {E} entities, {R} relations (+inverse), {M} training triples")

    # plain forward: both directions, all-entity scores, no grad (one warm-up batch first)
    with torch.no_grad():
        b = torch.as_tensor(train[: args.batch_size], device=dev)
        model.score_all(torch.cat([b[:, 0], b[:, 2]]), torch.cat([b[:, 1], b[:, 1] + R]))
    sync()
    t0 = time.perf_counter()
    with torch.no_grad():
        for s in range(0, M, args.batch_size):
            b = torch.as_tensor(train[s : s + args.batch_size], device=dev)
            model.score_all(torch.cat([b[:, 0], b[:, 2]]), torch.cat([b[:, 1], b[:, 1] + R]))
    sync()
    t_fwd = time.perf_counter() - t0
    emit(setting="plain_forward", seconds=round(t_fwd, 3), device=str(dev), **common)

    per_test_exact = {}
    warm = InfluenceOptions(engine="exact", loss="train-loss", batch_size=args.tracin_batch, test_batch_size=256)
    compute_influence([ckpt], train[:2000], tests[:2], warm, dev)  # CUDA context, cuBLAS handles, allocator
    for T in (1, 256):
        opts = InfluenceOptions(
            engine="exact",
            loss="train-loss",
            batch_size=args.tracin_batch,
            test_batch_size=256,
            precision=args.precision,
        )
        sync()
        t0 = time.perf_counter()
        res = compute_influence([ckpt], train, tests[:T], opts, dev)
        sync()
        t = time.perf_counter() - t0
        per_test_exact[T] = t / T
        extra = {}
        if args.precision != "fp32":  # what the half-precision factors cost in accuracy
            ref = compute_influence([ckpt], train, tests[:T], InfluenceOptions(batch_size=args.tracin_batch), dev)
            extra["max_error_rel_to_max_abs_fp32"] = float(abs(res.scores - ref.scores).max() / abs(ref.scores).max())
            top = lambda a: set(np.argsort(-a[0])[:100])
            extra["top100_overlap_test0"] = len(top(res.scores) & top(ref.scores)) / 100
        emit(
            setting=f"exact_T{T}",
            precision=args.precision,
            seconds=round(t, 3),
            seconds_per_test_triple=round(t / T, 4),
            **extra,
            ratio_to_plain_forward=round(t / t_fwd, 2),
            target_ratio_to_forward="<= 3 (T=1)",
            target_ms_per_test_triple_T256_gpu=0.5,
            device=str(dev),
            **common,
        )

    # autograd loop, timed on a sample and extrapolated to M training triples
    layers = select_layers(model, "all")
    tt = torch.as_tensor(tests, device=dev)
    t0 = time.perf_counter()
    g_test = autograd_gradients(model, tt, "train-loss", 0.1, layers)  # [256, P]
    t_test_grads = time.perf_counter() - t0
    sample = torch.as_tensor(train[: args.sample], device=dev)
    t0 = time.perf_counter()
    for i in range(len(sample)):
        g = autograd_gradients(model, sample[i : i + 1], "train-loss", 0.1, layers)
        _ = g @ g_test[:1].t()
    sync()
    per_train_t1 = (time.perf_counter() - t0) / len(sample)
    t0 = time.perf_counter()
    for i in range(len(sample)):
        g = autograd_gradients(model, sample[i : i + 1], "train-loss", 0.1, layers)
        _ = g @ g_test.t()
    sync()
    per_train_t256 = (time.perf_counter() - t0) / len(sample)
    for T, per_train in ((1, per_train_t1), (256, per_train_t256)):
        total = per_train * M + t_test_grads * T / 256
        emit(
            setting=f"autograd_T{T}",
            seconds_extrapolated=round(total, 1),
            seconds_per_test_triple=round(total / T, 3),
            timed_sample_training_triples=int(len(sample)),
            parameters=int(g_test.shape[1]),
            exact_speedup_per_test_triple=round(total / T / per_test_exact[T], 1),
            target_speedup=">= 100 (T=1), >= 1000 (T=256)",
            device=str(dev),
            **common,
        )


if __name__ == "__main__":
    main()
