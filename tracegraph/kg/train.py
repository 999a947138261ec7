"""ConvE training: read -> model -> train -> checkpoints -> evaluate. Readable top to bottom.

Everything a run did is explained by ``config.json`` beside its checkpoints. A checkpoint holds
the weights, the optimizer, every RNG state and the sampler's generator, so ``--resume`` ends
with the same weights as an uninterrupted run (same seed, CPU).

Under ``torchrun`` (docs/scaling.md) the same loop runs on every rank with DistributedDataParallel:
``batch_size`` stays the *global* batch — each rank takes its share of every single-process batch
— BatchNorm uses global-batch statistics, validation is sharded over ranks, and only rank 0 writes.
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from tracegraph import __version__
from tracegraph.errors import TracegraphError
from tracegraph.kg.conve import ConvE, ConvEConfig
from tracegraph.kg.evaluate import Ranks, evaluate, summarize
from tracegraph.kg.loss import Targets, auto_chunk_size, bce_1n, fused_bce_1n, tied_lookup
from tracegraph.kg.model_io import list_epoch_checkpoints, model_payload
from tracegraph.kg.triples import IdMap, KnownTails, TripleSet, read_labeled_triples, encode_triples, with_reciprocals
from tracegraph.runtime.checkpoints import atomic_write_json, load_checkpoint, save_checkpoint
from tracegraph.runtime.distributed import (
    ShardedBatchSampler, all_gather, all_reduce_sum, barrier, broadcast_module_state, broadcast_object,
    batch_aligned_shard, convert_sync_batchnorm, init_distributed, rank_seed,
)
from tracegraph.runtime.memory import cleanup, format_bytes, peak_memory_bytes, reset_peak
from tracegraph.runtime.precision import resolve_precision
from tracegraph.runtime.progress import log, make_progress
from tracegraph.runtime.seeding import rng_state, seed_everything, set_rng_state


@dataclass
class TrainConfig:
    train: str
    output_dir: str
    valid: str | None = None
    test: str | None = None
    entity_map: str | None = None  # node_dict.txt; built from the training file when absent
    relation_map: str | None = None
    epochs: int = 100
    batch_size: int = 128
    learning_rate: float = 0.003
    lr_decay: float = 1.0  # multiplicative per epoch (1.0 = constant)
    label_smoothing: float = 0.1
    training_mode: str = "kvsall"  # kvsall | 1vsall
    loss_impl: str = "auto"  # auto | standard | fused
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    use_mixed_precision: bool = False
    gradient_checkpointing: bool = False
    memory_cleanup: bool = False
    compile: bool = False
    num_workers: int = 0
    checkpoint_every: int = 1
    eval_every: int = 1
    patience: int = 0  # evaluations without valid-MRR improvement before stopping; 0 = never
    eval_batch_size: int = 256
    resume: bool = False
    overwrite: bool = False  # clear a used run directory first (runtime/rundir.py)
    unseen: str = "include"  # valid/test entities never seen in train: include | drop | error (kg/unseen.py)
    model: dict = field(default_factory=dict)  # ConvEConfig overrides (sizes, dropouts, reciprocal…)


@dataclass
class Data:
    train: TripleSet
    valid: np.ndarray
    test: np.ndarray
    unseen: dict | None = None  # what the --unseen policy found and did (config.json)


def load_data(cfg: TrainConfig) -> Data:
    """Train defines the id maps (unless maps are given); valid/test use the same ids, and their
    entities unseen in train are handled by ``cfg.unseen`` (kg/unseen.py)."""
    from tracegraph.kg.unseen import apply_policy

    lt = read_labeled_triples(cfg.train)
    entities = IdMap.read(cfg.entity_map, "entity map") if cfg.entity_map else IdMap.from_labels(lt.heads + lt.tails)
    relations = IdMap.read(cfg.relation_map, "relation map") if cfg.relation_map else IdMap.from_labels(lt.relations)
    splits = {name: read_labeled_triples(p) for name, p in (("valid", cfg.valid), ("test", cfg.test)) if p}
    entities, splits, unseen = apply_policy(entities, splits, cfg.unseen)
    if unseen.describe():
        log.info(unseen.describe())
    train = TripleSet(encode_triples(lt, entities, relations), entities, relations, cfg.train)
    split = lambda k: encode_triples(splits[k], entities, relations) if k in splits else np.zeros((0, 3), np.int64)
    return Data(train, split("valid"), split("test"), unseen.to_json())


class _Batches(torch.utils.data.Dataset):
    """Training samples; ``dataset[list_of_indices]`` returns one whole batch."""

    def __init__(self, samples: np.ndarray, known: KnownTails | None):
        self.samples, self.known = samples, known  # samples: [n, 3] (1vsAll) or [n, 2] (KvsAll)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        s = self.samples[np.asarray(idx)]
        if self.known is None:
            return s[:, 0], s[:, 1], np.arange(len(s)), s[:, 2]
        bi, tails = self.known.batch(s[:, 0], s[:, 1])
        return s[:, 0], s[:, 1], bi, tails


class TrainingObjective(torch.nn.Module):
    """The training loss as one module, so DistributedDataParallel wraps the whole forward."""

    def __init__(self, model: ConvE, fused: bool, chunk: int, label_smoothing: float):
        super().__init__()
        self.model, self.fused, self.chunk, self.eps = model, fused, chunk, label_smoothing

    def forward(self, h, r, batch_index, tails):
        targets = Targets(batch_index, tails)
        if self.fused:
            m, sink = self.model, {}
            # head embeddings via tied_lookup: their gradient joins the loss's one dE buffer
            x = m.encode_embeddings(tied_lookup(m.entity.weight, h, sink), m.relation(r))
            return fused_bce_1n(x, m.entity.weight, m.entity_bias, targets, self.eps, chunk_size=self.chunk, sink=sink)
        return bce_1n(self.model(h, r), targets, self.eps)


def make_optimizer(model: torch.nn.Module, lr: float, device: torch.device) -> torch.optim.Optimizer:
    # the fused kernel does the whole update in one pass (measured 8x faster than the default on CPU)
    return torch.optim.Adam(model.parameters(), lr=lr, fused=device.type in ("cpu", "cuda"))


def train(cfg: TrainConfig) -> dict:
    out = Path(cfg.output_dir)
    ctx = init_distributed(cfg.device)  # one process: resolve_device(cfg.device); torchrun: this rank's
    device = ctx.device
    precision = resolve_precision(cfg.precision, device, cfg.use_mixed_precision)
    if cfg.training_mode not in ("kvsall", "1vsall"):
        raise TracegraphError("--training-mode must be kvsall or 1vsall")

    # ---- data
    data = load_data(cfg)
    E, R = data.train.num_entities, data.train.num_relations
    mcfg = ConvEConfig(num_entities=E, num_relations=R, **cfg.model)
    train_ids = with_reciprocals(data.train.ids, R) if mcfg.reciprocal else data.train.ids
    all_ids = np.concatenate([data.train.ids, data.valid, data.test])
    filter_index = KnownTails([with_reciprocals(all_ids, R) if mcfg.reciprocal else all_ids], mcfg.num_relation_rows)
    if cfg.training_mode == "kvsall":
        known = KnownTails([train_ids], mcfg.num_relation_rows)
        samples = np.stack(known.pairs(), axis=1)
    else:
        known, samples = None, train_ids
    gen = torch.Generator().manual_seed(cfg.seed)
    sampler = torch.utils.data.BatchSampler(
        torch.utils.data.RandomSampler(range(len(samples)), generator=gen), cfg.batch_size, drop_last=False
    )
    if ctx.active:  # every rank draws the same global batches and keeps its share of each
        sampler = ShardedBatchSampler(sampler, ctx.rank, ctx.world_size)
    loader = torch.utils.data.DataLoader(
        _Batches(samples, known), sampler=sampler, batch_size=None, num_workers=cfg.num_workers,
        generator=gen, pin_memory=device.type == "cuda", persistent_workers=cfg.num_workers > 0,
    )

    # ---- model and optimiser
    seed_everything(cfg.seed)
    model = ConvE(mcfg).to(device)
    if ctx.active:  # global-batch statistics, as one process computes them
        convert_sync_batchnorm(model, device)
    model.gradient_checkpointing = cfg.gradient_checkpointing
    optimizer = make_optimizer(model, cfg.learning_rate, device)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=cfg.lr_decay)
    scaler = precision.grad_scaler()
    local_batch = math.ceil(cfg.batch_size / ctx.world_size)  # the logits one process holds
    fused = cfg.loss_impl == "fused" or (cfg.loss_impl == "auto" and local_batch * E * 4 > 512 * 2**20)
    chunk = auto_chunk_size(local_batch)
    objective = TrainingObjective(model, fused, chunk, cfg.label_smoothing)  # the loss of one batch

    # ---- outputs, resume: nothing is written before the run directory is claimed and the resume checked
    run_id = _claim_run_dir(ctx, out, cfg)
    state = {"history": [], "best_mrr": -1.0, "bad_evals": 0, "skipped_steps": 0}
    start_epoch = 1
    if cfg.resume:
        start_epoch, state = _resume(out, model, optimizer, scheduler, gen, mcfg, run_id)
    if ctx.is_main:
        data.train.entities.write(out / "node_dict.txt")
        data.train.relations.write(out / "rel_dict.txt")
    ddp = None
    step = objective
    if ctx.active:
        # buffers need no broadcast: the synced BatchNorm statistics are identical on every rank
        step = ddp = torch.nn.parallel.DistributedDataParallel(
            objective, device_ids=[device] if device.type == "cuda" else None, forward_sync_buffers=False)
    if cfg.compile:
        step = torch.compile(step)
    if ctx.is_main:
        run_config = dict(run_id=run_id, **_run_config(cfg, mcfg, device, precision.name, fused, data, len(samples)))
        if ctx.active:
            run_config["resolved"].update(world_size=ctx.world_size, backend=ctx.backend,
                                          batch_size_semantics="global (per process: about batch_size / world_size)")
        atomic_write_json(out / "config.json", run_config)
    log.info(
        f"ConvE: {E} entities, {R} relations, {len(data.train)} train triples, {len(samples)} samples "
        f"({cfg.training_mode}), device {device}, precision {precision.name}, loss {'fused' if fused else 'standard'}"
    )

    # ---- train
    stopped_early = False
    with make_progress() as progress:
        ep_task = progress.add_task("epochs", total=cfg.epochs, completed=start_epoch - 1, info="")
        for epoch in range(start_epoch, cfg.epochs + 1):
            t0 = time.perf_counter()
            reset_peak(device)
            model.train()
            lr = optimizer.param_groups[0]["lr"]
            loss_sum, n_batches = 0.0, 0
            b_task = progress.add_task(f"epoch {epoch}", total=len(sampler), info="")
            if ctx.active:  # dropout masks: a stream per rank and epoch, so resume stays exact
                torch.manual_seed(rank_seed(cfg.seed, epoch, ctx.rank))
            for i, (h, r, bi, tails) in enumerate(loader):
                n_global = len(h) if ddp is None else min(cfg.batch_size, len(samples) - i * cfg.batch_size)
                if n_global < max(2, ctx.world_size):  # BatchNorm cannot normalise a batch of one; every rank needs a sample
                    continue
                h, r = h.to(device), r.to(device)
                targets = Targets(bi.to(device), tails.to(device))
                with precision.autocast():
                    loss = step(h, r, targets.batch_index, targets.entity_index)
                    if ddp is not None:  # this rank's mean, weighted so DDP's average is the global-batch mean
                        loss = loss * (len(h) * ctx.world_size / n_global)
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scale_before = scaler.get_scale() if precision.needs_scaler else None
                scaler.step(optimizer)
                scaler.update()
                if ddp is None:
                    loss_val = float(loss.detach())
                else:  # the global-batch loss, the same number on every rank
                    loss_val = float(all_reduce_sum(loss.detach().float().reshape(1).clone())) / ctx.world_size
                if precision.needs_scaler and scaler.get_scale() < scale_before:
                    state["skipped_steps"] += 1  # fp16 overflow: GradScaler skipped this step
                elif not math.isfinite(loss_val):
                    raise TracegraphError(
                        f"loss became {loss_val} at epoch {epoch}, batch {i + 1} (lr {lr:g}); nothing was saved "
                        f"for this epoch. Try a lower --learning-rate or --precision fp32."
                    )
                else:
                    loss_sum += loss_val
                    n_batches += 1
                if cfg.memory_cleanup and i % 8 == 0:
                    cleanup(device)
                progress.update(b_task, advance=1, info=f"loss {loss_val:.4f}")
            progress.remove_task(b_task)
            scheduler.step()

            record = {"epoch": epoch, "lr": lr, "loss": loss_sum / max(n_batches, 1),
                      "seconds": time.perf_counter() - t0, "peak_memory_bytes": peak_memory_bytes(device)}
            if precision.needs_scaler:
                record["skipped_steps_total"] = state["skipped_steps"]
            improved = False
            if len(data.valid) and (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
                res, _ = _evaluate(ctx, model, data.valid, filter_index, batch_size=cfg.eval_batch_size, device=device)
                record["valid"] = res["both"]
                improved = res["both"]["mrr"] > state["best_mrr"]
                if improved:
                    state["best_mrr"], state["bad_evals"] = res["both"]["mrr"], 0
                else:
                    state["bad_evals"] += 1
            state["history"].append(record)
            payload = dict(model_payload(model, epoch, lr, record), run_id=run_id)  # explain refuses mixed runs
            if improved and ctx.is_main:
                save_checkpoint(out / "best_model.pt", payload)
            if (epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs) and ctx.is_main:
                full = dict(payload, optimizer=optimizer.state_dict(), scheduler=scheduler.state_dict(),
                            rng=rng_state(), sampler_rng=gen.get_state(), state=_state_for_ckpt(state))
                save_checkpoint(out / "checkpoints" / f"epoch_{epoch:04d}.pt", full)
            if ctx.is_main:
                atomic_write_json(out / "training_history.json", state["history"])
            barrier()  # torchrun: nobody runs ahead of the checkpoint rank 0 is writing
            valid_txt = f" valid MRR {record['valid']['mrr']:.4f}" if "valid" in record else ""
            log.info(f"epoch {epoch}: loss {record['loss']:.5f}{valid_txt} ({record['seconds']:.1f}s, "
                     f"peak {format_bytes(record['peak_memory_bytes'])})")
            progress.update(ep_task, advance=1, info=f"loss {record['loss']:.4f}{valid_txt}")
            if cfg.patience and state["bad_evals"] >= cfg.patience:
                log.info(f"early stopping: no valid MRR improvement in {cfg.patience} evaluations")
                stopped_early = True
                break

    # ---- finish: final weights, test metrics with the best model
    last = state["history"][-1] if state["history"] else {"epoch": start_epoch - 1, "lr": optimizer.param_groups[0]["lr"]}
    if ctx.is_main:
        save_checkpoint(out / "final_model.pt", dict(model_payload(model, last["epoch"], last["lr"], last), run_id=run_id))
    summary = {"epochs_run": last["epoch"], "stopped_early": stopped_early, "best_valid_mrr": state["best_mrr"],
               "skipped_steps": state["skipped_steps"]}
    if len(data.test):
        has_best = broadcast_object((out / "best_model.pt").is_file())  # rank 0's file system decides
        if has_best:
            if ctx.is_main:
                model.load_state_dict(load_checkpoint(out / "best_model.pt", device)["model"])
            broadcast_module_state(model)  # torchrun: rank 0's weights everywhere, no shared disk needed
        res, _ = _evaluate(ctx, model, data.test, filter_index, batch_size=cfg.eval_batch_size, device=device)
        summary["test"] = res
        if ctx.is_main:
            atomic_write_json(out / "test_results.json", dict(res, model="best_model.pt" if has_best else "final_model.pt"))
        log.info(f"test: MRR {res['both']['mrr']:.4f}, Hits@10 {res['both']['hits@10']:.4f}")
    return summary


def _evaluate(ctx, model, triples: np.ndarray, known: KnownTails, **kw) -> tuple[dict, list[Ranks]]:
    """:func:`evaluate`; under torchrun every rank ranks a contiguous shard of whole batches (the
    batches one process would rank, so the ranks are bitwise the same) and the per-triple ranks are
    gathered: every rank gets the metrics of the whole set."""
    if not ctx.active:
        return evaluate(model, triples, known, **kw)
    lo, hi = batch_aligned_shard(len(triples), kw.get("batch_size", 256), ctx.rank, ctx.world_size)
    _, sides = evaluate(model, triples[lo:hi], known, **kw)
    parts = all_gather([(rk.optimistic, rk.pessimistic, rk.score) for rk in sides])
    sides = [Ranks(rk.side, *(np.concatenate([p[k][j] for p in parts]) for j in range(3))) for k, rk in enumerate(sides)]
    return summarize(sides), sides


def _state_for_ckpt(state: dict) -> dict:
    return {"history_json": json.dumps(state["history"]), "best_mrr": state["best_mrr"],
            "bad_evals": state["bad_evals"], "skipped_steps": state["skipped_steps"]}


def _claim_run_dir(ctx, out: Path, cfg: TrainConfig) -> str:
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


def _resume(out: Path, model, optimizer, scheduler, gen, mcfg: ConvEConfig, run_id: str):
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


def _run_config(cfg: TrainConfig, mcfg: ConvEConfig, device, precision: str, fused: bool, data: Data, n_samples: int) -> dict:
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
