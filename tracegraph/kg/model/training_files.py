"""A training run's directory: claiming it, ``config.json``, and resuming from its last checkpoint.

Kept apart from the loop in ``train.py`` so that reads top to bottom; everything here runs on rank 0
(or is broadcast from it) under torchrun.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from tracegraph import __version__
from tracegraph.errors import TracegraphError
from tracegraph.kg.model.conve import ConvEConfig
from tracegraph.kg.model.model_io import list_epoch_checkpoints
from tracegraph.kg.model.train_config import TrainConfig
from tracegraph.runtime.checkpoints import load_checkpoint
from tracegraph.runtime.distributed import broadcast_object
from tracegraph.runtime.progress import log
from tracegraph.runtime.seeding import set_rng_state


def state_for_checkpoint(state: dict) -> dict:
    return {"history_json": json.dumps(state["history"]), "best_mrr": state["best_mrr"],
            "bad_evals": state["bad_evals"], "skipped_steps": state["skipped_steps"]}


def claim_run_dir(ctx, out: Path, cfg: TrainConfig) -> str:
    """rundir.claim on rank 0; under torchrun every rank gets its run id, or its refusal."""
    from tracegraph.runtime.rundir import claim

    run_id, refusal = None, None
    if ctx.is_main:
        try:
            run_id = claim(out, resume=cfg.resume, overwrite=cfg.overwrite)
        except TracegraphError as e:
            refusal = str(e)
    run_id, refusal = broadcast_object((run_id, refusal))  # one process: unchanged
    if refusal is not None:
        raise TracegraphError(refusal)
    return run_id


def resume(out: Path, model, optimizer, scheduler, gen, mcfg: ConvEConfig, run_id: str):
    ckpts = list_epoch_checkpoints(out)
    if not ckpts:
        raise TracegraphError(f"--resume: no checkpoints in {out / 'checkpoints'}")
    payload = load_checkpoint(ckpts[-1])
    if payload.get("run_id", run_id) != run_id:
        raise TracegraphError(f"--resume: {ckpts[-1]} belongs to another run than {out / 'config.json'} records")
    if payload["model_config"] != mcfg.to_dict():
        raise TracegraphError(f"--resume: {ckpts[-1]} was trained with another model configuration")
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    scheduler.load_state_dict(payload["scheduler"])
    set_rng_state(payload["rng"])
    gen.set_state(payload["sampler_rng"])
    s = payload["state"]
    state = {"history": json.loads(s["history_json"]), "best_mrr": s["best_mrr"], "bad_evals": s["bad_evals"],
             "skipped_steps": s["skipped_steps"]}
    log.info(f"resuming after epoch {payload['epoch']} from {ckpts[-1]}")
    return int(payload["epoch"]) + 1, state


def run_config(cfg: TrainConfig, mcfg: ConvEConfig, device, precision: str, fused: bool, data, n_samples: int) -> dict:
    return {
        "train": asdict(cfg),
        "model": mcfg.to_dict(),
        "resolved": {"device": str(device), "precision": precision, "loss_impl": "fused" if fused else "standard"},
        "sizes": {"entities": data.train.num_entities, "relations": data.train.num_relations,
                  "train_triples": len(data.train), "valid_triples": len(data.valid), "test_triples": len(data.test),
                  "training_samples": n_samples},
        "unseen": data.unseen,
        "versions": {"tracegraph": __version__, "torch": torch.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
    }
