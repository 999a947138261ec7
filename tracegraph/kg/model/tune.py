"""Hyperparameter search for ConvE on Optuna: TPE sampling, median pruning on valid MRR.

The study lives in an SQLite file (``OUTPUT_DIR/study.db`` unless ``--storage`` says otherwise):
running the same command again resumes it, and several workers (``--devices cuda:0,cuda:1``,
or other machines pointing at the same storage and study name) share it. ``--trials N`` is the
total of finished (complete or pruned) trials the study should hold, so a resumed command only
runs what is missing; with several workers up to workers−1 extra trials may finish.

Every trial trains with ``tracegraph.kg.model.train.train`` on train/valid only and reports valid MRR
after each evaluation; the median pruner stops trials below the median of earlier trials at the
same epoch. Selection uses valid MRR only. At the end the best trial's settings are written as a
preset file (``best_preset.json``, usable with ``train --preset``), and — only then, once — its
best model is evaluated on ``--test``.
"""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tracegraph.errors import TracegraphError
from tracegraph.runtime.checkpoints import atomic_write_json, atomic_write_text

INSTALL_HINT = "tracegraph tune needs Optuna: pip install 'tracegraph[tune]' (or: pip install optuna)"


@dataclass
class TuneConfig:
    """The settings of a ``tracegraph tune`` study; each field is the option of the same name.

    Attributes:
        train: Training triples file.
        valid: Validation triples file (trials are ranked by valid MRR).
        output_dir: Where the study, trials and best preset go.
        search_space: The search-space JSON file.
        test: Test triples file: filtered out of valid rankings, used to evaluate the best model.
        preset: Base preset; overrides the search space's ``preset``.
        study_name: The Optuna study's name.
        storage: An Optuna storage URL; None for ``sqlite:///OUTPUT_DIR/study.db``.
        trials: Finished (complete or pruned) trials to reach.
        timeout: Seconds per worker after which no new trial starts; None for no limit.
        devices: One worker per device.
        seed: Seed of the samplers (worker ``i`` uses ``seed + i``) and of every trial's training.
        num_threads: CPU threads per worker; 0 leaves torch's default.
    """

    train: str
    valid: str
    output_dir: str
    search_space: str
    test: str | None = None
    preset: str | None = None  # overrides the search space's "preset"
    study_name: str = "tracegraph"
    storage: str | None = None  # an Optuna storage URL; default sqlite:///OUTPUT_DIR/study.db
    trials: int = 20
    timeout: float | None = None  # seconds per worker; no new trial starts after it
    devices: list = field(default_factory=lambda: ["auto"])
    seed: int = 0
    num_threads: int = 0


def _optuna():
    try:
        import optuna
    except ImportError:
        raise TracegraphError(INSTALL_HINT) from None
    return optuna


def storage_url(cfg: TuneConfig) -> str:
    """The study's storage URL (default: ``sqlite:///OUTPUT_DIR/study.db``).

    Args:
        cfg: The study's settings.

    Returns:
        The URL.
    """
    return cfg.storage or f"sqlite:///{(Path(cfg.output_dir) / 'study.db').resolve()}"


def open_study(cfg: TuneConfig, space, worker: int = 0):
    """Create or load the Optuna study, with heartbeats, a TPE sampler and a median pruner.

    Args:
        cfg: The study's settings.
        space: The search space (its pruner options).
        worker: The worker's number, added to the sampler seed.

    Returns:
        The study.
    """
    optuna = _optuna()
    url = storage_url(cfg)
    with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna's terms
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # heartbeats mark trials whose worker died mid-trial as failed when the study resumes;
        # failed trials do not count towards --trials, so a rerun replaces them
        storage = optuna.storages.RDBStorage(
            url,
            engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else None,
            heartbeat_interval=60,
            grace_period=180,
        )
    pruner = optuna.pruners.MedianPruner(**{"n_startup_trials": 5, "n_warmup_steps": 0, **space.pruner})
    # each worker its own sampler seed, or parallel workers would draw the same startup trials
    sampler = optuna.samplers.TPESampler(seed=cfg.seed + worker)
    return optuna.create_study(
        study_name=cfg.study_name,
        storage=storage,
        sampler=sampler,
        pruner=pruner,
        direction="maximize",
        load_if_exists=True,
    )


