"""The side-by-side protocol's arms: what each removes, per graded fact (the protocol: kg/explain/compare.py).

``cfg`` below is the protocol's :class:`~tracegraph.kg.explain.compare.CompareConfig`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path
import numpy as np

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.explain.grading import top_rows
from tracegraph.kg.explain.ranking import candidate_rows
from tracegraph.kg.explain.explanation_tsv import ExplanationTable, read_explanation_table, write_explanation_table
from tracegraph.runtime.checkpoints import atomic_write_json, read_json
from tracegraph.runtime.progress import log


@dataclass
class Arm:
    """One removal set and its retrain.

    Attributes:
        name: The arm's name (file stem, table row).
        kind: ``file``, ``method``, ``random`` or ``noise``.
        rows: Per graded fact, the training rows its explanation removes.
        seed: The retrain's seed.
        seconds_per_explanation: Time to explain one fact (method arms), else None.
    """

    name: str
    kind: str
    rows: list[np.ndarray]
    seed: int
    seconds_per_explanation: float | None = None

    def removed(self) -> np.ndarray:
        """The distinct training rows the arm removes."""
        return np.unique(np.concatenate([np.asarray(r, np.int64) for r in self.rows] or [np.zeros(0, np.int64)]))


def table_rows(table: ExplanationTable, facts: list, store, row_of: dict) -> list[np.ndarray]:
    """Per graded fact, the training rows of its explanation in ``table`` (none if it is not there).

    Args:
        table: An explanations file.
        facts: The graded facts as label triples.
        store: The run (its id maps).
        row_of: Training triple ids -> row.

    Returns:
        One row array per fact.

    Raises:
        DataError: An explanation fact with a label the run does not know, or not a training triple
            (naming the file and line).
    """
    explained = {}
    for fact, expl, line in zip(table.facts, table.explanations, table.lines):
        rows = []
        for h, r, t in expl:
            if h not in store.entities or t not in store.entities or r not in store.relations:
                raise DataError(f"explanation fact {h}|{r}|{t} names a label the run does not know", table.path, line)
            key = (store.entities.id(h), store.relations.id(r), store.entities.id(t))
            if key not in row_of:
                raise DataError(f"explanation fact {h}|{r}|{t} is not a training triple", table.path, line)
            rows.append(row_of[key])
        explained.setdefault(fact, np.asarray(sorted(set(rows)), np.int64))
    return [explained.get(tuple(f), np.zeros(0, np.int64)) for f in facts]


def random_rows(train_ids: np.ndarray, facts: np.ndarray, sizes: list[int], scope: str, seed: int) -> list[np.ndarray]:
    """Per fact, ``sizes[j]`` random candidates (seeded per fact).

    Args:
        train_ids: Training triples.
        facts: Graded facts as ids.
        sizes: How many rows to draw per fact.
        scope: Candidate scope (:func:`candidate_rows`).
        seed: Sampling seed.

    Returns:
        One row array per fact.
    """
    out = []
    for j, (fact, size) in enumerate(zip(facts, sizes)):
        pool = candidate_rows(train_ids, fact, scope)
        out.append(np.sort(np.random.default_rng([seed, j, 3]).permutation(pool)[:size]))
    return out


def far_rows(train_ids: np.ndarray, facts: np.ndarray, sizes: list[int], seed: int) -> list[np.ndarray]:
    """Per fact, ``sizes[j]`` random training rows featuring neither end of any graded fact.

    The far arm retrains with the run's seed, as every removal arm does, so it measures what
    removing that many facts unrelated to the graded ones does by itself: the retrain's own noise
    under this protocol (the noise arm's other seed measures a different-seed retrain). The draws
    are disjoint across facts, so the arm removes as many facts in all as it is asked to.

    Args:
        train_ids: Training triples.
        facts: Graded facts as ids.
        sizes: How many rows to draw per fact.
        seed: Sampling seed.

    Returns:
        One sorted row array per fact (shorter when the pool runs out).
    """
    ends = np.unique(np.asarray(facts, np.int64).reshape(-1, 3)[:, [0, 2]])
    pool = np.flatnonzero(~np.isin(train_ids[:, 0], ends) & ~np.isin(train_ids[:, 2], ends))
    drawn = np.random.default_rng([seed, 5]).permutation(pool)
    cuts = np.cumsum([0, *sizes])
    return [np.sort(drawn[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]


def removal_digest(arm: Arm, facts: list) -> str:
    """A fingerprint of what an arm's retrain depends on: its facts, removals and seed."""
    text = repr((facts, [list(map(int, r)) for r in arm.rows], arm.seed))
    return hashlib.sha256(text.encode()).hexdigest()


def method_arms(store, cfg, methods, facts, labels, train_ids, known, device, out, seed, sized=None) -> list[Arm]:
    """One arm per method of ``methods``: each fact's top-k candidates, timed.

    Each is written to ``explanations/METHOD.tsv``, with ``METHOD.json`` beside it: the facts,
    settings and time that :func:`cached_method_arm` checks. With ``sized`` (per fact, the size of
    ``cfg.size_like``'s explanation), each method also gets the arm ``METHOD@NAME``: its first
    facts only, as many as that explanation holds (at most k), from the same ranking.
    """
    from tracegraph.kg.explain.methods import MethodOptions, method_keys_all
    from tracegraph.kg.explain.tracin.checkpoints import resolve_checkpoint_list
    from tracegraph.kg.model.model_io import run_label_smoothing

    cands = [candidate_rows(train_ids, f, cfg.candidates) for f in facts]
    opts = MethodOptions(
        loss=cfg.loss, layers=cfg.layers, label_smoothing=run_label_smoothing(Path(cfg.model_dir)), local=cfg.local
    )
    checkpoints = resolve_checkpoint_list(Path(cfg.model_dir), None)
    arms = []
    for m in methods:
        t0 = time.perf_counter()
        keys = method_keys_all(
            [m],
            model=store.model,
            checkpoints=checkpoints,
            train_ids=train_ids,
            facts=facts,
            subsets=cands,
            known=known,
            opts=opts,
            device=device,
        )[m]
        ks = {m: [cfg.k] * len(facts)} | ({f"{m}@{cfg.size_like}": [min(cfg.k, n) for n in sized]} if sized else {})
        per = (time.perf_counter() - t0) / len(facts)
        for name, k in ks.items():
            rows = [np.sort(top_rows(keys[j], cands[j], k[j], cfg.seed, j)) for j in range(len(facts))]
            settings = arm_settings(cfg, name, sized)
            write_method_explanations(out, name, store, train_ids, labels, rows, settings, per, device)
            log.info(f"compare: {name} explained {len(facts)} facts, {per:.3f}s each")
            arms.append(Arm(name, "method", rows, seed, per))
    return arms


def write_method_explanations(out: Path, name, store, train_ids, labels, rows, settings: dict, per, device) -> None:
    """``explanations/NAME.tsv`` and, beside it, ``NAME.json``: the facts, settings and time."""
    e, r = store.entities.labels, store.relations.labels
    table = ExplanationTable(list(labels), [[(e[a], r[b], e[c]) for a, b, c in train_ids[x]] for x in rows])
    write_explanation_table(out / "explanations" / f"{name}.tsv", table)
    info = {"facts": [list(f) for f in labels], "settings": settings, "seconds_per_explanation": per}
    atomic_write_json(out / "explanations" / f"{name}.json", info | {"device": str(device)})


def arm_settings(cfg, name: str, sized: list[int] | None) -> dict:
    """What a method arm's explanations depend on; a sized arm (``METHOD@NAME``) its sizes too."""
    return method_settings(cfg) | ({"sized_like": cfg.size_like, "sizes": list(sized)} if "@" in name else {})


def method_settings(cfg) -> dict:
    """What a method arm's explanations depend on besides the run and the facts."""
    return {
        "k": cfg.k,
        "candidates": cfg.candidates,
        "loss": cfg.loss,
        "layers": cfg.layers,
        "seed": cfg.seed,
        "local": asdict(cfg.local),
    }


def cached_method_arm(
    out: Path, method: str, facts_labels: list, store, row_of, settings: dict, seed: int
) -> Arm | None:
    """The method arm explained earlier into ``explanations/`` for the same facts and settings, or None."""
    tsv, meta = out / "explanations" / f"{method}.tsv", out / "explanations" / f"{method}.json"
    if not (tsv.is_file() and meta.is_file()):
        return None
    info = read_json(meta)
    if info.get("facts") != [list(f) for f in facts_labels] or info.get("settings") != settings:
        return None
    rows = table_rows(read_explanation_table(tsv), facts_labels, store, row_of)
    return Arm(method, "method", rows, seed, info.get("seconds_per_explanation"))


def check_arm_names(cfg) -> None:
    """Refuse a bad arm name before any work is done.

    An explanations file named like another arm, or an unknown arm in ``--arm``, ``--versus`` or
    ``--random-like``.

    Args:
        cfg: The compare settings (``CompareConfig``).

    Raises:
        TracegraphError: Naming the flag, the name and (for an unknown arm) the arms there are.
    """
    sized = [n for names in method_arm_names(cfg).values() for n in names[1:]]
    others = [*cfg.methods, *sized, f"random-{cfg.candidates}", "far", "noise"]  # the arms besides the files'
    clash = set(cfg.explanations) & set(others)
    if clash:
        raise TracegraphError(f"--explanations name {sorted(clash)[0]!r} is taken by another arm; choose another")
    explained = [*cfg.explanations, *cfg.methods]  # the arms whose explanation sizes a random arm can copy
    arms = [*cfg.explanations, *others]
    asked = [("--arm", a, arms) for a in cfg.arms or []] + [("--versus", a, arms) for a in cfg.versus]
    asked += [("--random-like", cfg.random_like, explained)] if cfg.random_like else []
    asked += [("--size-like", cfg.size_like, list(cfg.explanations))] if cfg.size_like else []
    for flag, name, known in asked:
        if name not in known:
            raise TracegraphError(f"{flag} {name}: no such arm (arms: {', '.join(known) or 'none'})")


def method_arm_names(cfg) -> dict[str, list[str]]:
    """Per method, its arms: its own and, with ``size_like`` NAME, ``METHOD@NAME``."""
    return {m: [m, *([f"{m}@{cfg.size_like}"] if cfg.size_like else [])] for m in cfg.methods}


def build_arms(store, cfg, tables, facts, labels, train_ids, known, device, out, compute=True) -> dict[str, Arm]:
    """Every arm's removals, in table order: files, methods, random, far, noise (see the module doc).

    With ``compute`` False the methods' explanations are only read back from ``out/explanations``
    (where the run's weights are not at hand); one missing or made with other settings raises
    :class:`~tracegraph.errors.DataError` naming its file.
    """
    seed = cfg.retrain_seed  # another seed repeats the protocol with other retrains; the explanations stay the run's
    if seed is None:
        seed = int(read_json(Path(cfg.model_dir) / "config.json")["train"].get("seed", 0))
    row_of = {tuple(int(x) for x in t): i for i, t in enumerate(train_ids)}
    arms = {name: Arm(name, "file", table_rows(t, labels, store, row_of), seed) for name, t in tables.items()}
    sized = [len(r) for r in arms[cfg.size_like].rows] if cfg.size_like else None
    names = method_arm_names(cfg)
    cached = {
        n: cached_method_arm(out, n, labels, store, row_of, arm_settings(cfg, n, sized), seed)
        for ns in names.values()
        for n in ns
    }
    todo = [m for m, ns in names.items() if any(cached[n] is None for n in ns)]
    if todo and not compute:
        gone = next(n for m in todo for n in names[m] if cached[n] is None)
        raise DataError(
            "missing, or made with other settings, and the run's weights are not here to explain again",
            out / "explanations" / f"{gone}.tsv",
        )
    fresh = method_arms(store, cfg, todo, facts, labels, train_ids, known, device, out, seed, sized) if todo else []
    arms.update({n: arm for n, arm in cached.items() if arm is not None})
    arms.update({arm.name: arm for arm in fresh})
    arms = {name: arms[name] for name in [*tables, *cfg.methods, *(n for ns in names.values() for n in ns[1:])]}
    like = cfg.random_like or (next(iter(tables)) if tables else None)
    sizes = [len(r) for r in arms[like].rows] if like else [cfg.k] * len(facts)
    rand = f"random-{cfg.candidates}"
    arms[rand] = Arm(rand, "random", random_rows(train_ids, facts, sizes, cfg.candidates, cfg.seed), seed)
    arms["far"] = Arm("far", "far", far_rows(train_ids, facts, sizes, cfg.seed), seed)
    noise_seed = seed + 1 if cfg.noise_seed is None else cfg.noise_seed
    arms["noise"] = Arm("noise", "noise", [np.zeros(0, np.int64)] * len(facts), noise_seed)
    return arms


def twin_record(arms: dict[str, Arm], records: dict, name: str, labels: list) -> dict | None:
    """The record of ``name`` taken from a finished arm that removes the same facts with the same seed, else None.

    A retrain depends only on what is removed and the seed (the graded facts are the same), and both
    filterings only on the removals: such an arm *is* that retrain, so it is not run twice (two methods
    that explain every fact alike, say). The record says whose retrain it is (``retrain_of``).
    """
    arm = arms[name]
    for other, rec in records.items():
        if (
            rec.get("retrain_of") is None
            and arms[other].seed == arm.seed
            and np.array_equal(arms[other].removed(), arm.removed())
        ):
            return rec | {
                "name": name,
                "kind": arm.kind,
                "digest": removal_digest(arm, labels),
                "explanation_sizes": [int(len(x)) for x in arm.rows],
                "seconds_per_explanation": arm.seconds_per_explanation,
                "retrain_of": other,
            }
    return None
