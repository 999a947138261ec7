"""Reproducible train/valid/test splits and data statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.labels import LABEL_FILES
from tracegraph.kg.data.triples import LabeledTriples, read_labeled_triples
from tracegraph.runtime.checkpoints import atomic_write_text
from tracegraph.runtime.outfolder import check_output_folder, staged_folder


Triple = tuple[str, str, str]
#: how many example triples a split's note names
EXAMPLES = 3


@dataclass
class SplitResult:
    """A split of a triples file.

    Attributes:
        train: Training triples ``(head, relation, tail)``.
        valid: Validation triples.
        test: Test triples.
        dropped: Triples removed from ``"valid"`` and ``"test"`` because an entity or the relation
            does not occur in train.
        moved: With ``unseen_to_train``, those triples instead: moved from ``"valid"`` and
            ``"test"`` into train.
        unseen: Why each dropped or moved triple was: the entities of it train lacks, and whether
            train lacks its relation.
    """

    train: list[Triple]
    valid: list[Triple]
    test: list[Triple]
    dropped: dict[str, list[Triple]] = field(default_factory=dict)
    moved: dict[str, list[Triple]] = field(default_factory=dict)
    unseen: dict[Triple, tuple[tuple[str, ...], bool]] = field(default_factory=dict)


def _unseen(triple: Triple, ents: set, rels: set) -> tuple[tuple[str, ...], bool] | None:
    """The entities of ``triple`` train lacks and whether it lacks the relation; None if it has all."""
    h, r, t = triple
    missing = tuple(e for e in dict.fromkeys((h, t)) if e not in ents)
    return (missing, r not in rels) if missing or r not in rels else None


def unseen_words(triple: Triple, why: tuple[tuple[str, ...], bool]) -> str:
    """``'b' not in train``, ``relation 'r' not in train``: what :attr:`SplitResult.unseen` records, in words."""
    missing = [repr(e) for e in why[0]] + ([f"relation {triple[1]!r}"] if why[1] else [])
    return f"{' and '.join(missing)} not in train"


def split_triples(
    lt: LabeledTriples, valid_fraction: float, test_fraction: float, seed: int, unseen_to_train: bool = False
) -> SplitResult:
    """Shuffle distinct triples with ``seed`` and cut them into train, valid and test by fractions.

    Valid and test triples whose entities or relation do not occur in train are dropped (and
    reported), since a model cannot rank what it never saw; with ``unseen_to_train`` they are
    moved into train instead, so no fact is lost. Exact duplicates are dropped first.

    Args:
        lt: The triples.
        valid_fraction: Share of triples for validation, in ``[0, 1)``.
        test_fraction: Share of triples for testing, in ``[0, 1)``.
        seed: Shuffling seed.
        unseen_to_train: Move the valid/test triples that train lacks an entity or relation of into
            train rather than dropping them.

    Returns:
        The split.

    Raises:
        TracegraphError: If the fractions are out of range or sum to 1 or more.
    """
    if not (0 <= valid_fraction < 1 and 0 <= test_fraction < 1 and valid_fraction + test_fraction < 1):
        raise TracegraphError("fractions must be in [0, 1) and sum to less than 1")
    triples = list(dict.fromkeys(zip(lt.heads, lt.relations, lt.tails)))  # drop exact duplicates
    order = np.random.default_rng(seed).permutation(len(triples))
    n_valid = int(round(valid_fraction * len(triples)))
    n_test = int(round(test_fraction * len(triples)))
    test = [triples[i] for i in order[:n_test]]
    valid = [triples[i] for i in order[n_test : n_test + n_valid]]
    train = [triples[i] for i in order[n_test + n_valid :]]
    ents = {h for h, _, _ in train} | {t for _, _, t in train}
    rels = {r for _, r, _ in train}
    unseen = {x: why for x in valid + test if (why := _unseen(x, ents, rels)) is not None}
    held = {name: [x for x in rows if x in unseen] for name, rows in (("valid", valid), ("test", test))}
    valid, test = ([x for x in rows if x not in unseen] for rows in (valid, test))
    if unseen_to_train:  # the original train already covers what stays held out, so one pass suffices
        return SplitResult(train + held["valid"] + held["test"], valid, test, {"valid": [], "test": []}, held, unseen)
    return SplitResult(train, valid, test, held, {}, unseen)


def split_notes(res: SplitResult, fractions: dict[str, float]) -> list[tuple[str, str]]:
    """What a split left out or moved, per split with examples, and which split came out empty.

    Args:
        res: The split.
        fractions: ``{"valid": ..., "test": ...}`` as asked for (an empty split asked for is no news).

    Returns:
        ``(level, sentence)`` pairs, level ``"note"`` or ``"warning"``.
    """
    out = []
    for name in ("valid", "test"):
        kept = getattr(res, name)
        moved, dropped = res.moved.get(name, []), res.dropped.get(name, [])
        held = moved or dropped
        if held:
            entity, relation = (sum(bool(res.unseen[x][i]) for x in held) for i in (0, 1))
            e_g = "; ".join(f"{' '.join(x)} ({unseen_words(x, res.unseen[x])})" for x in held[:EXAMPLES])
            out.append(
                (
                    "note",
                    f"{name}: {'moved' if moved else 'dropped'} {len(held)} of {len(kept) + len(held)} triples "
                    f"whose entity or relation train lacks ({entity} lack an entity, {relation} the relation)"
                    + (" into train" if moved else "")
                    + f", e.g. {e_g}"
                    + ("" if moved else "; --unseen-to-train moves them into train instead"),
                )
            )
        if not kept and fractions.get(name, 0) > 0:
            n = len(res.train) + len(res.valid) + len(res.test) + sum(map(len, res.dropped.values()))
            fate = "moved to train" if moved else "dropped"
            why = (
                (f"all {len(held)} of its triples were {fate}" if len(held) > 1 else f"its one triple was {fate}")
                if held
                else f"a fraction of {fractions[name]:g} of {n} triples rounds to none"
            )
            out.append(
                (
                    "warning",
                    f"{name}.txt is empty ({why}); `train` and `evaluate` refuse an empty file: leave "
                    f"--{name} out, or split again with a larger --{name}-fraction"
                    + ("" if moved or not held else " or --unseen-to-train"),
                )
            )
    return out


def write_triples(path: str | Path, rows) -> None:
    """Write ``(head, relation, tail)`` rows as a tab-separated triples file, atomically.

    Args:
        path: The destination file.
        rows: Iterable of ``(head, relation, tail)`` label tuples.
    """
    atomic_write_text(path, "".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))


def split_file(path, out_dir, valid_fraction=0.1, test_fraction=0.1, seed=0, unseen_to_train=False) -> SplitResult:
    """Split one triples file into ``out_dir``/train.txt, valid.txt and test.txt, all at once or none.

    The import's name files beside ``path`` (``node_name_dict.txt``, ``node_dict.txt``,
    ``edge_map.json``) are copied along when ``out_dir`` has none of its own: ``train`` records the
    ones next to the training file, which is how a run knows ``biolink:treats`` and readable names.

    Args:
        path: The triples file.
        out_dir: The folder to write into (created if needed).
        valid_fraction: Share of triples for validation.
        test_fraction: Share of triples for testing.
        seed: Shuffling seed.
        unseen_to_train: Move valid/test triples with an entity or relation train lacks into train
            instead of dropping them.

    Returns:
        The split.

    Raises:
        DataError: If the triples file cannot be read.
        TracegraphError: If the fractions are out of range, no triple is left for train, or
            ``out_dir`` is a file or cannot be written.
    """
    check_output_folder(out_dir)
    res = split_triples(read_labeled_triples(path), valid_fraction, test_fraction, seed, unseen_to_train)
    if not res.train:
        n = len(res.valid) + len(res.test) + sum(map(len, res.dropped.values()))
        raise TracegraphError(
            f"no triple of {n} is left for train: lower the valid and test fractions "
            f"({valid_fraction:g} and {test_fraction:g})"
        )
    out = Path(out_dir)
    with staged_folder(out) as stage:
        for name in ("train", "valid", "test"):
            write_triples(stage / f"{name}.txt", getattr(res, name))
        for name in LABEL_FILES.values():
            src = Path(path).parent / name
            if src.is_file() and not (out / name).exists():
                (stage / name).write_bytes(src.read_bytes())
    return res


def triple_stats(paths: list[str | Path]) -> dict:
    """Count triples, entities, relations, duplicates, self-loops and degrees per file and combined.

    Args:
        paths: Triples files.

    Returns:
        ``{"files": {path: stats}}``, plus ``"combined"`` when there are several files.

    Raises:
        DataError: If a file cannot be read.
    """
    per_file = {}
    all_h, all_r, all_t = [], [], []
    for p in paths:
        lt = read_labeled_triples(p)
        per_file[str(p)] = _stats(lt.heads, lt.relations, lt.tails)
        all_h += lt.heads
        all_r += lt.relations
        all_t += lt.tails
    out = {"files": per_file}
    if len(paths) > 1:
        out["combined"] = _stats(all_h, all_r, all_t)
    return out


def _stats(h, r, t) -> dict:
    import pandas as pd

    df = pd.DataFrame({"h": h, "r": r, "t": t})
    ents = pd.concat([df.h, df.t])
    # degree = distinct neighbours in the undirected graph, self-loops excluded
    und = pd.DataFrame({"a": pd.concat([df.h, df.t]), "b": pd.concat([df.t, df.h])})
    und = und[und.a != und.b].drop_duplicates()
    deg = und.groupby("a").size().reindex(ents.unique(), fill_value=0)
    top = df.r.value_counts().head(10)
    return {
        "triples": int(len(df)),
        "entities": int(ents.nunique()),
        "relations": int(df.r.nunique()),
        "duplicate_triples": int(df.duplicated().sum()),
        "self_loops": int((df.h == df.t).sum()),
        "degree": {
            "min": int(deg.min()),
            "median": float(deg.median()),
            "mean": float(deg.mean()),
            "max": int(deg.max()),
        },
        "top_relations": {str(k): int(v) for k, v in top.items()},
    }