def finished_trials(study) -> list:
    """The study's complete and pruned trials.

    Args:
        study: The Optuna study.

    Returns:
        The trials.
    """
    optuna = _optuna()
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))


def trial_settings(base, space, sampled: dict) -> dict:
    """A trial's settings: the base preset's, then the space's fixed ones, then the sampled ones.

    Args:
        base: The base preset, or None.
        space: The search space.
        sampled: The sampled settings.

    Returns:
        Setting names to values.
    """
    return {**(base.settings if base else {}), **space.fixed, **sampled}


def run_trial(trial, cfg: TuneConfig, space, base, device: str) -> float:
    """Train one sampled configuration into ``OUTPUT_DIR/trials/trial_NNNN``.

    Args:
        trial: The Optuna trial.
        cfg: The study's settings.
        space: The search space.
        base: The base preset, or None.
        device: The device to train on.

    Returns:
        The trial's best valid MRR.

    Raises:
        optuna.TrialPruned: If the pruner stops the trial.
        TracegraphError: If the trial's run fails.
    """
    optuna = _optuna()
    from tracegraph.kg.model.presets import apply_preset, parse_preset, preset_document
    from tracegraph.kg.model.search_space import suggest
    from tracegraph.kg.model.train import TrainConfig, train

    settings = trial_settings(base, space, suggest(trial, space))
    run_dir = Path(cfg.output_dir) / "trials" / f"trial_{trial.number:04d}"
    run_dir.mkdir(parents=True, exist_ok=True)
    doc = preset_document(f"{cfg.study_name}-trial-{trial.number}", _description(cfg, trial.number, base), settings)
    text = _dump(doc)
    preset = parse_preset(text.encode("utf-8"), str(run_dir / "preset.json"))
    # valid is ranked with the test triples filtered out, as in any run given --test (the standard
    # protocol; unfiltered, UMLS valid MRR drops by 0.2), but no trial ever ranks test
    filters = [cfg.test] if cfg.test else []
    tcfg = apply_preset(
        TrainConfig(
            train=cfg.train,
            valid=cfg.valid,
            test=None,
            output_dir=str(run_dir),
            device=device,
            seed=cfg.seed,
            filter_triples=filters,
        ),
        preset,
    )
    tcfg.checkpoint_every = tcfg.epochs  # trials need best_model.pt, not an epoch-by-epoch history
    trial.set_user_attr("run_dir", str(run_dir))

    def report(epoch: int, valid_mrr: float) -> None:
        trial.report(valid_mrr, epoch)
        if trial.should_prune():
            raise optuna.TrialPruned(f"valid MRR {valid_mrr:.4f} at epoch {epoch} is below the median")

    try:
        summary = train(tcfg, on_evaluation=report)
    finally:
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        # after training: train() claims only an empty run directory (runtime/rundir.py)
        atomic_write_text(run_dir / "preset.json", text)
    return float(summary["best_valid_mrr"])


def _description(cfg: TuneConfig, number: int, base) -> str:
    start = f" starting from preset {base.name} (sha256 {base.sha256[:12]})" if base else ""
    return (
        f"trial {number} of tracegraph tune study {cfg.study_name!r}{start}; search space {cfg.search_space}; "
        f"selected on valid MRR of {cfg.valid}"
    )


