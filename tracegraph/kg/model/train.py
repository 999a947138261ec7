"""ConvE training: read -> model -> train -> checkpoints -> evaluate.

Readable top to bottom: ``_train`` is the loop; ``build_session`` (``train_session.py``: data,
batches, model, optimiser), ``_train_epoch``, ``_validate``, ``_save`` and ``_finish`` are its
stages, sharing one :class:`Session`. The run directory's bookkeeping (claim, config.json, resume) is in
``training_files.py``, the settings in ``train_config.py``, reading the triples in
``train_data.py`` and the loss a step takes in ``objective.py``.

Everything a run did is explained by ``config.json`` beside its checkpoints. A checkpoint holds
the weights, the optimizer, every RNG state and the sampler's generator, so ``--resume`` ends
with the same weights as an uninterrupted run (same seed, CPU).

Under ``torchrun`` (docs/scaling.md) the same loop runs on every rank with DistributedDataParallel:
``batch_size`` stays the *global* batch — each rank takes its share of every single-process batch
— BatchNorm uses global-batch statistics, validation is sharded over ranks, and only rank 0 writes.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.triples import (
    KnownTails,
)
from tracegraph.kg.model.evaluate import Ranks, evaluate, summarize
from tracegraph.kg.model.model_io import model_payload
from tracegraph.kg.model.training_files import (
    RESUME_CHECKPOINT,
    claim_run_dir,
    resume,
    resume_payload,
    test_results,
)
from tracegraph.kg.model.train_config import TrainConfig  # noqa: F401  (the public name lives here too)
from tracegraph.kg.model.train_session import Session, build_session, prepare_step, write_run_files
from tracegraph.runtime.checkpoints import atomic_write_json, load_checkpoint, save_checkpoint
from tracegraph.runtime.cuda_graph import GraphedStep
from tracegraph.runtime.distributed import (
    all_gather,
    all_reduce_sum,
    barrier,
    broadcast_module_state,
    broadcast_object,
    batch_aligned_shard,
    rank_seed,
)
from tracegraph.runtime.memory import cleanup, format_bytes, peak_memory_bytes, reset_peak
from tracegraph.runtime.precision import math_mode
from tracegraph.runtime.progress import DeviceMeter, log, make_progress, progress_enabled
from tracegraph.runtime.seeding import seed_torch


def train(
    cfg: TrainConfig,
    on_evaluation: Callable[[int, float], None] | None = None,
    on_epoch: Callable[[int, int, dict], None] | None = None,
) -> dict:
    """Train a ConvE model, evaluate it and save checkpoints into ``cfg.output_dir``.

    Args:
        cfg: The training config.
        on_evaluation: Called as ``on_evaluation(epoch, valid_mrr)`` after every validation
            (``tracegraph tune`` reports to its pruner there; raising stops the run).
        on_epoch: Called as ``on_epoch(epoch, epochs, record)`` after every epoch is saved, with
            the epoch's ``training_history.json`` record (a caller's own progress lines).

    Returns:
        ``epochs_run``, ``stopped_early``, ``best_valid_mrr``, ``skipped_steps`` and, with test
        triples, ``test`` (the metrics of the best model, else the final one).

    Raises:
        TracegraphError: If a setting is invalid or the run directory cannot be used.
        DataError: If an input file is malformed.
    """
    _check_counts(cfg)
    with math_mode(tf32=cfg.tf32, deterministic=cfg.deterministic):
        return _train(cfg, on_evaluation, on_epoch)


def _check_counts(cfg: TrainConfig) -> None:
    """The counts the CLI bounds, checked for Python callers too (a 0 would divide by zero later).

    0 epochs is allowed: the initial model is saved as epoch 0.
    """
    for name, least in (("epochs", 0), ("batch_size", 1), ("checkpoint_every", 1), ("eval_every", 1)):
        value = getattr(cfg, name)
        if not isinstance(value, int) or value < least:
            raise TracegraphError(f"{name} must be a whole number of at least {least}, not {value!r}")


def _train(cfg: TrainConfig, on_evaluation, on_epoch) -> dict:
    s = build_session(cfg)  # data, batches, model, optimiser; nothing is written before the directory is claimed
    s.run_id = claim_run_dir(s.ctx, s.out, cfg)
    state, start_epoch = {"history": [], "best_mrr": -1.0, "bad_evals": 0, "skipped_steps": 0}, 1
    if cfg.resume:
        start_epoch, state = resume(s.out, s.model, s.optimizer, s.scheduler, s.gen, s.mcfg, s.run_id, cfg)
    prepare_step(s)
    write_run_files(s, state.pop("changes", []))

    meter = DeviceMeter(s.device)
    run_step = _step_function(s)
    graphed, capacity = None, [0]
    if s.use_graphs:  # full-size batches replay one graph, their targets padded to a capacity (_train_epoch)
        graphed = GraphedStep(lambda index: meter.add(run_step(index, capacity[0], padded=True)))

    stopped_early = False
    with make_progress() as progress:
        ep_task = progress.add_task("epochs", total=cfg.epochs, completed=start_epoch - 1, info="")
        for epoch in range(start_epoch, cfg.epochs + 1):
            record = _train_epoch(s, epoch, meter, run_step, graphed, capacity, state, progress)
            improved = _validate(s, epoch, record, state, on_evaluation)
            state["history"].append(record)
            _save(s, epoch, record, state, improved)
            valid_txt = f" valid MRR {record['valid']['mrr']:.4f}" if "valid" in record else ""
            log.info(
                f"epoch {epoch}: loss {record['loss']:.5f}{valid_txt} ({record['seconds']:.1f}s, "
                f"peak {format_bytes(record['peak_memory_bytes'])})"
            )
            progress.update(ep_task, advance=1, info=f"loss {record['loss']:.4f}{valid_txt}")
            if on_epoch is not None:
                on_epoch(epoch, cfg.epochs, record)
            if s.patience and state["bad_evals"] >= s.patience and epoch >= cfg.min_epochs:
                log.info(f"early stopping: no valid MRR improvement in {s.patience} evaluations")
                stopped_early = True
                break
    return _finish(s, state, start_epoch, stopped_early)


def _step_function(s: Session) -> Callable[..., torch.Tensor]:
    def run_step(index: torch.Tensor, n_targets: int, padded: bool, loss_scale: float = 1.0) -> torch.Tensor:
        """One optimisation step on the samples at ``index``; no host sync (fp16's GradScaler aside)."""
        s.optimizer.zero_grad(set_to_none=True)
        h, r = s.store.heads_relations(index)
        t = s.store.targets(index, n_targets, padded)
        with s.precision.autocast():
            loss = s.step(h, r, t.batch_index, t.entity_index, t.weight)
            if loss_scale != 1.0:  # torchrun: this rank's mean, weighted so DDP's average is the global-batch mean
                loss = loss * loss_scale
        s.scaler.scale(loss).backward()
        s.scaler.step(s.optimizer)
        s.scaler.update()
        return loss.detach()

    return run_step


def _train_epoch(
    s: Session, epoch: int, meter: DeviceMeter, run_step, graphed, capacity: list, state: dict, progress
) -> dict:
    """One pass over the training samples; returns the epoch's history record (loss, lr, time, memory)."""
    cfg, ctx = s.cfg, s.ctx
    t0 = time.perf_counter()
    reset_peak(s.device)
    s.model.train()
    lr = s.optimizer.param_groups[0]["lr"]
    meter.reset()
    batches = s.store.epoch(list(s.sampler))
    if graphed is not None:  # the epoch's largest batch, to a power of two: grows rarely, each growth re-captures
        need = max((s.store.target_count(b) for b in batches if len(b) == cfg.batch_size), default=1)
        capacity[0] = max(capacity[0], 1 << (need - 1).bit_length())
    b_task = progress.add_task(f"epoch {epoch}", total=len(batches), info="")
    if ctx.active:  # dropout masks: a stream per rank and epoch, so resume stays exact
        seed_torch(rank_seed(cfg.seed, epoch, ctx.rank))
    for batch in batches:
        i = batch.number
        n_global = len(batch) if s.ddp is None else min(cfg.batch_size, s.n_samples - i * cfg.batch_size)
        if n_global < max(2, ctx.world_size):  # BatchNorm cannot normalise a batch of one; every rank needs a sample
            continue
        if not ctx.active:  # dropout masks per batch: a shorter batch elsewhere leaves this one's alone
            seed_torch(rank_seed(cfg.seed, epoch, i))  # (a captured graph reads the new seed at replay)
        if graphed is not None and len(batch) == cfg.batch_size:
            graphed(batch.index, key=(lr, capacity[0]))  # both are frozen into a capture
        else:
            scale_before = s.scaler.get_scale() if s.precision.needs_scaler else None
            loss = run_step(
                batch.index,
                s.store.target_count(batch),
                padded=False,
                loss_scale=1.0 if s.ddp is None else len(batch) * ctx.world_size / n_global,
            )
            if s.precision.needs_scaler and s.scaler.get_scale() < scale_before:
                state["skipped_steps"] += 1  # fp16 overflow: GradScaler skipped this step
            else:
                meter.add(loss)
        if cfg.memory_cleanup and i % 8 == 0:
            cleanup(s.device)
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
    s.scheduler.after_epoch()
    record = {
        "epoch": epoch,
        "lr": lr,
        "loss": seen["mean"],
        "seconds": time.perf_counter() - t0,
        "peak_memory_bytes": peak_memory_bytes(s.device),
    }
    if s.precision.needs_scaler:
        record["skipped_steps_total"] = state["skipped_steps"]
    return record


def _validate(s: Session, epoch: int, record: dict, state: dict, on_evaluation) -> bool:
    """Valid MRR every ``eval_every`` epochs (and after the last); True when it improved."""
    cfg = s.cfg
    if not len(s.data.valid) or not (epoch % cfg.eval_every == 0 or epoch == cfg.epochs):
        return False
    res, _ = _evaluate(s.ctx, s.model, s.data.valid, s.filter_index, batch_size=s.eval_batch_size, device=s.device)
    record["valid"] = res["both"]
    improved = res["both"]["mrr"] > state["best_mrr"]
    if improved:
        state["best_mrr"], state["bad_evals"] = res["both"]["mrr"], 0
    else:
        state["bad_evals"] += 1
    s.scheduler.after_evaluation(res["both"]["mrr"])
    if on_evaluation is not None:
        on_evaluation(epoch, res["both"]["mrr"])
    return improved


def _save(s: Session, epoch: int, record: dict, state: dict, improved: bool) -> None:
    """Save what an epoch leaves.

    best_model.pt on improvement; the weights and lr (what TracIn sums) every ``checkpoint_every``
    epochs; the full state, for an exact resume, in one rolling checkpoint every epoch; the history.
    """
    cfg = s.cfg
    payload = dict(model_payload(s.model, epoch, record["lr"], record), run_id=s.run_id)  # explain refuses mixed runs
    if improved and s.ctx.is_main:
        save_checkpoint(s.out / "best_model.pt", payload)
    if (epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs) and s.ctx.is_main:
        save_checkpoint(s.out / "checkpoints" / f"epoch_{epoch:04d}.pt", payload)
    if s.ctx.is_main:
        full = resume_payload(payload, s.optimizer, s.scheduler, s.gen, state)
        save_checkpoint(s.out / "checkpoints" / RESUME_CHECKPOINT, full)
        atomic_write_json(s.out / "training_history.json", state["history"])
    barrier()  # torchrun: nobody runs ahead of the checkpoint rank 0 is writing


def _finish(s: Session, state: dict, start_epoch: int, stopped_early: bool) -> dict:
    """Final weights, then test metrics with the best model."""
    out, model = s.out, s.model
    last = (
        state["history"][-1]
        if state["history"]
        else {"epoch": start_epoch - 1, "lr": s.optimizer.param_groups[0]["lr"]}
    )
    if s.ctx.is_main:
        save_checkpoint(
            out / "final_model.pt", dict(model_payload(model, last["epoch"], last["lr"], last), run_id=s.run_id)
        )
    summary = {
        "epochs_run": last["epoch"],
        "stopped_early": stopped_early,
        "best_valid_mrr": state["best_mrr"],
        "skipped_steps": state["skipped_steps"],
    }
    if len(s.data.test):
        has_best = broadcast_object((out / "best_model.pt").is_file())  # rank 0's file system decides
        if has_best:
            if s.ctx.is_main:
                model.load_state_dict(load_checkpoint(out / "best_model.pt", s.device)["model"])
            broadcast_module_state(model)  # torchrun: rank 0's weights everywhere, no shared disk needed
        res, _ = _evaluate(s.ctx, model, s.data.test, s.filter_index, batch_size=s.eval_batch_size, device=s.device)
        summary["test"] = res
        if s.ctx.is_main:
            model_file = out / ("best_model.pt" if has_best else "final_model.pt")
            atomic_write_json(out / "test_results.json", test_results(s.cfg, res, model_file, s.data.unseen))
        log.info(f"test: MRR {res['both']['mrr']:.4f}, Hits@10 {res['both']['hits@10']:.4f}")
    return summary


def _evaluate(ctx, model, triples: np.ndarray, known: KnownTails, **kw) -> tuple[dict, list[Ranks]]:
    """:func:`evaluate`, sharded over ranks under torchrun.

    Every rank ranks a contiguous shard of whole batches (the batches one process would rank, so the
    ranks are bitwise the same) and the per-triple ranks are gathered: every rank gets the metrics
    of the whole set.
    """
    if not ctx.active:
        return evaluate(model, triples, known, **kw)
    lo, hi = batch_aligned_shard(len(triples), kw.get("batch_size", 256), ctx.rank, ctx.world_size)
    _, sides = evaluate(model, triples[lo:hi], known, **kw)
    parts = all_gather([(rk.optimistic, rk.pessimistic, rk.score) for rk in sides])
    sides = [
        Ranks(rk.side, *(np.concatenate([p[k][j] for p in parts]) for j in range(3))) for k, rk in enumerate(sides)
    ]
    return summarize(sides), sides


def _epoch_loss(meter: DeviceMeter, ctx) -> dict:
    """The epoch's mean loss; under torchrun, of the global batches (the same number on every rank)."""
    if not ctx.active:
        return meter.read()
    local = meter.read()
    tot = all_reduce_sum(
        torch.tensor(
            [local["mean"] * local["count"], local["count"], local["bad"]], dtype=torch.float64, device=ctx.device
        )
    )
    count = tot[1].item() / ctx.world_size
    return dict(local, mean=tot[0].item() / ctx.world_size / max(count, 1), bad=int(tot[2].item()))
