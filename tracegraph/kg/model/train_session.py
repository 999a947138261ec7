"""What a training run builds before its first step, shared by the loop's stages in ``train.py``.

:func:`build_session` checks the options, reads the data, builds the batches, the model and its
optimiser into one :class:`Session`; nothing is written before ``train`` claims the run directory.
:func:`prepare_step` wraps the objective for torchrun and ``--compile`` once a resume has loaded
the weights, and :func:`write_run_files` writes the id maps and ``config.json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.exclusion import exclude_from_samples
from tracegraph.kg.data.triples import (
    KnownTails,
    encode_triples,
    read_labeled_triples,
    with_reciprocals,
)
from tracegraph.kg.model.batching import SampleStore
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.loss import auto_chunk_size
from tracegraph.kg.model.objective import TrainingObjective
from tracegraph.kg.model.training_files import (
    run_config,
)
from tracegraph.kg.model.schedules import make_optimizer, make_schedule, resolve_patience
from tracegraph.kg.model.softmax_loss import LOSSES
from tracegraph.kg.model.train_config import TrainConfig
from tracegraph.kg.model.train_data import Data, load_data
from tracegraph.runtime.allocator import keep_freed_buffers
from tracegraph.runtime.checkpoints import atomic_write_json
from tracegraph.runtime.distributed import (
    ShardedBatchSampler,
    init_distributed,
)
from tracegraph.runtime.sync_batchnorm import convert_sync_batchnorm
from tracegraph.runtime.precision import resolve_precision
from tracegraph.runtime.progress import log
from tracegraph.runtime.seeding import seed_everything


@dataclass
class Session:
    """What one training run builds before its first step; the loop's stages below share it."""

    cfg: TrainConfig
    ctx: Any  # runtime.distributed context: this rank under torchrun, inactive in one process
    precision: Any  # runtime.precision policy: autocast, GradScaler
    data: Data
    mcfg: ConvEConfig
    filter_index: KnownTails  # train + valid + test (+ --filter-triples): the filtered ranking's known tails
    n_samples: int
    store: SampleStore
    sampler: Any  # draws each epoch's batch order (seeded by ``gen``, which checkpoints save)
    gen: torch.Generator
    model: ConvE
    objective: TrainingObjective
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: Any
    use_graphs: bool
    eval_batch_size: int
    patience: int
    run_id: str = ""
    step: Any = None  # the objective as called: DDP-wrapped and/or compiled
    ddp: Any = None

    @property
    def out(self) -> Path:
        """The run directory."""
        return Path(self.cfg.output_dir)

    @property
    def device(self) -> torch.device:
        """This process's training device."""
        return self.ctx.device


