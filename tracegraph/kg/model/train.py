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
from typing import Callable

import numpy as np
import torch

from tracegraph import __version__
from tracegraph.errors import TracegraphError
from tracegraph.kg.model.batching import SampleStore
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.evaluate import Ranks, evaluate, summarize
from tracegraph.kg.data.exclusion import exclude_from_samples
from tracegraph.kg.model.loss import Targets, auto_chunk_size, bce_1n, fused_bce_1n, tied_lookup
from tracegraph.kg.model.model_io import list_epoch_checkpoints, model_payload
from tracegraph.kg.model.schedules import make_optimizer, make_schedule, resolve_patience
from tracegraph.kg.model.softmax_loss import LOSSES, ce_1n
from tracegraph.kg.data.triples import IdMap, KnownTails, TripleSet, read_labeled_triples, encode_triples, with_reciprocals
from tracegraph.runtime.checkpoints import atomic_write_json, load_checkpoint, save_checkpoint
from tracegraph.runtime.distributed import (
    ShardedBatchSampler, all_gather, all_reduce_sum, barrier, broadcast_module_state, broadcast_object,
    batch_aligned_shard, convert_sync_batchnorm, init_distributed, rank_seed,
)
from tracegraph.runtime.memory import cleanup, format_bytes, peak_memory_bytes, reset_peak
from tracegraph.runtime.cuda_graph import GraphedStep
from tracegraph.runtime.precision import math_mode, resolve_precision
from tracegraph.runtime.progress import DeviceMeter, log, make_progress, progress_enabled
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
    lr_decay: float = 1.0  # multiplicative per epoch (1.0 = constant); the 'none' schedule only
    lr_scheduler: str = "none"  # none | step | cosine | plateau (tracegraph/kg/model/schedules.py)
    lr_factor: float = 0.5  # step and plateau: multiply the rate by this
    lr_patience: int = 5  # plateau: evaluations without improvement before lowering the rate
    lr_step_size: int = 50  # step: epochs between reductions
    lr_min: float = 0.0  # cosine: final rate; plateau: lowest rate
    lr_threshold: float = 1e-4  # plateau: relative MRR gain that counts as improvement
    optimizer: str = "adam"  # adam | adagrad
    weight_decay: float = 0.0  # L2 on all parameters, in the optimizer
    loss: str = "bce"  # bce (ConvE paper) | ce (softmax cross-entropy, LibKGE's "kl")
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
    patience: int | None = None  # evaluations without valid-MRR gain before stopping; 0 = never; None: 10 with valid
    min_epochs: int = 0  # no early stopping before this epoch
    eval_batch_size: int = 0  # queries ranked at once; 0 = auto (256 on CPU; on a GPU up to 4096, ~256 MiB of scores)
    tf32: bool = True  # CUDA: TF32 matmuls while training (exactness claims turn it off themselves)
    deterministic: bool = False  # CUDA: deterministic kernels, bit-exact reruns (slower)
    cuda_graphs: bool = True  # CUDA: replay each full-size batch's step as one captured graph
    resume: bool = False
    # training triples (a triples file) left out while every batch keeps its place: see kg/data/exclusion.py
    exclude: str | None = None
    overwrite: bool = False  # clear a used run directory first (runtime/rundir.py)
    unseen: str = "include"  # valid/test entities never seen in train: include | drop | error (kg/data/unseen.py)
    model: dict = field(default_factory=dict)  # ConvEConfig overrides (sizes, dropouts, reciprocal…)
    filter_triples: list = field(default_factory=list)  # more known-true triple files, only filtered out of rankings
    preset: str | None = None  # the preset these settings came from (tracegraph/kg/model/presets)
    preset_sha256: str | None = None  # of the preset file's bytes


@dataclass
class Data:
    train: TripleSet
    valid: np.ndarray
    test: np.ndarray
    unseen: dict | None = None  # what the --unseen policy found and did (config.json)


