"""Where the GPU time goes: the top kernels of a training step or of exact TracIn (torch.profiler).

    python benchmarks/profile_gpu.py train --data DIR_WITH_train.txt [--batch-size 128] [--steps 50]
    python benchmarks/profile_gpu.py tracin [--train 32000] [--tests 1]

``train`` profiles eager steps (CUDA graphs off, so every kernel is attributed; a replay runs the
same kernels without the launch gaps) of a second epoch cut to ``--steps`` batches, after a warm
epoch. ``tracin`` profiles one exact-TracIn pass of the tracin_speed.py problem after a warm-up.
Prints the profiler's table (top ``--top`` by device time) and one JSON line with the total
kernel time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile


def profile_train(args):
    import tracegraph.kg.model.train as tr

    cfg = tr.TrainConfig(
        train=f"{args.data}/train.txt",
        output_dir=tempfile.mkdtemp(),
        epochs=1,
        batch_size=args.batch_size,
        device="cuda",
        cuda_graphs=False,
        checkpoint_every=1000,
    )
    tr.train(cfg)  # warm: allocator, cuDNN algorithm choice
    original = tr.SampleStore.epoch
    tr.SampleStore.epoch = lambda self, order: original(self, order[: args.steps])
    cfg.output_dir = tempfile.mkdtemp()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        tr.train(cfg)
    return prof, args.steps


def profile_tracin(args):
    from tracegraph.kg.model.conve import ConvE, ConvEConfig
    from tracegraph.kg.explain.tracin.engine import InfluenceOptions, compute_influence
    from tracegraph.runtime.checkpoints import save_checkpoint

    E, R, M = 10_000, 50, args.train
    cfg = ConvEConfig(num_entities=E, num_relations=R)
    model = ConvE(cfg)
    rng = np.random.default_rng(0)
    train = np.stack([rng.integers(0, E, M), rng.integers(0, R, M), rng.integers(0, E, M)], 1)
    ckpt = Path(tempfile.mkdtemp()) / "epoch_0001.pt"
    save_checkpoint(ckpt, {"model": model.state_dict(), "model_config": cfg.to_dict(), "epoch": 1, "lr": 0.003})
    opts = InfluenceOptions(engine="exact", loss=args.loss)
    dev = torch.device("cuda")
    compute_influence([ckpt], train[:4000], train[: args.tests], opts, dev)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        compute_influence([ckpt], train, train[: args.tests], opts, dev)
        torch.cuda.synchronize()
    return prof, 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["train", "tracin"])
    ap.add_argument("--data")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--train", type=int, default=32000)
    ap.add_argument("--tests", type=int, default=1)
    ap.add_argument("--loss", default="train-loss")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    if args.what == "train" and not args.data:
        sys.exit("train needs --data")
    prof, per = (profile_train if args.what == "train" else profile_tracin)(args)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.top))
    kernels = [e for e in prof.key_averages() if getattr(getattr(e, "device_type", None), "name", "") == "CUDA"]
    total = sum(getattr(e, "device_time_total", 0) for e in kernels) / 1000
    print(
        json.dumps(
            dict(
                benchmark="profile_gpu",
                what=args.what,
                device=torch.cuda.get_device_name(),
                kernel_ms_total=round(total, 2),
                kernel_ms_per_unit=round(total / per, 3),
            )
        )
    )


if __name__ == "__main__":
    main()
