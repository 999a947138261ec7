"""Training speed through the real loop (`tracegraph.kg.model.train.train`): seconds per epoch and per batch.

Settings (the targets on one H100 or better):
  * fb15k-237: ConvE paper defaults (d=200, batch 128, KvsAll, reciprocal), from the ConvE authors'
    archive (``--fb15k237 PATH.tar.gz`` or a folder with train.txt) — target ≤ 1.0 s per epoch;
  * graph10k: the generated 10,000-entity graph of benchmarks/train_vs_pykeen.py (~50k triples),
    batch 512 — target ≤ 1.0 ms per batch.
Each runs ``--epochs`` epochs without validation; the figure is the median of epochs 2… (epoch 1
holds CUDA-graph capture and allocator warm-up, reported separately). Variants: fp32 with and
without CUDA graphs, bf16, and (``--compile``) torch.compile. PyKEEN's figures on the same GPU
model come from a measurement (PyKEEN 1.11 LCWA ConvE on one H100 80GB): 21.8 s/epoch on
FB15k-237, 9.4 s/epoch on graph10k; pass ``--pykeen-fb 0 --pykeen-10k 0`` to drop the ratio.

One JSON line per (setting, variant) on stdout.

    python benchmarks/train_epoch_speed.py --device cuda --fb15k237 FB15k-237.tar.gz [--compile]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_vs_pykeen import make_graph  # noqa: E402

from tracegraph.kg.model.train import TrainConfig, train  # noqa: E402


def fb15k237_dir(src: str, tmp: Path) -> Path:
    p = Path(src)
    if p.is_dir():
        return p
    with tarfile.open(p) as tar:
        tar.extractall(tmp / "fb", filter="data")
    return next(f.parent for f in (tmp / "fb").rglob("train.txt"))


def graph10k_dir(tmp: Path) -> Path:
    ids = make_graph(10_000, 50, 50_000)
    d = tmp / "g10k"
    d.mkdir()
    np.savetxt(d / "train.txt", ids, fmt="e%d\tr%d\te%d")
    return d


def run(data: Path, out: Path, device: str, epochs: int, batch: int, **kw) -> dict:
    cfg = TrainConfig(
        train=str(data / "train.txt"),
        output_dir=str(out),
        epochs=epochs,
        batch_size=batch,
        checkpoint_every=10_000,
        device=device,
        **kw,
    )
    train(cfg)
    hist = json.loads((out / "training_history.json").read_text())
    conf = json.loads((out / "config.json").read_text())
    n_batches = -(-conf["sizes"]["training_samples"] // batch)
    secs = [h["seconds"] for h in hist]
    steady = statistics.median(secs[1:]) if len(secs) > 1 else secs[0]
    return dict(
        s_per_epoch=round(steady, 3),
        ms_per_batch=round(1000 * steady / n_batches, 3),
        first_epoch_s=round(secs[0], 3),
        batches_per_epoch=n_batches,
        final_loss=round(hist[-1]["loss"], 5),
        peak_memory_mib=round(hist[-1]["peak_memory_bytes"] / 2**20, 1),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--fb15k237", help="the ConvE authors' FB15k-237.tar.gz, or a folder with train.txt")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--compile", action="store_true", help="add a torch.compile variant")
    ap.add_argument("--variants", default="", help="comma-separated subset of the variant names to run")
    ap.add_argument("--pykeen-fb", type=float, default=21.8)
    ap.add_argument("--pykeen-10k", type=float, default=9.4)
    args = ap.parse_args()
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    variants = {
        "fp32+graphs": {},
        "fp32 eager": dict(cuda_graphs=False),
        "bf16+graphs": dict(precision="bf16"),
        "fp32 no-tf32": dict(tf32=False),
    }
    if args.compile:
        variants["fp32+graphs+compile"] = dict(compile=True)
    if args.variants:
        variants = {k: v for k, v in variants.items() if k in args.variants.split(",")}
    tmp = Path(tempfile.mkdtemp())
    settings = [("graph10k", graph10k_dir(tmp), 512, args.pykeen_10k, "ms_per_batch <= 1.0")]
    if args.fb15k237:
        settings.insert(0, ("fb15k-237", fb15k237_dir(args.fb15k237, tmp), 128, args.pykeen_fb, "s_per_epoch <= 1.0"))
    for setting, data, batch, pykeen, target in settings:
        for vname, kw in variants.items():
            r = run(data, tmp / f"{setting}-{vname.replace(' ', '_')}", args.device, args.epochs, batch, **kw)
            ratio = round(pykeen / r["s_per_epoch"], 1) if pykeen else None
            print(
                json.dumps(
                    dict(
                        benchmark="train_epoch_speed",
                        setting=setting,
                        variant=vname,
                        batch_size=batch,
                        device=name,
                        target=target,
                        pykeen_s_per_epoch_h100=pykeen,
                        speedup_vs_pykeen=ratio,
                        **r,
                    )
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
