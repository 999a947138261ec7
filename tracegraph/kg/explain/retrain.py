"""Retrains of a run with some training triples left out: the arms of the necessity tests.

A retrain keeps the run's own configuration (its seed unless told another, its batches, with the
removed triples masked out of them), so on a deterministic device a retrain with nothing removed
reproduces the run. An interrupted retrain of the same removals and seed continues from its last
epoch, and each logs about ten progress lines.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

from tracegraph.errors import require_file
from tracegraph.runtime.checkpoints import atomic_write_text, read_json
from tracegraph.runtime.progress import log, note, quiet


class Retrainer:
    """Retrains of the run with some training triples excluded (same seed ⇒ same batches)."""

    def __init__(self, run_dir: Path, train_path: str, device: str, out: Path, keep_models: bool):
        from tracegraph.kg.model.train import TrainConfig

        cfg = TrainConfig(
            **read_json(require_file(run_dir / "config.json", "run config (config.json of the run)"))["train"]
        )
        if Path(cfg.train).resolve() != Path(train_path).resolve():
            log.warning(f"--train {train_path} is not the run's training file {cfg.train}; retraining on --train")
        cfg = replace(
            cfg,
            train=str(train_path),
            resume=False,
            exclude=None,
            entity_map=cfg.entity_map or str(run_dir / "node_dict.txt"),
            relation_map=cfg.relation_map or str(run_dir / "rel_dict.txt"),
            # no test pass; validation only where early stopping needs it (it draws no randomness)
            test=None,
            valid=cfg.valid if cfg.patience else None,
            checkpoint_every=10**9,
            overwrite=True,
        )  # retrains/ is this test's own: a rerun into the same -o replaces it
        if device != "auto":
            cfg = replace(cfg, device=device)
        self.cfg, self.out, self.keep = cfg, out, keep_models

    def run(self, name: str, excluded: list[tuple[str, str, str]], seed: int):
        """Retrain the run without ``excluded``, into ``<out>/<name>``.

        Args:
            name: The retrain's directory name.
            excluded: Training triples (labels) to leave out.
            seed: Training seed.

        Returns:
            The retrained model and the seconds it took (a resumed one's with its epochs before it resumed).
        """
        from tracegraph.kg.model.model_io import load_model
        from tracegraph.kg.data.split import write_triples
        from tracegraph.kg.model.train import train
        from tracegraph.kg.model.training_files import RESUME_CHECKPOINT

        d = self.out / name
        d.mkdir(parents=True, exist_ok=True)
        wanted = "".join(f"{h}\t{r}\t{t}\n" for h, r, t in excluded) + f"# seed {seed}\n"
        # an interrupted retrain of the same removals and seed continues from its last epoch
        again = (
            (d / "run" / "checkpoints" / RESUME_CHECKPOINT).is_file()
            and (d / "plan.txt").is_file()
            and (d / "plan.txt").read_text() == wanted
        )
        atomic_write_text(d / "plan.txt", wanted)
        exclude = None
        if excluded:
            write_triples(d / "excluded.txt", excluded)
            exclude = str(d / "excluded.txt")
        t0 = time.perf_counter()
        cfg = replace(self.cfg, output_dir=str(d / "run"), seed=seed, exclude=exclude)
        earlier = 0.0
        if again:
            log.info(f"retrain {name}: resuming from its last epoch")
            cfg = replace(cfg, resume=True, overwrite=False)
            earlier = recorded_seconds(d / "run")
        with quiet():  # a retrain's per-epoch lines would bury the test's own; warnings still show
            train(cfg, on_epoch=epoch_note(name))
        lm = load_model(d / "run" / "final_model.pt")
        if not self.keep:
            shutil.rmtree(d / "run" / "checkpoints", ignore_errors=True)
            for p in (d / "run").glob("*.pt"):
                p.unlink()
        return lm.model, earlier + time.perf_counter() - t0


def recorded_seconds(run: Path) -> float:
    """The seconds of the epochs a run's history records (an interrupted retrain's time before it resumed)."""
    p = run / "training_history.json"
    return float(sum(h.get("seconds") or 0.0 for h in (read_json(p) if p.is_file() else []) if "epoch" in h))


def epoch_note(name: str):
    """``on_epoch`` for a retrain: about ten progress lines per retrain, each with the time left.

    Args:
        name: The retrain's name, in each line.

    Returns:
        The callback (see :func:`tracegraph.kg.model.train.train`).
    """

    def on_epoch(epoch: int, epochs: int, record: dict) -> None:
        if epoch % max(1, epochs // 10) == 0 or epoch in (1, epochs):
            left = (epochs - epoch) * record["seconds"] / 60
            note(
                f"retrain {name}: epoch {epoch} of {epochs}, {record['seconds']:.0f}s an epoch, about {left:.0f} min left"
            )

    return on_epoch
