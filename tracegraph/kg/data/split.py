"""Reproducible train/valid/test splits and data statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.labels import LABEL_FILES
from tracegraph.kg.data.triples import LabeledTriples, read_labeled_triples
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_text


@dataclass
class SplitResult:
    """A split of a triples file.

    Attributes:
        train: Training triples ``(head, relation, tail)``.
        valid: Validation triples.
        test: Test triples.
        dropped: Triples removed from ``"valid"`` and ``"test"`` because an entity or the relation
            does not occur in train.
    """

    train: list[tuple[str, str, str]]
    valid: list[tuple[str, str, str]]
    test: list[tuple[str, str, str]]
    dropped: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)


def split_triples(lt: LabeledTriples, valid_fraction: float, test_fraction: float, seed: int) -> SplitResult:
    """Shuffle distinct triples with ``seed`` and cut them into train, valid and test by fractions.

    Valid and test triples whose entities or relation do not occur in train are dropped (and
    reported), since a model cannot rank what it never saw. Exact duplicates are dropped first.

    Args:
        lt: The triples.
        valid_fraction: Share of triples for validation, in ``[0, 1)``.
        test_fraction: Share of triples for testing, in ``[0, 1)``.
        seed: Shuffling seed.

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

    def keep(rows):
        ok = [x for x in rows if x[0] in ents and x[2] in ents and x[1] in rels]
        return ok, [x for x in rows if not (x[0] in ents and x[2] in ents and x[1] in rels)]

    valid, dv = keep(valid)
    test, dt = keep(test)
    return SplitResult(train, valid, test, {"valid": dv, "test": dt})


def write_triples(path: str | Path, rows) -> None:
    """Write ``(head, relation, tail)`` rows as a tab-separated triples file, atomically.

    Args:
        path: The destination file.
        rows: Iterable of ``(head, relation, tail)`` label tuples.
    """
    atomic_write_text(path, "".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))


def split_file(path, out_dir, valid_fraction=0.1, test_fraction=0.1, seed=0) -> SplitResult:
    """Split one triples file into ``out_dir``/train.txt, valid.txt and test.txt.

    The import's name files beside ``path`` (``node_name_dict.txt``, ``node_dict.txt``,
    ``edge_map.json``) are copied along when ``out_dir`` has none of its own: ``train`` records the
    ones next to the training file, which is how a run knows ``biolink:treats`` and readable names.

    Args:
        path: The triples file.
        out_dir: The directory to write into (it must exist).
        valid_fraction: Share of triples for validation.
        test_fraction: Share of triples for testing.
        seed: Shuffling seed.

    Returns:
        The split.

    Raises:
        DataError: If the triples file cannot be read.
        TracegraphError: If the fractions are out of range.
    """
    res = split_triples(read_labeled_triples(path), valid_fraction, test_fraction, seed)
    out = Path(out_dir)
    for name in ("train", "valid", "test"):
        write_triples(out / f"{name}.txt", getattr(res, name))
    for name in LABEL_FILES.values():
        src, dst = Path(path).parent / name, out / name
        if src.is_file() and not dst.exists():
            with atomic_path(dst) as tmp:
                tmp.write_bytes(src.read_bytes())
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
