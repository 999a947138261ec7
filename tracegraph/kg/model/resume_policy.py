"""What ``--resume`` may change, so that a run's ``config.json`` says only what the run did.

A resumed run continues with the settings it was trained with. The few settings that leave the
trained model's path unchanged (how long to go on, how often to evaluate and save, where and how fast
to compute) may differ; config.json then records each change with the first epoch trained under it
(``changes: [{epoch, setting, old, new}]``). Any other difference is refused, naming the setting and
both values. The data files are compared by content (sha256), so a moved run resumes with its files
wherever they now are.
"""

from __future__ import annotations

from dataclasses import asdict

from tracegraph.errors import TracegraphError

#: settings a resume may change: they decide how long and how the run goes on, not what it learns
RESUMABLE = (
    "epochs",
    "patience",
    "min_epochs",
    "eval_every",
    "checkpoint_every",
    "eval_batch_size",
    "device",
    "num_workers",
    "memory_cleanup",
    "compile",
    "cuda_graphs",
    "tf32",
    "deterministic",
    "gradient_checkpointing",
)

#: not settings of the training itself: the directory, the resume switches, the file names (their
#: contents are compared by hash instead), the preset's name (its values are compared one by one)
_NOT_COMPARED = (
    "output_dir",
    "resume",
    "overwrite",
    "train",
    "valid",
    "test",
    "entity_map",
    "relation_map",
    "filter_triples",
    "preset",
    "preset_sha256",
)


def flag(setting: str) -> str:
    """The ``tracegraph train`` option that sets a TrainConfig field.

    Args:
        setting: The field name, e.g. ``learning_rate``.

    Returns:
        The option, e.g. ``--learning-rate``.
    """
    return "--" + setting.replace("_", "-")


def settings_changed(recorded: dict, cfg) -> list[dict]:
    """The resumable settings ``cfg`` changes against the run's recorded config.json.

    Args:
        recorded: the run's ``config.json``.
        cfg: the resuming :class:`~tracegraph.kg.model.train_config.TrainConfig`.

    Returns:
        ``[{"setting", "old", "new"}]`` for each resumable setting with another value.

    Raises:
        TracegraphError: any other setting (or data file's content) differs; the message names it
            and both values.
    """
    old_cfg, new_cfg = recorded.get("train", {}), asdict(cfg)
    old_flat = {**{k: v for k, v in old_cfg.items() if k != "model"}, **old_cfg.get("model", {})}
    new_flat = {**{k: v for k, v in new_cfg.items() if k != "model"}, **new_cfg.get("model", {})}
    changes = []
    for key, new in new_flat.items():
        if key in _NOT_COMPARED or key not in old_flat or old_flat[key] == new:
            continue
        old = old_flat[key]
        if key in RESUMABLE and not (key == "epochs" and new_cfg.get("lr_scheduler") == "cosine"):
            changes.append({"setting": key, "old": old, "new": new})
            continue
        why = " (the cosine schedule spans the recorded epochs)" if key == "epochs" else ""
        raise TracegraphError(
            f"--resume: {flag(key)} was {old!r} in this run, now {new!r}{why}; a resumed run keeps its settings "
            f"(only {', '.join(flag(k) for k in RESUMABLE)} may change): pass {flag(key)} {old!r} to continue, "
            f"or train a new run into another --output-dir"
        )
    _check_data_files(recorded, cfg)
    return changes


def _check_data_files(recorded: dict, cfg) -> None:
    from tracegraph.kg.data.datafiles import sha256_of

    files = recorded.get("data_files")
    if not isinstance(files, dict):
        return  # a run from before hashes: nothing to compare against
    for name in ("train", "valid", "test"):
        given, entry = getattr(cfg, name), files.get(name)
        if (given is None) != (entry is None):
            raise TracegraphError(
                f"--resume: the run was trained {'with' if entry else 'without'} --{name}"
                f"{' ' + entry['path'] if entry else ''}; give the same files to continue it"
            )
        if given is not None and sha256_of(given) != entry["sha256"]:
            raise TracegraphError(
                f"--resume: --{name} {given} is not the file the run was trained with "
                f"({entry['path']}, another sha256); give that file to continue it"
            )
