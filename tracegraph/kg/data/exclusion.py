"""Leaving training triples out of a run without disturbing the rest of it.

A retrain on a smaller training file draws a different batch order (the sampler permutes a
different number of samples), so *every* batch changes and the retrained model differs from the
original for reasons that have nothing to do with the removed triples (measured on UMLS: removing
10 unrelated triples cost 0.25 in reciprocal rank). ``TrainConfig.exclude`` instead keeps the
full set's samples and batch order and masks the excluded triples out:

* KvsAll: the excluded tails leave their (head, relation) sample's targets; a sample with no tail
  left leaves its batch;
* 1vsAll: the excluded triples leave their batch.

With reciprocal relations both directions go. Together with per-batch dropout seeds (train.py),
a batch that holds no excluded triple is the same batch, with the same dropout masks, as in the
full run; with nothing excluded the run is the original run, bit for bit on CPU.
"""

from __future__ import annotations

import numpy as np

from tracegraph.errors import DataError
from tracegraph.kg.data.triples import KnownTails, TripleSet, encode_triples, read_labeled_triples, with_reciprocals


def triple_keys(ids: np.ndarray, num_entities: int, num_relations: int) -> np.ndarray:
    """One integer per ``(h, r, t)`` row, for set-membership tests.

    Args:
        ids: Integer triples, shape ``[N, 3]`` (anything reshapeable to it).
        num_entities: Number of entities (ids are below it).
        num_relations: Number of relation ids, inverses included when present.

    Returns:
        ``[N]`` int64 keys, equal exactly when the triples are equal.
    """
    ids = np.asarray(ids, np.int64).reshape(-1, 3)
    return (ids[:, 0] * num_relations + ids[:, 1]) * num_entities + ids[:, 2]


def excluded_mask(train_ids: np.ndarray, excluded_ids: np.ndarray, num_entities: int, num_relations: int) -> np.ndarray:
    """Mark every row of ``train_ids`` that equals one of ``excluded_ids`` (all copies of a duplicate).

    Args:
        train_ids: Integer triples, shape ``[N, 3]``.
        excluded_ids: Integer triples to look for, shape ``[M, 3]``.
        num_entities: Number of entities.
        num_relations: Number of relation ids, inverses included when present.

    Returns:
        ``[N]`` boolean mask.
    """
    return np.isin(
        triple_keys(train_ids, num_entities, num_relations), triple_keys(excluded_ids, num_entities, num_relations)
    )


def exclude_from_samples(
    exclude_path: str, train: TripleSet, samples: np.ndarray, known: KnownTails | None, mcfg
) -> tuple[KnownTails | None, np.ndarray]:
    """Remove the triples listed in a file from the training samples and targets.

    ``samples`` and ``known`` are what the full training set gives; every excluded triple must be
    one of its training triples (a typo would otherwise silently exclude nothing).

    Args:
        exclude_path: The triples file of the triples to leave out.
        train: The full training set.
        samples: The training samples: ``(h, r)`` pairs for KvsAll, triples for 1vsAll.
        known: The KvsAll targets of the full set; None for 1vsAll training.
        mcfg: The model configuration (its ``reciprocal`` and ``num_relation_rows``).

    Returns:
        The KvsAll targets without the excluded triples (None for 1vsAll), and a boolean mask over
        ``samples`` of those that stay in the batches.

    Raises:
        DataError: If an excluded triple is not a training triple (naming its line).
    """
    lt = read_labeled_triples(exclude_path)
    excluded = encode_triples(lt, train.entities, train.relations)
    R = train.num_relations
    present = excluded_mask(excluded, train.ids, train.num_entities, R)
    if not present.all():
        i = int(np.flatnonzero(~present)[0])
        raise DataError(
            f"excluded triple {lt.heads[i]} {lt.relations[i]} {lt.tails[i]} is not a training triple",
            exclude_path,
            int(lt.lines[i]),
        )
    ids = with_reciprocals(train.ids, R) if mcfg.reciprocal else train.ids
    gone = with_reciprocals(excluded, R) if mcfg.reciprocal else excluded
    drop = excluded_mask(ids, gone, train.num_entities, mcfg.num_relation_rows)
    if known is None:  # 1vsAll: samples are the triples themselves
        return None, ~drop
    kept_known = KnownTails([ids[~drop]], mcfg.num_relation_rows)
    keep = kept_known.key_rows(samples[:, 0], samples[:, 1]) >= 0
    return kept_known, keep
