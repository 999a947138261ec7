"""Pretraining (GT-SSL), fine-tuning and linear probing of the SGMP encoder.

One loop serves pretraining and fine-tuning: precision policy, gradient accumulation,
per-block gradient checkpointing, optional cleanup, a checkpoint + history after every epoch
(so ``--resume`` continues exactly where it stopped) and the peak memory of every epoch.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from tracegraph.errors import DataError, TracegraphError
from tracegraph.runtime.checkpoints import atomic_write_json, load_checkpoint, read_json, save_checkpoint
from tracegraph.runtime.memory import cleanup, format_bytes, peak_memory_bytes, reset_peak
from tracegraph.runtime.precision import resolve_device, resolve_precision
from tracegraph.runtime.progress import log, make_progress
from tracegraph.runtime.seeding import rng_state, seed_everything, set_rng_state
from tracegraph.trees.data import NODE_FEATURES
from tracegraph.trees.gtssl import GTSSL
from tracegraph.trees.inputs import DataConfig, labelled_split, load_trees, make_loader
from tracegraph.trees.sgmp import EncoderConfig, SGMPEncoder, suggest_cutoff


@dataclass
class TrainConfig:
    """Settings of GT-SSL pretraining and fine-tuning; each field is the CLI option of the same name.

    ``encoder`` holds :class:`~tracegraph.trees.sgmp.EncoderConfig` fields (a None cutoff is
    derived from the data). The pretraining loss is ``order_weight * order + growth_weight *
    growth``.
    """

    data: DataConfig = field(default_factory=DataConfig)
    encoder: dict = field(default_factory=dict)  # EncoderConfig fields; cutoff None = from data
    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.0
    precision: str = "fp32"
    device: str = "auto"
    gradient_accumulation_steps: int = 1
    gradient_checkpointing: bool = False
    memory_cleanup: bool = False
    seed: int = 0
    freeze_encoder: bool = False  # fine-tuning only
    # pretraining loss = order_weight·order + growth_weight·growth. The order loss cannot go far
    # below its margin with a local encoder (it cannot see depth beyond its receptive field);
    # at weight 1 it drowned the growth signal in the probe experiments, hence 0.2.
    order_weight: float = 0.2
    growth_weight: float = 1.0

    def to_dict(self) -> dict:
        """The settings as a plain dictionary (for config.json and checkpoints)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """Build a config from :meth:`to_dict`'s output.

        Args:
            d: The dictionary.

        Returns:
            The config.
        """
        d = dict(d)
        d["data"] = DataConfig(**d.get("data", {}))
        return cls(**d)


def make_encoder(enc: dict, datasets=None) -> SGMPEncoder:
    """Build an encoder, deriving a missing cutoff from the data.

    Args:
        enc: :class:`~tracegraph.trees.sgmp.EncoderConfig` fields.
        datasets: TreeData items to derive the cutoff from, or None.

    Returns:
        The encoder.

    Raises:
        TracegraphError: If the cutoff is missing and no data is given.
    """
    enc = dict(enc)
    if enc.get("cutoff") is None:
        if datasets is None:
            raise TracegraphError("encoder cutoff unknown: give --cutoff or data to derive it from")
        enc["cutoff"] = suggest_cutoff(datasets)
    enc.setdefault("in_channels", NODE_FEATURES)
    return SGMPEncoder(EncoderConfig(**enc))


# --------------------------------------------------------------------------- the loop


