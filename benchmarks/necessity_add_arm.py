"""Add an arm to a filed side-by-side comparison whose run's weights are gone.

A comparison folder filed under ``benchmarks/results/necessity_kelpie/NAME/FACT_SET`` holds what
the run's model gave (the graded facts and their margins) and every finished arm's record. An
arm's retrain needs only the run's recipe: its ``config.json`` (filed beside, in ``NAME/run``)
and its id maps, which training builds from the training file alone (sorted labels, the
unseen-entity policy after), so they are rebuilt here exactly. This retrains one arm — an
explanations file's, a method's whose explanations the folder holds, or a control — resumably,
in the place the comparison recorded (``<output_dir>/retrains/ARM``), records it beside the
others, re-summarises the folder (every arm finished before must still match its removals), and
refreshes the dataset's entry in ``necessity_kelpie.json`` and the faithfulness page.

The run's data files must be where its config says (relative to the repository root), and the
explanations files where the comparison's config says.

Usage: python benchmarks/necessity_add_arm.py NAME ARM [--fact-set kelpie-facts] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))

from compare_results import fact_set  # noqa: E402  (the scripts beside this one)
from device_files import machine  # noqa: E402
from record import git_commit  # noqa: E402
from tracegraph.errors import TracegraphError  # noqa: E402


def recipe(folder: Path):
    """The comparison's settings, the run's recipe folder (its config and maps written where the
    comparison recorded it) and the run's data files, each checked against the hash its config recorded."""
    from tracegraph.kg.data.datafiles import resolve_data_files
    from tracegraph.kg.explain.compare import CompareConfig
    from tracegraph.kg.explain.local_retrain import LocalRetrainOptions
    from tracegraph.kg.model.train_config import TrainConfig
    from tracegraph.kg.model.train_data import load_data

    res = json.loads((folder / "compare.json").read_text())
    c = res["config"]
    cfg = CompareConfig(**{**c, "local": LocalRetrainOptions(**c["local"])})
    mdir = Path(cfg.model_dir)
    mdir.mkdir(parents=True, exist_ok=True)
    if not (mdir / "config.json").is_file():
        shutil.copy(folder.parent / "run" / "config.json", mdir / "config.json")
    run_config = json.loads((mdir / "config.json").read_text())
    files = resolve_data_files(mdir, run_config)  # the bytes the run was trained on, or an error
    if not (mdir / "node_dict.txt").is_file():
        data = load_data(TrainConfig(**run_config["train"]))
        data.train.entities.write(mdir / "node_dict.txt")
        data.train.relations.write(mdir / "rel_dict.txt")
    return res, cfg, mdir, files