def load_data(cfg: TrainConfig) -> Data:
    """Train defines the id maps (unless maps are given); valid/test use the same ids, and their
    entities unseen in train are handled by ``cfg.unseen`` (kg/data/unseen.py)."""
    from tracegraph.kg.data.unseen import apply_policy

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


class TrainingObjective(torch.nn.Module):
    """The training loss as one module, so DistributedDataParallel wraps the whole forward."""

    def __init__(self, model: ConvE, fused: bool, chunk: int, label_smoothing: float, loss: str = "bce"):
        super().__init__()
        self.model, self.fused, self.chunk, self.eps = model, fused, chunk, label_smoothing
        self.loss = ce_1n if loss == "ce" else bce_1n

    def forward(self, h, r, batch_index, tails, weight=None):
        targets = Targets(batch_index, tails, weight)
        if self.fused:
            m, sink = self.model, {}
            # head embeddings via tied_lookup: their gradient joins the loss's one dE buffer
            x = m.encode_embeddings(tied_lookup(m.entity.weight, h, sink), m.relation(r))
            return fused_bce_1n(x, m.entity.weight, m.entity_bias, targets, self.eps, chunk_size=self.chunk, sink=sink)
        return self.loss(self.model(h, r), targets, self.eps)


def train(cfg: TrainConfig, on_evaluation: Callable[[int, float], None] | None = None) -> dict:
    """Train, evaluate, save. ``on_evaluation(epoch, valid_mrr)`` is called after every valid
    evaluation (``tracegraph tune`` reports to its pruner there; raising stops the run)."""
    with math_mode(tf32=cfg.tf32, deterministic=cfg.deterministic):
        return _train(cfg, on_evaluation)


