"""The influence stage spread over processes or devices (explain's only parallel stage).

* torchrun: every rank scores a contiguous shard of whole training batches against every test
  triple, and rank 0 receives each rank's rows (or only its own top-k picks, which contain the
  global ones);
* ``devices=[...]`` in one process: the *test* triples are split across devices.

Both take the :class:`~tracegraph.kg.explain.tracin.influence.TracIn` that one process would call
(its checkpoints, engine options and checkpoint reader), so every shard is scored the same way.
"""

from __future__ import annotations

import numpy as np

from tracegraph.kg.explain.tracin.engine import InfluenceResult, _alloc
from tracegraph.kg.explain.tracin.influence import TracIn
from tracegraph.kg.explain.tracin.rows import _pick
from tracegraph.runtime.devices import run_on_devices
from tracegraph.runtime.distributed import batch_aligned_shard, gather_to_main, shard_range


def _influence_over_ranks(ctx, tracin: TracIn, union, cols_of, test_ids, progress, top_k, walk_of=None):
    """Under torchrun, score this rank's shard of whole training batches against every test triple.

    The shard holds the batches one process would score, so its numbers are bitwise the same. Rank 0
    receives, per test triple, (position in its column list, score, self-influence) of every row —
    or, with ``top_k``, only each rank's own picks (:func:`~tracegraph.kg.explain.tracin.rows.pick`),
    which contain the global ones (ties included: the order is the same stable sort restricted to a
    shard). Others get None. ``test_ids`` beyond ``len(cols_of)`` are the rivals of tracin-margin,
    one per test triple: then each pick also carries the margin TracIn(test) − TracIn(rival), and
    the picks are the margin's (with ``walk_of``, tracin-margin-path's: by shell, then margin).

    Args:
        ctx: this rank's distributed context (``rank``, ``world_size``).
        tracin: the TracIn one process would call (checkpoints, options with a fixed batch size, reader, device).
        union: the training rows (of ``tracin.train_ids``) any test triple ranks, sorted.
        cols_of: per test triple, the positions in ``union`` of the rows it ranks.
        test_ids: the test triples, then their rivals for the margin methods.
        progress: a progress display, or None.
        top_k: proponents and opponents kept per test triple; None keeps every row.
        walk_of: tracin-margin-path: ``j -> head–tail walk length of each row``.

    Returns:
        ``(this rank's InfluenceResult, picks)``: picks per test triple on rank 0, None on the others.
    """
    lo, hi = batch_aligned_shard(len(union), tracin.options.batch_size, ctx.rank, ctx.world_size)
    result = tracin.result(test_ids, union[lo:hi], progress=progress)  # ``union``: rows of ``tracin.train_ids``
    T = len(cols_of)
    mine = []
    for j, cols in enumerate(cols_of):
        pos = np.nonzero((cols >= lo) & (cols < hi))[0]
        sc = np.asarray(result.scores[j, cols[pos] - lo], np.float64)
        self_inf = result.train_self[cols[pos] - lo]
        key = sc - np.asarray(result.scores[T + j, cols[pos] - lo], np.float64) if len(test_ids) > T else None
        if top_k is not None and 2 * top_k < len(pos):
            keep = np.sort(_pick(sc if key is None else key, None if walk_of is None else walk_of(j)[pos], top_k))
            pos, sc, self_inf = pos[keep], sc[keep], self_inf[keep]
            key = None if key is None else key[keep]
        mine.append((pos, sc, self_inf, key))
    parts = gather_to_main(mine)
    if parts is None:
        return result, None
    picks = []
    for j in range(T):
        pos, sc, self_inf = (np.concatenate([p[j][k] for p in parts]) for k in range(3))
        key = None if parts[0][j][3] is None else np.concatenate([p[j][3] for p in parts])
        o = np.argsort(pos, kind="stable")  # back to the single-process column order
        picks.append((pos[o], sc[o], self_inf[o], None if key is None else key[o]))
    return result, picks


def _influence_over_devices(devices, tracin: TracIn, rows, test_ids, progress) -> InfluenceResult:
    """In one process, split the test triples across devices and stack what each device scores.

    Each device (a thread per device) scores the training ``rows`` (of ``tracin.train_ids``)
    against its share of the test triples.

    Args:
        devices: the devices; no more are used than there are test triples.
        tracin: the TracIn one process would call.
        rows: the training rows scored (positions in ``tracin.train_ids``).
        test_ids: the test triples (and rivals) as ids.
        progress: a progress display, or None.

    Returns:
        The same :class:`InfluenceResult` one process would give (to fp32 rounding: the test
        batches differ), its scores in memory or spilled to ``tracin.options.scratch_dir``.
    """
    devices = devices[: max(1, min(len(devices), len(test_ids)))]  # no device without a test triple
    parts = run_on_devices(
        devices, len(test_ids), lambda d, lo, hi: tracin.result(test_ids[lo:hi], rows, device=d, progress=progress)
    )
    scores = _alloc(len(test_ids), len(rows), tracin.options)  # in RAM or on disk, as one process would
    for p, (lo, hi) in zip(parts, (shard_range(len(test_ids), i, len(devices)) for i in range(len(devices)))):
        scores[lo:hi] = p.scores
    return InfluenceResult(
        scores, parts[0].train_self, np.concatenate([p.test_self for p in parts]), parts[0].checkpoints, parts[0].layers
    )
