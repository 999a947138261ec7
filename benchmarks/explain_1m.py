"""`tracegraph explain` end to end on 1,000,000 training triples × 1 test triple (≤ 30 s on one GPU).

A generated power-law graph (``--entities`` entities, 50 relations, ``--triples`` training triples) is
trained for one epoch (not timed) to get a real run directory with one checkpoint; then the
timed part is the CLI itself in a fresh process — start-up, reading the 1M-line training file,
loading the checkpoint, exact TracIn over every training triple, top-k CSV — as a user runs it.

    python benchmarks/explain_1m.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_vs_pykeen import make_graph  # noqa: E402

from tracegraph.kg.model.train import TrainConfig, train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--entities", type=int, default=50_000)
    ap.add_argument("--triples", type=int, default=1_000_000)
    ap.add_argument("--loss", default="train-loss")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    ids = make_graph(args.entities, 50, args.triples + 1)
    np.savetxt(tmp / "train.txt", ids[1:], fmt="e%d\tr%d\te%d")
    np.savetxt(tmp / "test.txt", ids[:1], fmt="e%d\tr%d\te%d")
    # entities only in the test triple would be unknown: keep the test triple's ends in train
    run = tmp / "run"
    train(TrainConfig(train=str(tmp / "train.txt"), output_dir=str(run), epochs=1, batch_size=1024, device=args.device))
    cmd = [
        sys.executable,
        "-m",
        "tracegraph",
        "explain",
        "--model-dir",
        str(run),
        "--train",
        str(tmp / "train.txt"),
        "--test-triples",
        str(tmp / "test.txt"),
        "-o",
        str(tmp / "expl"),
        "--device",
        args.device,
        "--loss",
        args.loss,
    ]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode:
        print(res.stderr[-3000:], file=sys.stderr)
        raise SystemExit(res.returncode)
    name = torch.cuda.get_device_name() if torch.device(args.device).type == "cuda" else "cpu"
    print(
        json.dumps(
            dict(
                benchmark="explain_1m",
                training_triples=len(ids) - 1,
                test_triples=1,
                entities=args.entities,
                loss=args.loss,
                seconds_end_to_end=round(wall, 2),
                target_s=30,
                ratio_to_target=round(wall / 30, 3),
                device=name,
            )
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