class _Runner:
    """Holds what both loops share; ``step_losses(batch)`` returns a dict with 'loss'."""

    def __init__(self, cfg: TrainConfig, model: nn.Module, out: Path, kind: str):
        self.cfg, self.model, self.out, self.kind = cfg, model, out, kind
        self.device = resolve_device(cfg.device)
        self.prec = resolve_precision(cfg.precision, self.device)
        if cfg.gradient_accumulation_steps < 1:
            raise TracegraphError("--gradient-accumulation-steps must be >= 1")
        model.to(self.device)
        params = [p for p in model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.scaler = self.prec.grad_scaler()
        self.history: list[dict] = []
        self.start_epoch = 0

    def save(self, epoch: int):
        save_checkpoint(
            self.out / "last.pt",
            {
                "kind": self.kind,
                "epoch": epoch,
                "model": self.model.state_dict(),
                "optimizer": self.opt.state_dict(),
                "scaler": self.scaler.state_dict(),
                "rng": rng_state(),
                "encoder_config": self.model.encoder.cfg.to_dict(),
            },
        )
        save_checkpoint(
            self.out / "encoder.pt",
            {"encoder_config": self.model.encoder.cfg.to_dict(), "encoder": self.model.encoder.state_dict()},
        )
        atomic_write_json(self.out / "history.json", self.history)

    def resume(self):
        ck = load_checkpoint(self.out / "last.pt", map_location=self.device)
        if ck.get("kind") != self.kind:
            raise DataError(f"checkpoint is from {ck.get('kind')!r}, not {self.kind!r}", self.out / "last.pt")
        self.model.load_state_dict(ck["model"])
        self.opt.load_state_dict(ck["optimizer"])
        self.scaler.load_state_dict(ck["scaler"])
        set_rng_state(ck["rng"])
        self.start_epoch = int(ck["epoch"]) + 1
        hist = self.out / "history.json"
        self.history = read_json(hist)[: self.start_epoch] if hist.exists() else []

    def fit(self, train, step_losses, evaluate=None):
        cfg = self.cfg
        self.model.encoder.gradient_checkpointing = cfg.gradient_checkpointing
        accum = cfg.gradient_accumulation_steps
        with make_progress() as progress:
            for epoch in range(self.start_epoch, cfg.epochs):
                self.model.train()
                reset_peak(self.device)
                t0 = time.perf_counter()
                loader = make_loader(train, cfg.batch_size, True, cfg.seed * 1000 + epoch)
                task = progress.add_task(f"{self.kind} epoch {epoch + 1}/{cfg.epochs}", total=len(loader), info="")
                sums: dict[str, float] = {}
                self.opt.zero_grad(set_to_none=True)
                for it, batch in enumerate(loader):
                    batch = batch.to(self.device)
                    with self.prec.autocast():
                        losses = step_losses(batch)
                    self.scaler.scale(losses["loss"] / accum).backward()
                    if (it + 1) % accum == 0 or it + 1 == len(loader):
                        self.scaler.step(self.opt)
                        self.scaler.update()
                        self.opt.zero_grad(set_to_none=True)
                    for k, v in losses.items():
                        sums[k] = sums.get(k, 0.0) + float(v.detach())
                    if not all(np.isfinite(list(sums.values()))):
                        raise TracegraphError(f"non-finite loss at epoch {epoch + 1}, batch {it + 1}: {sums}")
                    progress.update(task, advance=1, info=f"loss {sums['loss'] / (it + 1):.4f}")
                    del losses, batch
                    if cfg.memory_cleanup:
                        cleanup(self.device)
                rec = {
                    "epoch": epoch + 1,
                    **{k: v / max(len(loader), 1) for k, v in sums.items()},
                    "seconds": time.perf_counter() - t0,
                    "peak_memory_bytes": peak_memory_bytes(self.device),
                }
                if evaluate is not None:
                    rec.update(evaluate())
                self.history.append(rec)
                self.save(epoch)
                log.info(
                    f"{self.kind} epoch {rec['epoch']}: "
                    + "  ".join(
                        f"{k} {v:.4f}" for k, v in rec.items() if k not in ("epoch", "seconds", "peak_memory_bytes")
                    )
                    + f"  {rec['seconds']:.1f}s  peak memory {format_bytes(rec['peak_memory_bytes'])}"
                )
        return self.history


def _prepare_out(out: Path, cfg: TrainConfig, resume: bool):
    out.mkdir(parents=True, exist_ok=True)
    if resume and not (out / "last.pt").exists():
        raise TracegraphError(f"--resume: no checkpoint in {out}")
    if not resume and (out / "last.pt").exists():
        raise TracegraphError(f"{out} already holds a run; pass --resume or choose another --output-dir")


def pretrain(cfg: TrainConfig, output_dir: str | Path, resume: bool = False, data=None) -> list[dict]:
    """GT-SSL pretraining; writes config.json, history.json, last.pt and encoder.pt.

    Args:
        cfg: The settings (the derived cutoff is recorded in ``cfg.encoder``).
        output_dir: The run directory.
        resume: Continue from ``last.pt``.
        data: The TreeData items, or None to read ``cfg.data``.

    Returns:
        The per-epoch history.
    """
    out = Path(output_dir)
    seed_everything(cfg.seed)
    data = data if data is not None else load_trees(cfg.data)
    encoder = make_encoder(cfg.encoder, data)
    cfg.encoder = encoder.cfg.to_dict()  # record the derived cutoff
    _prepare_out(out, cfg, resume)
    model = GTSSL(encoder)
    runner = _Runner(cfg, model, out, "pretrain")
    if resume:
        runner.resume()
    # only now: a resume that fails (another kind of run) must leave that run's config.json alone
    atomic_write_json(out / "config.json", cfg.to_dict())

    def step(batch):
        ls = model.losses(batch)
        ls["loss"] = cfg.order_weight * ls["order"] + cfg.growth_weight * ls["growth"]
        return ls

    return runner.fit(data, step)


def load_encoder(path: str | Path, device="cpu") -> SGMPEncoder:
    """Load the encoder of a pretraining run's ``encoder.pt`` (or ``last.pt``).

    Args:
        path: The checkpoint.
        device: Where to load it.

    Returns:
        The encoder.

    Raises:
        DataError: If the file is missing or not an encoder checkpoint.
    """
    ck = load_checkpoint(path, map_location=device)
    state = ck.get("encoder")
    if state is None and isinstance(ck.get("model"), dict):  # a run's last.pt: the model's encoder.* part
        state = {k[len("encoder.") :]: v for k, v in ck["model"].items() if k.startswith("encoder.")} or None
    if "encoder_config" not in ck or state is None:
        raise DataError("not an encoder checkpoint (expected encoder_config and encoder)", path)
    enc = SGMPEncoder(EncoderConfig(**ck["encoder_config"]))
    enc.load_state_dict(state)
    return enc


# --------------------------------------------------------------------------- fine-tuning


class Classifier(nn.Module):
    """An encoder with a classification head on its graph embedding.

    Args:
        encoder: The encoder.
        num_classes: Number of classes.
    """

    def __init__(self, encoder: SGMPEncoder, num_classes: int):
        super().__init__()
        self.encoder = encoder
        hid = encoder.cfg.hidden_channels
        self.head = nn.Sequential(nn.Linear(hid, hid), nn.SiLU(), nn.Linear(hid, num_classes))

    def forward(self, batch):
        """Class logits of a batch of trees.

        Args:
            batch: A batched TreeData.

        Returns:
            ``[G, num_classes]``.
        """
        return self.head(self.encoder.encode(batch)[1].float())


def finetune(
    cfg: TrainConfig,
    encoder_path: str | Path | None,
    output_dir: str | Path,
    resume: bool = False,
    data=None,
    num_classes: int | None = None,
) -> list[dict]:
    """Train a new classification head on a pretrained (or, without a path, fresh) encoder.

    Args:
        cfg: The settings (``freeze_encoder`` keeps the encoder fixed).
        encoder_path: The pretrained encoder, or None for a fresh one.
        output_dir: The run directory.
        resume: Continue from ``last.pt``.
        data: ``(train, test)`` TreeData lists, or None for :func:`~tracegraph.trees.inputs.labelled_split`.
        num_classes: Number of classes; None for the largest label seen + 1 (pass it when a fold
            may miss a class).

    Returns:
        The per-epoch history.
    """
    out = Path(output_dir)
    seed_everything(cfg.seed)
    train, test = data if data is not None else labelled_split(cfg.data)
    encoder = load_encoder(encoder_path) if encoder_path else make_encoder(cfg.encoder, train)
    cfg.encoder = encoder.cfg.to_dict()
    _prepare_out(out, cfg, resume)
    num_classes = num_classes or int(max(int(d.y) for d in train + test)) + 1
    model = Classifier(encoder, num_classes)
    if cfg.freeze_encoder:
        for p in encoder.parameters():
            p.requires_grad_(False)
    runner = _Runner(cfg, model, out, "finetune")
    if resume:
        runner.resume()
    # only now: a resume that fails (another kind of run) must leave that run's config.json alone
    atomic_write_json(out / "config.json", cfg.to_dict())

    def step(batch):
        logits = model(batch)
        loss = nn.functional.cross_entropy(logits.float(), batch.y)
        return {"loss": loss, "train_acc": (logits.argmax(-1) == batch.y).float().mean()}

    @torch.no_grad()
    def evaluate():
        model.eval()
        correct = 0
        for b in make_loader(test, cfg.batch_size, False):
            b = b.to(runner.device)
            with runner.prec.autocast():
                correct += int((model(b).argmax(-1) == b.y).sum())
        return {"test_acc": correct / max(len(test), 1)}

    return runner.fit(train, step, evaluate)


def load_classifier(path: str | Path, device="cpu") -> Classifier:
    """Load the fine-tuned model (encoder and head) in a fine-tuning run's ``last.pt``.

    Args:
        path: The checkpoint.
        device: Where to load it.

    Returns:
        The classifier.

    Raises:
        DataError: If the file is missing or not a fine-tuning checkpoint.
    """
    ck = load_checkpoint(path, map_location=device)
    if ck.get("kind") != "finetune":
        raise DataError(f"not a fine-tuning checkpoint (kind {ck.get('kind')!r})", path)
    model = Classifier(SGMPEncoder(EncoderConfig(**ck["encoder_config"])), ck["model"]["head.2.weight"].shape[0])
    model.load_state_dict(ck["model"])
    return model.to(device)


@torch.no_grad()
def predict(model: Classifier, data, batch_size: int = 64, device="cpu") -> np.ndarray:
    """The predicted class of every item, in order.

    Args:
        model: The classifier (put in eval mode and moved to ``device``).
        data: TreeData items.
        batch_size: Trees per batch.
        device: Where to compute.

    Returns:
        ``[n]`` classes.
    """
    model.eval().to(device)
    out = [model(b.to(device)).argmax(-1).cpu() for b in make_loader(data, batch_size, False)]
    return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)
