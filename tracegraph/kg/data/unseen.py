"""Entities that occur in valid/test but never in train, and what to do with them.

Standard benchmarks have them (FB15k-237: 8 in valid, 29 in test). Three policies:

- ``include`` (default, as LibKGE and the original ConvE code do): the entity gets an id — after
  every training entity, so a training-only map is a prefix of this one — and an embedding that
  is never a positive target (1-N scoring still pushes it down as a negative, as it does every
  entity); its triples are ranked among all entities like any other.
- ``drop``: triples mentioning such an entity leave valid/test; how many is reported.
- ``error``: the first one stops the run, naming file and line (the id map's own message).

Only entities are covered: a relation unseen in train still stops the run (no policy can score
a relation whose embedding was never trained, and the benchmarks have none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.data.triples import LabeledTriples, encode_triples

POLICIES = ("include", "drop", "error")


def check_policy(policy: str) -> str:
    """Check an ``--unseen`` policy name.

    Args:
        policy: ``"error"``, ``"include"`` or ``"drop"``.

    Returns:
        ``policy``.

    Raises:
        TracegraphError: If it is not one of them.
    """
    if policy not in POLICIES:
        raise TracegraphError(f"--unseen must be one of {', '.join(POLICIES)}, not {policy!r}")
    return policy


@dataclass
class UnseenReport:
    """What the policy found and did; written to config.json / evaluation.json."""

    policy: str
    entities: list[str] = field(default_factory=list)  # sorted labels unseen in train
    triples: dict[str, int] = field(default_factory=dict)  # split -> triples mentioning one
    per_split: dict[str, int] = field(default_factory=dict)  # split -> distinct unseen entities in it

    def to_json(self) -> dict:
        """The report as written to config.json / evaluation.json (at most 100 entity labels)."""
        return {
            "policy": self.policy,
            "entities": len(self.entities),
            "entity_labels": self.entities[:100],
            "entities_per_split": self.per_split,
            "triples": self.triples,
            "dropped": self.policy == "drop",
        }

    def describe(self) -> str | None:
        """One log line saying what was found and done, or None when there is nothing to say."""
        if not self.entities or self.policy == "error":  # error: the id map's own message says it
            return None
        where = ", ".join(
            f"{self.per_split[s]} in {s} ({n} triple{'s' * (n != 1)})" for s, n in self.triples.items() if n
        )
        action = {
            "include": "included (never a training positive) and ranked among all entities",
            "drop": "their triples dropped from evaluation",
        }[self.policy]
        return f"{len(self.entities)} entities unseen in train, {where}: {action}"


def unseen_mask(lt: LabeledTriples, known: IdMap | set) -> np.ndarray:
    """Mark the rows whose head or tail is not in ``known``.

    Args:
        lt: The triples.
        known: The known entities, as an id map or a set of labels.

    Returns:
        Boolean mask, one entry per triple.
    """
    if isinstance(known, IdMap):
        h, t = known.contains_all(lt.heads), known.contains_all(lt.tails)
    else:
        h = np.fromiter((x in known for x in lt.heads), bool, len(lt))
        t = np.fromiter((x in known for x in lt.tails), bool, len(lt))
    return ~(h & t)


def subset(lt: LabeledTriples, keep: np.ndarray) -> LabeledTriples:
    """The triples where ``keep`` is true, with their lines.

    Args:
        lt: The triples.
        keep: Boolean mask, one entry per triple.

    Returns:
        The selected triples.
    """
    idx = np.flatnonzero(keep)
    pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
    return LabeledTriples(pick(lt.heads), pick(lt.relations), pick(lt.tails), lt.lines[idx], lt.path)


def apply_policy(
    entities: IdMap, splits: dict[str, LabeledTriples], policy: str, trained: IdMap | set | None = None
) -> tuple[IdMap, dict[str, LabeledTriples], UnseenReport]:
    """Apply ``policy`` to the evaluation ``splits`` given the id map built from train.

    ``error`` changes nothing: encoding then raises the id map's usual message.

    Args:
        entities: The entity map built from train.
        splits: Evaluation splits by name (``"valid"``, ``"test"``).
        policy: ``"error"``, ``"include"`` (unseen entities join the map) or ``"drop"`` (their
            triples leave the splits).
        trained: The entities training actually saw, when that differs from ``entities`` (a model
            trained with ``include`` has unseen entities in its map); None means ``entities``.

    Returns:
        The (possibly extended) map, the (possibly reduced) splits, and the report.

    Raises:
        TracegraphError: If the policy name is unknown.
    """
    check_policy(policy)
    reference = trained if trained is not None else entities
    masks = {name: unseen_mask(lt, reference) for name, lt in splits.items()}
    per_split: dict[str, set[str]] = {}
    for name, lt in splits.items():
        found = per_split.setdefault(name, set())
        for k in np.flatnonzero(masks[name]):
            found.update(x for x in (lt.heads[k], lt.tails[k]) if x not in reference)
    report = UnseenReport(
        policy,
        sorted(set().union(*per_split.values())),
        {name: int(m.sum()) for name, m in masks.items()},
        {name: len(found) for name, found in per_split.items()},
    )
    if policy == "include":
        new = [x for x in report.entities if x not in entities]
        if new:
            entities = IdMap(entities.labels + new)
    elif policy == "drop":
        splits = {name: subset(lt, ~masks[name]) for name, lt in splits.items()}
    return entities, splits, report


def encode_known(lt: LabeledTriples, entities: IdMap, relations: IdMap) -> np.ndarray:
    """Encode only the triples all of whose labels are in the maps.

    For filter sets, where a triple the model cannot score filters nothing.

    Args:
        lt: The triples.
        entities: The entity map.
        relations: The relation map.

    Returns:
        int64 array ``[N, 3]`` of the kept triples.
    """
    keep = ~unseen_mask(lt, entities) & relations.contains_all(lt.relations)
    return encode_triples(subset(lt, keep), entities, relations)


def evaluation_triples(lm, test, policy: str, train_files: list) -> tuple[np.ndarray, dict]:
    """The test triples of an evaluation as ids under ``policy``, and the report.

    "Unseen" means absent from the run's training file (the model's id map when the run recorded
    none). An entity the model has no id for at all cannot be ranked: ``include`` refuses it with a
    pointer to ``drop`` or to retraining with ``--unseen include``.

    Args:
        lm: The loaded model's store (its ``entities`` and ``relations`` maps).
        test: The test triples file.
        policy: ``"error"``, ``"include"`` or ``"drop"``.
        train_files: The run's training file, if recorded (a list of at most one path).

    Returns:
        int64 array ``[N, 3]`` of test triples, and the report as JSON.

    Raises:
        TracegraphError: If an entity is unseen under ``error``, or has no id under ``include``.
        DataError: If the test file is malformed or names an unknown relation.
    """
    from tracegraph.kg.data.triples import read_labeled_triples
    from tracegraph.runtime.progress import log

    check_policy(policy)
    lt = read_labeled_triples(test)
    trained: IdMap | set = lm.entities
    if train_files:
        tr = read_labeled_triples(train_files[0])
        trained = set(tr.heads) | set(tr.tails)
    _, splits, report = apply_policy(lm.entities, {"test": lt}, policy, trained)
    lt = splits["test"]
    if policy == "include":
        outside = np.flatnonzero(unseen_mask(lt, lm.entities))
        if outside.size:
            k = int(outside[0])
            label = next(x for x in (lt.heads[k], lt.tails[k]) if x not in lm.entities)
            raise TracegraphError(
                f"{lt.path}:{int(lt.lines[k])}: entity {label!r} is not in the model's id map, so it cannot be "
                f"ranked ({outside.size} such triples); use --unseen drop, or retrain with --unseen include "
                f"and this file as --valid/--test"
            )
    elif policy == "error" and report.entities and not isinstance(trained, IdMap):
        k = int(np.flatnonzero(unseen_mask(lt, trained))[0])
        label = next(x for x in (lt.heads[k], lt.tails[k]) if x not in trained)
        raise TracegraphError(
            f"{lt.path}:{int(lt.lines[k])}: entity {label!r} never occurs in the training "
            f"triples {train_files[0]} (--unseen include ranks it, --unseen drop skips it)"
        )
    if report.describe():
        log.info(report.describe())
    return encode_triples(lt, lm.entities, lm.relations), report.to_json()