def add_arm(folder: Path, arm_name: str, device: str | None = None) -> dict:
    """Retrain ``arm_name`` of the comparison in ``folder`` (resumably) and re-summarise the folder.

    Args:
        folder: A ``fidelity compare`` output folder (its ``compare.json``, ``arms/``, ``explanations/``).
        arm_name: One of the comparison's arms not finished yet.
        device: Where to retrain; None: the comparison's own setting.

    Returns:
        The new ``compare.json``.
    """
    from tracegraph.kg.data.idmap import IdMap
    from tracegraph.kg.data.triples import encode_triples, read_labeled_triples
    from tracegraph.kg.explain.compare import arm_record, finished_record, removed_labels, write_compare
    from tracegraph.kg.explain.compare_arms import build_arms
    from tracegraph.kg.explain.explanation_tsv import read_explanation_table
    from tracegraph.kg.explain.retrain import Retrainer
    from tracegraph.kg.model.store import RunStore
    from tracegraph.runtime.checkpoints import atomic_write_json

    t0 = time.perf_counter()
    res, cfg, mdir, files = recipe(folder)
    cfg = replace(cfg, device=device or cfg.device)
    if arm_name not in res["arms"] or arm_name in res["finished"]:
        raise SystemExit(f"error: {arm_name} is not an unfinished arm of {folder} (arms: {', '.join(res['arms'])})")
    run_cfg = json.loads((mdir / "config.json").read_text())["train"]
    maps = SimpleNamespace(
        entities=IdMap.read(mdir / "node_dict.txt", "entity map"),
        relations=IdMap.read(mdir / "rel_dict.txt", "relation map"),
    )
    train_ids = encode_triples(read_labeled_triples(files["train"]), maps.entities, maps.relations)
    labels = [tuple(f) for f in res["facts"]]
    facts = np.array([[maps.entities.id(h), maps.relations.id(r), maps.entities.id(t)] for h, r, t in labels])
    tables = {name: read_explanation_table(path) for name, path in cfg.explanations.items()}
    # without the run's weights, the methods' explanations can only be read back
    arms = build_arms(maps, cfg, tables, facts, labels, train_ids, None, cfg.device, folder, compute=False)
    lost = [a for a in res["finished"] if finished_record(folder, arms[a], labels) is None]
    if lost:  # their removals are not what they were: the maps or the arms' code changed since
        raise SystemExit(f"error: the finished arms {', '.join(lost)} no longer match their records in {folder}")
    arm = arms[arm_name]
    ctx = {"store": maps, "facts": facts, "labels": labels, "train_ids": train_ids}
    retrainer = Retrainer(mdir, run_cfg["train"], cfg.device, Path(cfg.output_dir) / "retrains", keep_models=True)
    model, seconds = retrainer.run(arm_name, removed_labels(arm, ctx), arm.seed)
    store = RunStore(Path(cfg.output_dir) / "retrains" / arm_name / "run")  # the run's maps and model shape
    ctx |= {"store": store, "known": store.known_tails(files.values()), "files": list(files.values())}
    rec = arm_record(arm, ctx, model, seconds)
    atomic_write_json(folder / "arms" / f"{arm_name}.json", rec)  # as compare writes it
    graded = {"facts": facts, "labels": labels, "offered": res["offered"], "margins": res["margins"]}
    return write_compare(cfg, folder, arms, {arm_name: rec}, graded, train_ids, res["device"], t0)


def file_arm(name: str, fact_set_name: str, arm: str, command: str) -> None:
    """Refresh ``necessity_kelpie.json``'s entry of ``name`` after ``arm`` was added, saying how and where (``added_arms``)."""
    path = DEST / "necessity_kelpie.json"
    allres = json.loads(path.read_text())
    entry = allres["datasets"][name]
    entry["fact_sets"][fact_set_name] = fact_set(DEST / "necessity_kelpie" / name / fact_set_name)
    prefix = next(iter(entry["status"])).split("/")[0]
    entry["status"][f"{prefix}/{fact_set_name}/{arm}"] = "done"
    added = {"fact_set": fact_set_name, "arm": arm, "command": command, "commit": git_commit(), "machine": machine()}
    entry["added_arms"] = [a for a in entry.get("added_arms", []) if a["arm"] != arm or a["fact_set"] != fact_set_name]
    entry["added_arms"].append(added)
    path.write_text(json.dumps(allres, indent=1, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="the filed dataset (a folder of benchmarks/results/necessity_kelpie/)")
    ap.add_argument("arm", help="the arm to add")
    ap.add_argument("--fact-set", default="kelpie-facts")
    ap.add_argument("--device", help="where to retrain (default: the comparison's setting)")
    args = ap.parse_args()
    folder = DEST / "necessity_kelpie" / args.name / args.fact_set
    if not (folder / "compare.json").is_file():
        raise SystemExit(f"error: {folder} holds no compare.json")
    try:
        add_arm(folder, args.arm, args.device)
    except TracegraphError as e:  # a data file or an explanation the folder lacks: one line, not a traceback
        raise SystemExit(f"error: {e}") from None
    file_arm(args.name, args.fact_set, args.arm, "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]))
    from necessity_kelpie_results import update_docs

    update_docs()


if __name__ == "__main__":
    main()
