"""A training run's triples read into ids: train defines the id maps, valid and test use them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.data.triples import TripleSet, count_duplicates, encode_triples, read_labeled_triples
from tracegraph.kg.model.train_config import TrainConfig


@dataclass
class Data:
    """A training run's triples as ids.

    Attributes:
        train: The training triples with the id maps.
        valid: Validation triples ``[N, 3]`` (empty without validation).
        test: Test triples ``[N, 3]`` (empty without test).
        unseen: What the ``--unseen`` policy found and did, for config.json.
        notes: What reading found (duplicates, unseen entities), logged once the run starts.
    """

    train: TripleSet
    valid: np.ndarray
    test: np.ndarray
    unseen: dict | None = None  # what the --unseen policy found and did (config.json)
    notes: list = field(default_factory=list)  # what reading found (duplicates, unseen), logged once the run starts


def load_data(cfg: TrainConfig) -> Data:
    """Read a run's triples: train defines the id maps (unless maps are given), valid and test use them.

    Valid and test entities unseen in train are handled by ``cfg.unseen``.

    Args:
        cfg: The training config.

    Returns:
        The triples.

    Raises:
        DataError: If a file is malformed or a label is not in a given map.
        TracegraphError: If an entity is unseen under ``--unseen error``.
    """
    from tracegraph.kg.data.unseen import apply_policy

    lt = read_labeled_triples(cfg.train)
    entities = IdMap.read(cfg.entity_map, "entity map") if cfg.entity_map else IdMap.from_labels(lt.heads + lt.tails)
    relations = IdMap.read(cfg.relation_map, "relation map") if cfg.relation_map else IdMap.from_labels(lt.relations)
    splits = {name: read_labeled_triples(p) for name, p in (("valid", cfg.valid), ("test", cfg.test)) if p}
    counts = [
        f"{name} {part.path}: {len(part)} triples, {count_duplicates(part)} duplicates"
        for name, part in (("train", lt), *splits.items())
    ]  # as read, before --unseen drops any
    entities, splits, unseen = apply_policy(entities, splits, cfg.unseen)
    train = TripleSet(encode_triples(lt, entities, relations), entities, relations, cfg.train)
    split = lambda k: encode_triples(splits[k], entities, relations) if k in splits else np.zeros((0, 3), np.int64)
    if splits:
        counts.append(unseen.describe() or f"{', '.join(splits)}: no entity unseen in train")
    return Data(train, split("valid"), split("test"), unseen.to_json(), counts)
