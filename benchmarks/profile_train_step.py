"""Where a training step's GPU time goes: the top kernels of ``--steps`` eager steps (torch.profiler).

Eager, not graph-replayed, so every kernel is attributed; the kernel times are what a replay costs
too, minus the launch gaps. Prints the profiler's table (top ``--top`` by device time) and one JSON
line with the total device time per step.

    python benchmarks/profile_train_step.py --data DIR_WITH_train.txt [--batch-size 128] [--precision fp32]
"""

from __future__ import annotations

import argparse
import json
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

import tracegraph.kg.train as tr
from tracegraph.kg.train import TrainConfig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    out = tempfile.mkdtemp()
    # one warm epoch, then profile the steps of a second one, cut short by a tiny fake epoch budget
    cfg = TrainConfig(train=f"{args.data}/train.txt", output_dir=out, epochs=1, batch_size=args.batch_size,
                      device="cuda", cuda_graphs=False, precision=args.precision, checkpoint_every=1000)
    tr.train(cfg)
    original = tr.SampleStore.epoch

    def short_epoch(self, order):
        return original(self, order[: args.steps])

    tr.SampleStore.epoch = short_epoch
    cfg.output_dir = tempfile.mkdtemp()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        tr.train(cfg)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.top))
    kernels = [e for e in prof.key_averages() if getattr(getattr(e, "device_type", None), "name", "") == "CUDA"]
    total = sum(getattr(e, "device_time_total", 0) for e in kernels) / 1000
    print(json.dumps(dict(benchmark="profile_train_step", steps=args.steps, batch_size=args.batch_size,
                          device=torch.cuda.get_device_name(), device_ms_total=round(total, 2),
                          device_ms_per_step_upper_bound=round(total / args.steps, 3))))


if __name__ == "__main__":
    main()