def _train(cfg: TrainConfig, on_evaluation) -> dict:
    out = Path(cfg.output_dir)
    ctx = init_distributed(cfg.device)  # one process: resolve_device(cfg.device); torchrun: this rank's
    device = ctx.device
    precision = resolve_precision(cfg.precision, device, cfg.use_mixed_precision)
    if cfg.training_mode not in ("kvsall", "1vsall"):
        raise TracegraphError("--training-mode must be kvsall or 1vsall")
    if cfg.loss not in LOSSES:
        raise TracegraphError(f"--loss must be one of {', '.join(LOSSES)}, not {cfg.loss!r}")
    if cfg.loss == "ce" and cfg.loss_impl == "fused":
        raise TracegraphError("--loss ce has no fused implementation; use --loss-impl standard or auto")
    patience = resolve_patience(cfg.patience, bool(cfg.valid))

    # ---- data
    data = load_data(cfg)
    E, R = data.train.num_entities, data.train.num_relations
    mcfg = ConvEConfig(num_entities=E, num_relations=R, **cfg.model)
    train_ids = with_reciprocals(data.train.ids, R) if mcfg.reciprocal else data.train.ids
    # tune passes its test file here: valid is filtered with test as usual, yet never ranked on test
    extra = [encode_triples(read_labeled_triples(p), data.train.entities, data.train.relations) for p in cfg.filter_triples]
    all_ids = np.concatenate([data.train.ids, data.valid, data.test, *extra])
    filter_index = KnownTails([with_reciprocals(all_ids, R) if mcfg.reciprocal else all_ids], mcfg.num_relation_rows)
    if cfg.training_mode == "kvsall":
        known = KnownTails([train_ids], mcfg.num_relation_rows)
        samples = np.stack(known.pairs(), axis=1)
    else:
        known, samples = None, train_ids
    keep = None
    if cfg.exclude and ctx.active:
        raise TracegraphError("excluding training triples (TrainConfig.exclude) runs in one process: "
                              "torchrun's batch bookkeeping assumes whole batches")
    if cfg.exclude:  # same samples and batch order as the full set; the excluded triples masked out
        known, keep = exclude_from_samples(cfg.exclude, data.train, samples, known, mcfg)
    # batches are built on the device (kg/model/batching.py); the seeded sampler only draws their order
    store = SampleStore(samples, known, device, keep)
    gen = torch.Generator().manual_seed(cfg.seed)
    sampler = torch.utils.data.BatchSampler(
        torch.utils.data.RandomSampler(range(len(samples)), generator=gen), cfg.batch_size, drop_last=False
    )
    if ctx.active:  # every rank draws the same global batches and keeps its share of each
        sampler = ShardedBatchSampler(sampler, ctx.rank, ctx.world_size)
    if cfg.num_workers:
        log.info("--num-workers: batches are built on the training device, so no loader workers are needed")

    # ---- model and optimiser
    seed_everything(cfg.seed)
    model = ConvE(mcfg).to(device)
    if ctx.active:  # global-batch statistics, as one process computes them
        convert_sync_batchnorm(model, device)
    model.gradient_checkpointing = cfg.gradient_checkpointing
    # CUDA graphs need static shapes and no host syncs: not with GradScaler (fp16), DDP's
    # communication hooks, checkpointing's RNG replay, or an optimizer that reads its step on the host
    use_graphs = (cfg.cuda_graphs and device.type == "cuda" and not ctx.active and not precision.needs_scaler
                  and not cfg.gradient_checkpointing and cfg.optimizer == "adam")
    optimizer = make_optimizer(model, cfg.learning_rate, device, cfg.optimizer, cfg.weight_decay, capturable=use_graphs)
    scheduler = make_schedule(optimizer, cfg)
    scaler = precision.grad_scaler()
    local_batch = math.ceil(cfg.batch_size / ctx.world_size)  # the logits one process holds
    fused = cfg.loss == "bce" and (cfg.loss_impl == "fused" or (cfg.loss_impl == "auto" and local_batch * E * 4 > 512 * 2**20))
    chunk = auto_chunk_size(local_batch)
    objective = TrainingObjective(model, fused, chunk, cfg.label_smoothing, cfg.loss)  # the loss of one batch
    eval_bs = cfg.eval_batch_size or (256 if device.type != "cuda" else int(min(4096, max(256, 2**26 // E))))

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
        run_config["resolved"]["patience"] = patience  # what --patience's default became for this run
        if ctx.active:
            run_config["resolved"].update(world_size=ctx.world_size, backend=ctx.backend,
                                          batch_size_semantics="global (per process: about batch_size / world_size)")
        atomic_write_json(out / "config.json", run_config)
    log.info(
        f"ConvE: {E} entities, {R} relations, {len(data.train)} train triples, {len(samples)} samples "
        f"({cfg.training_mode}), device {device}, precision {precision.name}, loss {'fused' if fused else 'standard'}"
    )

    # ---- train
    meter = DeviceMeter(device)

    def run_step(index: torch.Tensor, n_targets: int, padded: bool, loss_scale: float = 1.0) -> torch.Tensor:
        """One optimisation step on the samples at ``index``; no host sync (fp16's GradScaler aside)."""
        optimizer.zero_grad(set_to_none=True)
        h, r = store.heads_relations(index)
        t = store.targets(index, n_targets, padded)
        with precision.autocast():
            loss = step(h, r, t.batch_index, t.entity_index, t.weight)
            if loss_scale != 1.0:  # torchrun: this rank's mean, weighted so DDP's average is the global-batch mean
                loss = loss * loss_scale
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    graphed, capacity = None, [0]
    if use_graphs:  # full-size batches replay one graph, their targets padded to a capacity (below)
        graphed = GraphedStep(lambda index: meter.add(run_step(index, capacity[0], padded=True)))

    stopped_early = False
    with make_progress() as progress:
        ep_task = progress.add_task("epochs", total=cfg.epochs, completed=start_epoch - 1, info="")
        for epoch in range(start_epoch, cfg.epochs + 1):
            t0 = time.perf_counter()
            reset_peak(device)
            model.train()
            lr = optimizer.param_groups[0]["lr"]
            meter.reset()
            batches = store.epoch(list(sampler))
            if graphed is not None:  # the epoch's largest batch, to a power of two: grows rarely, each growth re-captures
                need = max((store.target_count(b) for b in batches if len(b) == cfg.batch_size), default=1)
                capacity[0] = max(capacity[0], 1 << (need - 1).bit_length())
            b_task = progress.add_task(f"epoch {epoch}", total=len(batches), info="")
            if ctx.active:  # dropout masks: a stream per rank and epoch, so resume stays exact
                torch.manual_seed(rank_seed(cfg.seed, epoch, ctx.rank))
            for batch in batches:
                i = batch.number
                n_global = len(batch) if ddp is None else min(cfg.batch_size, len(samples) - i * cfg.batch_size)
                if n_global < max(2, ctx.world_size):  # BatchNorm cannot normalise a batch of one; every rank needs a sample
                    continue
                if not ctx.active:  # dropout masks per batch: a shorter batch elsewhere leaves this one's alone
                    torch.manual_seed(rank_seed(cfg.seed, epoch, i))  # (a captured graph reads the new seed at replay)
                if graphed is not None and len(batch) == cfg.batch_size:
                    graphed(batch.index, key=(lr, capacity[0]))  # both are frozen into a capture
                else:
                    scale_before = scaler.get_scale() if precision.needs_scaler else None
                    loss = run_step(batch.index, store.target_count(batch), padded=False,
                                    loss_scale=1.0 if ddp is None else len(batch) * ctx.world_size / n_global)
                    if precision.needs_scaler and scaler.get_scale() < scale_before:
                        state["skipped_steps"] += 1  # fp16 overflow: GradScaler skipped this step
                    else:
                        meter.add(loss)
                if cfg.memory_cleanup and i % 8 == 0:
                    cleanup(device)
                progress.update(b_task, advance=1)
                if progress_enabled() and i % 200 == 199:  # an occasional sync, only when someone watches
                    progress.update(b_task, info=f"loss {meter.read()['mean']:.4f}")
            progress.remove_task(b_task)
            seen = _epoch_loss(meter, ctx)
            if seen["bad"]:
                raise TracegraphError(
                    f"loss became {seen['first_bad_value']} at epoch {epoch}, step {seen['first_bad_step'] + 1} "
                    f"(lr {lr:g}); nothing was saved for this epoch. Try a lower --learning-rate or --precision fp32."
                )
            scheduler.after_epoch()

            record = {"epoch": epoch, "lr": lr, "loss": seen["mean"],
                      "seconds": time.perf_counter() - t0, "peak_memory_bytes": peak_memory_bytes(device)}
            if precision.needs_scaler:
                record["skipped_steps_total"] = state["skipped_steps"]
            improved = False
            if len(data.valid) and (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
                res, _ = _evaluate(ctx, model, data.valid, filter_index, batch_size=eval_bs, device=device)
                record["valid"] = res["both"]
                improved = res["both"]["mrr"] > state["best_mrr"]
                if improved:
                    state["best_mrr"], state["bad_evals"] = res["both"]["mrr"], 0
                else:
                    state["bad_evals"] += 1
                scheduler.after_evaluation(res["both"]["mrr"])
                if on_evaluation is not None:
                    on_evaluation(epoch, res["both"]["mrr"])
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
            if patience and state["bad_evals"] >= patience and epoch >= cfg.min_epochs:
                log.info(f"early stopping: no valid MRR improvement in {patience} evaluations")
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
        res, _ = _evaluate(ctx, model, data.test, filter_index, batch_size=eval_bs, device=device)
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


def _epoch_loss(meter: DeviceMeter, ctx) -> dict:
    """The epoch's mean loss; under torchrun, of the global batches (the same number on every rank)."""
    if not ctx.active:
        return meter.read()
    local = meter.read()
    tot = all_reduce_sum(torch.tensor([local["mean"] * local["count"], local["count"], local["bad"]],
                                      dtype=torch.float64, device=ctx.device))
    count = tot[1].item() / ctx.world_size
    return dict(local, mean=tot[0].item() / ctx.world_size / max(count, 1), bad=int(tot[2].item()))


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