def build_session(cfg: TrainConfig) -> Session:
    """Check the options, read the data, build the batches, the model and its optimiser."""
    ctx = init_distributed(cfg.device)  # one process: resolve_device(cfg.device); torchrun: this rank's
    device = ctx.device
    if device.type == "cpu":
        keep_freed_buffers()  # the step's temporaries reuse freed memory instead of faulting in fresh pages
    precision = resolve_precision(cfg.precision, device, cfg.use_mixed_precision)
    if cfg.training_mode not in ("kvsall", "1vsall"):
        raise TracegraphError("--training-mode must be kvsall or 1vsall")
    if cfg.loss not in LOSSES:
        raise TracegraphError(f"--loss must be one of {', '.join(LOSSES)}, not {cfg.loss!r}")
    if cfg.loss == "ce" and cfg.loss_impl == "fused":
        raise TracegraphError("--loss ce has no fused implementation; use --loss-impl standard or auto")
    if cfg.exclude and ctx.active:
        raise TracegraphError(
            "excluding training triples (TrainConfig.exclude) runs in one process: "
            "torchrun's batch bookkeeping assumes whole batches"
        )
    patience = resolve_patience(cfg.patience, bool(cfg.valid))

    # ---- data and batches
    data = load_data(cfg)
    E, R = data.train.num_entities, data.train.num_relations
    mcfg = ConvEConfig(num_entities=E, num_relations=R, **cfg.model)
    train_ids = with_reciprocals(data.train.ids, R) if mcfg.reciprocal else data.train.ids
    # tune passes its test file here: valid is filtered with test as usual, yet never ranked on test
    extra = [
        encode_triples(read_labeled_triples(p), data.train.entities, data.train.relations) for p in cfg.filter_triples
    ]
    all_ids = np.concatenate([data.train.ids, data.valid, data.test, *extra])
    filter_index = KnownTails([with_reciprocals(all_ids, R) if mcfg.reciprocal else all_ids], mcfg.num_relation_rows)
    if cfg.training_mode == "kvsall":
        known = KnownTails([train_ids], mcfg.num_relation_rows)
        samples = np.stack(known.pairs(), axis=1)
    else:
        known, samples = None, train_ids
    keep = None
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
    use_graphs = (
        cfg.cuda_graphs
        and device.type == "cuda"
        and not ctx.active
        and not precision.needs_scaler
        and not cfg.gradient_checkpointing
        and cfg.optimizer == "adam"
    )
    optimizer = make_optimizer(model, cfg.learning_rate, device, cfg.optimizer, cfg.weight_decay, capturable=use_graphs)
    local_batch = math.ceil(cfg.batch_size / ctx.world_size)  # the logits one process holds
    fused = cfg.loss == "bce" and (
        cfg.loss_impl == "fused" or (cfg.loss_impl == "auto" and local_batch * E * 4 > 512 * 2**20)
    )
    objective = TrainingObjective(model, fused, auto_chunk_size(local_batch), cfg.label_smoothing, cfg.loss)
    eval_bs = cfg.eval_batch_size or (256 if device.type != "cuda" else int(min(4096, max(256, 2**26 // E))))
    return Session(
        cfg,
        ctx,
        precision,
        data,
        mcfg,
        filter_index,
        len(samples),
        store,
        sampler,
        gen,
        model,
        objective,
        optimizer,
        make_schedule(optimizer, cfg),
        precision.grad_scaler(),
        use_graphs,
        eval_bs,
        patience,
    )


def prepare_step(s: Session) -> None:
    """Wrap the objective for torchrun (DDP) and ``--compile``, after a resume has loaded the weights."""
    s.step = s.objective
    if s.ctx.active:
        # buffers need no broadcast: the synced BatchNorm statistics are identical on every rank
        s.step = s.ddp = torch.nn.parallel.DistributedDataParallel(
            s.objective, device_ids=[s.device] if s.device.type == "cuda" else None, forward_sync_buffers=False
        )
    if s.cfg.compile:
        s.step = torch.compile(s.step)


def write_run_files(s: Session, changes: list) -> None:
    """The id maps and config.json: what explains this run (rank 0 only)."""
    if not s.ctx.is_main:
        return
    s.data.train.entities.write(s.out / "node_dict.txt")
    s.data.train.relations.write(s.out / "rel_dict.txt")
    written = dict(
        run_id=s.run_id, **run_config(s.cfg, s.mcfg, s.device, s.precision.name, s.objective.fused, s.data, s.n_samples)
    )
    written["resolved"]["patience"] = s.patience  # what --patience's default became for this run
    if changes:  # what resumes changed, each from its epoch on (resume_policy.py)
        written["changes"] = changes
    if s.ctx.active:
        written["resolved"].update(
            world_size=s.ctx.world_size,
            backend=s.ctx.backend,
            batch_size_semantics="global (per process: about batch_size / world_size)",
        )
    atomic_write_json(s.out / "config.json", written)
    for note in s.data.notes:  # logged once the run has started: a bad option stops it with its one error line
        log.info(note)
    log.info(
        f"ConvE: {s.mcfg.num_entities} entities, {s.mcfg.num_relations} relations, {len(s.data.train)} train triples, "
        f"{s.n_samples} samples ({s.cfg.training_mode}), device {s.device}, precision {s.precision.name}, "
        f"loss {'fused' if s.objective.fused else 'standard'}"
    )
