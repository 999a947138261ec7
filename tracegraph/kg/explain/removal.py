"""The removal test: remove a prediction's top-k proponents and retrain.

The run is retrained with its own configuration, and the drop is compared with removing k random
triples around the same pair (part of ``tracegraph fidelity``; see
:mod:`tracegraph.kg.explain.fidelity` for the protocol).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from tracegraph.errors import require_file
from tracegraph.runtime.checkpoints import read_json
from tracegraph.runtime.progress import log, quiet


@dataclass
class RemovalOptions:
    """Settings of the removal test.

    Attributes:
        k: Proponents removed (and random neighbour triples in the other arm).
        n_triples: Correctly predicted test triples graded, best rank first.
        max_rank: A test triple counts as correctly predicted at filtered tail rank <= this.
        random_draws: Random arms per test triple (each a full retrain).
        seed: Seed of the random arms.
        keep_models: Keep the retrained runs' checkpoints.
    """

    k: int = 10  # proponents removed (and random neighbour triples in the other arm)
    n_triples: int = 5  # correctly predicted test triples graded (best rank first)
    max_rank: float = 1.0  # "correctly predicted": filtered tail rank <= this
    random_draws: int = 1  # random arms per test triple (each a full retrain)
    seed: int = 0
    keep_models: bool = False  # keep the retrained runs' .pt files


@dataclass
class RemovalCase:
    """One test triple of the removal test and its results.

    Attributes:
        index: Position in the test list.
        triple: The test triple as ids.
        proponent_rows: Candidate training rows, most influential first.
        relevant: Its mechanism edges as id triples (may be empty).
        base_rank: Filtered tail rank under the original model.
        base_score: Score under the original model.
        arms: One result per retrain.
    """

    index: int  # position in the test list
    triple: tuple[int, int, int]
    proponent_rows: np.ndarray  # candidate training rows, most influential first
    relevant: set = field(default_factory=set)  # its mechanism edges as id triples (may be empty)
    base_rank: float = 0.0
    base_score: float = 0.0
    arms: list[dict] = field(default_factory=list)


def neighbour_rows(train_ids: np.ndarray, head: int, tail: int) -> np.ndarray:
    """The rows of the training triples with the head or the tail as an endpoint.

    Args:
        train_ids: Training triples ``[N, 3]``.
        head: Head id.
        tail: Tail id.

    Returns:
        The rows.
    """
    e = (head, tail)
    return np.flatnonzero(np.isin(train_ids[:, 0], e) | np.isin(train_ids[:, 2], e))


def random_neighbour_rows(
    train_ids: np.ndarray, head: int, tail: int, k: int, seed: int, index: int, draw: int
) -> np.ndarray:
    """``k`` random rows among the training triples touching the head or the tail (seeded), sorted.

    Args:
        train_ids: Training triples ``[N, 3]``.
        head: Head id.
        tail: Tail id.
        k: Rows to draw (fewer if there are fewer).
        seed: Sampling seed.
        index: The test triple's position (part of the seed).
        draw: The draw's number (part of the seed).

    Returns:
        The sorted rows.
    """
    pool = neighbour_rows(train_ids, head, tail)
    rng = np.random.default_rng([seed, index, draw])
    return np.sort(rng.choice(pool, size=min(k, len(pool)), replace=False))


def write_without(train_path: str | Path, rows: np.ndarray, out_path: Path) -> int:
    """Copy the training file, leaving out some triples.

    Args:
        train_path: The training file.
        rows: 0-based triple rows to leave out (the rows of the encoded ids).
        out_path: The file to write.

    Returns:
        The number of triples written.
    """
    from tracegraph.kg.data.split import write_triples
    from tracegraph.kg.data.triples import read_labeled_triples

    lt = read_labeled_triples(train_path)
    drop = np.zeros(len(lt), dtype=bool)
    drop[np.asarray(rows, np.int64)] = True
    kept = [(lt.heads[i], lt.relations[i], lt.tails[i]) for i in np.flatnonzero(~drop)]
    write_triples(out_path, kept)
    return len(kept)


def tail_ranks(model, triples: np.ndarray, known) -> tuple[np.ndarray, np.ndarray]:
    """The filtered realistic tail ranks and raw scores of ``triples``.

    Args:
        model: The ConvE model.
        triples: Triples ``[n, 3]``.
        known: The filter index, or None for unfiltered ranks.

    Returns:
        ``[n]`` ranks and ``[n]`` scores, as float64.
    """
    from tracegraph.kg.model.evaluate import rank_queries

    t = np.asarray(triples, np.int64).reshape(-1, 3)
    rk = rank_queries(model, t[:, 0], t[:, 1], t[:, 2], known, side="tail")
    return rk.realistic, rk.score.astype(np.float64)


def select_correct(ranks: np.ndarray, scores: np.ndarray, max_rank: float, n: int) -> list[int]:
    """Up to ``n`` test positions with rank <= ``max_rank``, best rank first, then highest score.

    Args:
        ranks: Ranks, one per test triple.
        scores: Scores, one per test triple.
        max_rank: The worst rank that counts as correct.
        n: Most positions to return.

    Returns:
        The positions.
    """
    ok = np.flatnonzero(np.asarray(ranks) <= max_rank)
    order = np.lexsort((-np.asarray(scores)[ok], np.asarray(ranks)[ok]))
    return [int(i) for i in ok[order][:n]]


def removal_test(
    run_dir: str | Path,
    train_path: str | Path,
    train_ids: np.ndarray,
    cases: list[RemovalCase],
    known,
    out_dir: str | Path,
    opts: RemovalOptions,
    *,
    labels: Callable | None = None,
    on_retrain: Callable[[str], None] | None = None,
) -> dict:
    """Retrain without the top-k proponents, and without k random neighbour triples, of each case.

    Args:
        run_dir: The trained run.
        train_path: Its training file.
        train_ids: Training triples ``[N, 3]``.
        cases: The test triples to grade; their base rank, score and arms are filled in.
        known: The filter index.
        out_dir: Where the retrains go.
        opts: The test's settings.
        labels: ``labels(h, r, t)`` gives a triple's labels for the report; None reports ids.
        on_retrain: Called with a description after every retrain.

    Returns:
        Mean and standard deviation of the rank and score drops per arm, their ratios, and the
        per-triple results.

    Raises:
        DataError: If the run's config.json is missing.
    """
    from tracegraph.kg.model.model_io import load_model
    from tracegraph.kg.data.split import write_triples
    from tracegraph.kg.model.train import TrainConfig, train

    run_dir, out = Path(run_dir), Path(out_dir)
    cfg_path = require_file(run_dir / "config.json", "run config (config.json of the trained run)")
    base_cfg = TrainConfig(**read_json(cfg_path)["train"])
    base_cfg = replace(
        base_cfg,
        resume=False,
        entity_map=base_cfg.entity_map or str(run_dir / "node_dict.txt"),
        relation_map=base_cfg.relation_map or str(run_dir / "rel_dict.txt"),
    )
    base = load_model(run_dir / "final_model.pt")
    t0 = time.perf_counter()
    for case in cases:
        (r0,), (s0,) = tail_ranks(base.model, np.array([case.triple]), known)
        case.base_rank, case.base_score = float(r0), float(s0)
        h, _, t = case.triple
        arms = [("proponents", 0, np.sort(case.proponent_rows[: opts.k]))]
        arms += [
            ("random", d, random_neighbour_rows(train_ids, h, t, opts.k, opts.seed, case.index, d))
            for d in range(opts.random_draws)
        ]
        for arm, draw, rows in arms:
            d = out / f"triple_{case.index:03d}" / (arm if arm == "proponents" else f"random_{draw}")
            n_kept = write_without(train_path, rows, d / "train.txt")  # what the retrain saw, for reading
            ent, rel = base.entities.labels, base.relations.labels
            write_triples(d / "excluded.txt", [(ent[a], rel[b], ent[c]) for a, b, c in train_ids[rows]])
            # the full file with the removed triples masked out: same batches otherwise (kg/data/exclusion.py);
            # a fresh run each time: never --resume (the original may have been resumed); a rerun replaces its own
            with quiet():  # the retrain's per-epoch lines would bury the test's own; warnings still show
                train(
                    replace(
                        base_cfg,
                        train=str(train_path),
                        exclude=str(d / "excluded.txt"),
                        output_dir=str(d / "run"),
                        resume=False,
                        overwrite=True,
                    )
                )
            lm = load_model(d / "run" / "final_model.pt")
            (r1,), (s1,) = tail_ranks(lm.model, np.array([case.triple]), known)
            log.info(
                f"removal: test triple {case.index}, {arm}{'' if arm == 'proponents' else f' draw {draw}'}: "
                f"rank {case.base_rank:g} -> {float(r1):g}"
            )
            if on_retrain:
                on_retrain(f"triple {case.index} {arm}")
            removed = train_ids[rows]
            case.arms.append(
                {
                    "arm": arm,
                    "draw": draw,
                    "removed_rows": rows.tolist(),
                    "removed": [labels(*x) if labels else x.tolist() for x in removed],
                    "removed_mechanism_edges": int(sum(tuple(map(int, x)) in case.relevant for x in removed)),
                    "training_triples": n_kept,
                    "rank": float(r1),
                    "score": float(s1),
                    "delta_rr": 1.0 / case.base_rank - 1.0 / float(r1),
                    "delta_score": case.base_score - float(s1),
                }
            )
            if not opts.keep_models:
                shutil.rmtree(d / "run" / "checkpoints", ignore_errors=True)
                for p in (d / "run").glob("*.pt"):
                    p.unlink()
    return _removal_summary(cases, opts, time.perf_counter() - t0, labels, base_cfg)


def _removal_summary(cases, opts, seconds, labels, base_cfg) -> dict:
    def mean(arm, key):
        vals = [a[key] for c in cases for a in c.arms if a["arm"] == arm]
        return (float(np.mean(vals)), float(np.std(vals))) if vals else (None, None)

    out = {
        "options": asdict(opts),
        "retrain_config": {k: v for k, v in asdict(base_cfg).items() if k not in ("train", "output_dir")},
        "retrains": sum(len(c.arms) for c in cases),
        "seconds": seconds,
        "graded": len(cases),
    }
    for arm in ("proponents", "random"):
        for key in ("delta_rr", "delta_score"):
            m, s = mean(arm, key)
            out.setdefault(arm, {})[key] = {"mean": m, "std": s}
    for key in ("delta_rr", "delta_score"):
        # proponents' mean drop / random's; None when the random arm did not hurt on average
        num, den = out["proponents"][key]["mean"], out["random"][key]["mean"]
        out[f"ratio_{key}"] = num / den if num is not None and den is not None and den > 0 else None
    out["per_triple"] = [
        {
            "index": c.index,
            "triple": labels(*c.triple) if labels else list(c.triple),
            "base_rank": c.base_rank,
            "base_score": c.base_score,
            "arms": c.arms,
        }
        for c in cases
    ]
    return out


def describe_ratio(removal: dict) -> str:
    """Describe the removal test's ratio, e.g. ``"ratio 1.11"``, or why there is none.

    Args:
        removal: The removal test's report.

    Returns:
        The description.
    """
    r = removal.get("ratio_delta_rr")
    return f"ratio {r:.2f}" if r is not None else "ratio undefined (the random arm's reciprocal rank did not drop)"