def _dump(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def work(cfg: TuneConfig, device: str, worker: int = 0) -> None:
    """Run trials on ``device`` until the study holds ``cfg.trials`` finished ones.

    Args:
        cfg: The study's settings.
        device: The device to train on.
        worker: The worker's number (sampler seed offset).

    Raises:
        TracegraphError: If trials keep failing.
    """
    optuna = _optuna()
    from tracegraph.kg.model.presets import load_preset
    from tracegraph.kg.model.search_space import read_search_space

    if cfg.num_threads > 0:
        import torch

        torch.set_num_threads(cfg.num_threads)
    space = read_search_space(cfg.search_space)
    name = cfg.preset or space.preset
    base = load_preset(name) if name else None
    study = open_study(cfg, space, worker)
    if len(finished_trials(study)) >= cfg.trials:
        return
    done = optuna.study.MaxTrialsCallback(
        cfg.trials, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    )
    failures_allowed = max(3, cfg.trials)

    def give_up(study, trial):  # failures are not finished trials: without this a broken set-up retries forever
        if sum(t.state == optuna.trial.TrialState.FAIL for t in study.trials) >= failures_allowed:
            study.stop()

    def objective(trial):
        try:
            return run_trial(trial, cfg, space, base, device)
        except TracegraphError as e:  # Optuna (>= 3) keeps no reason for a failed trial: keep ours
            trial.set_user_attr("fail_reason", str(e))
            raise

    # a trial that diverges (NaN loss) or is misconfigured fails alone; the study goes on
    study.optimize(
        objective,
        timeout=cfg.timeout,
        callbacks=[done, give_up],
        catch=(TracegraphError,),
        gc_after_trial=True,
    )
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    if len(failed) >= failures_allowed and len(finished_trials(study)) < cfg.trials:
        reason = failed[-1].user_attrs.get("fail_reason", "see the log above")
        raise TracegraphError(f"tune: {len(failed)} trials failed, the study stopped; the last: {reason}")


def _worker_main(cfg_dict: dict, device: str, worker: int) -> None:
    from tracegraph.runtime.progress import setup_logging

    setup_logging()
    work(TuneConfig(**cfg_dict), device, worker)


def tune(cfg: TuneConfig) -> dict:
    """Run (or resume) the study, write ``best_preset.json`` and evaluate the best model on test.

    Args:
        cfg: The study's settings.

    Returns:
        The study summary, also written as ``tune_summary.json``.

    Raises:
        TracegraphError: If a setting is invalid, a worker fails, or no trial completes.
    """
    optuna = _optuna()
    from tracegraph.kg.model.search_space import read_search_space

    if cfg.trials < 1:
        raise TracegraphError("--trials must be >= 1")
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    space = read_search_space(cfg.search_space)  # fail on a bad file before any worker starts
    if not cfg.devices:
        raise TracegraphError("--devices needs at least one device")
    study = open_study(cfg, space)  # creates the schema once: workers creating it together collide
    if len(cfg.devices) == 1:
        work(cfg, cfg.devices[0])
    else:
        _run_workers(cfg)
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        failed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))
        raise TracegraphError(
            f"no trial of study {cfg.study_name!r} completed ({len(failed)} failed, "
            f"{len(finished_trials(study)) - len(complete)} pruned); see the log above"
        )
    best = study.best_trial
    run_dir = Path(best.user_attrs["run_dir"])
    shutil.copyfile(run_dir / "preset.json", out / "best_preset.json")  # the same bytes, so the same sha256
    summary = {
        "study_name": cfg.study_name,
        "storage": storage_url(cfg),
        "best_trial": best.number,
        "best_valid_mrr": best.value,
        "best_params": best.params,
        "best_run_dir": str(run_dir),
        "best_preset": str(out / "best_preset.json"),
        "trials": _trial_rows(study),
        "config": asdict(cfg),
    }
    if cfg.test:  # the one and only look at test, for the chosen configuration
        from tracegraph.kg.model.run_evaluation import evaluate_files

        res = evaluate_files(run_dir, cfg.test, None, out / "test_evaluation", 0, 256, 65536, cfg.devices[0])
        summary["test"] = res["metrics"]
    atomic_write_json(out / "tune_summary.json", summary)
    return summary


def _trial_rows(study) -> list[dict]:
    return [
        {
            "number": t.number,
            "state": t.state.name,
            "value": t.value,
            "params": t.params,
            "last_epoch": max(t.intermediate_values) if t.intermediate_values else None,
        }
        for t in study.get_trials(deepcopy=False)
    ]


def _run_workers(cfg: TuneConfig) -> None:
    """One process per device (spawned: CUDA cannot be forked), all on the same study."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_worker_main, args=(asdict(cfg), dev, i), name=f"tune-{dev}")
        for i, dev in enumerate(cfg.devices)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [f"{p.name} (exit {p.exitcode})" for p in procs if p.exitcode != 0]
    if bad:
        raise TracegraphError(
            f"tune workers failed: {', '.join(bad)}; the study keeps what finished — run again to resume"
        )
