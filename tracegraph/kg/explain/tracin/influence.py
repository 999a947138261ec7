"""A TracIn object you can hold: ``tracegraph.TracIn(run, ...)``.

>>> tracin = tracegraph.TracIn(run, loss="logit")              # doctest: +SKIP
>>> tracin.influence([("steroid", "interacts_with", "eicosanoid")]).shape   # [tests, training triples]
>>> tracin.top_k(("steroid", "interacts_with", "eicosanoid"), k=5)        # proponents, then opponents
>>> tracin.self_influence()                                  # Σ_k η_k ‖∇ℓ_k(train)‖², one per training triple

Influence is Σ_k η_k ⟨∇ℓ(θ_k, train), ∇ℓ(θ_k, test)⟩ over the checkpoints. ``explain`` and the
influence-based methods compute it through this object too (:meth:`TracIn.from_parts`,
:meth:`TracIn.result`, :meth:`TracIn.per_checkpoint`): one place holds the checkpoints, the
engine's options, the checkpoint reader and the device.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.tracin.checkpoints import explained_checkpoints, single_checkpoint_warning
from tracegraph.kg.explain.tracin.engine import (
    DEFAULT_LOSS,
    InfluenceOptions,
    InfluenceResult,
    auto_batch_size,
    check_influence_options,
    compute_influence,
)
from tracegraph.kg.explain.tracin.rows import pick
from tracegraph.kg.model.store import RunStore
from tracegraph.runtime.precision import resolve_device
from tracegraph.runtime.progress import log, make_progress


class TracIn:
    """TracIn influence of a run's training triples on any test triples.

    Args:
        run: a :class:`~tracegraph.kg.model.store.RunStore` (``tracegraph.open_run(...)``) or a run path.
        train: the training triples ranked (a file or label triples); default the run's training file.
        checkpoints: as ``explain``: default the epoch checkpoints up to the model's epoch; or
            ["all"], ["best"], ["final"], paths.
        loss: logit (default), score or train-loss.
        layers: all, last:N, or comma-separated parameter names.
        engine: exact (default), autograd or vmap.
        label_smoothing: for loss="train-loss"; default the run's.
        batch_size: training triples per step (0: automatic).
        progress: show a progress bar (on a terminal).
        precision: fp32 (default; exact), or a lower precision the device supports.
        scratch_dir: where a [tests, training triples] matrix too large for memory spills to disk
            (default the system's temporary folder).
        device: where the gradients are computed; default the run's device.

    Raises:
        TracegraphError: no training triples to rank, an unknown engine or loss, or no checkpoints.
    """

    def __init__(
        self,
        run,
        train=None,
        checkpoints: list[str] | None = None,
        loss: str = DEFAULT_LOSS,
        layers: str = "all",
        engine: str = "exact",
        label_smoothing: float | None = None,
        batch_size: int = 0,
        progress: bool = True,
        precision: str = "fp32",
        scratch_dir: str | None = None,
        device: str | torch.device | None = None,
    ):
        store = run if isinstance(run, RunStore) else RunStore(run)
        train = train if train is not None else store.data_files.get("train")
        if train is None:
            raise TracegraphError(f"{store.path}: the run records no training file that still exists; pass train=")
        paths, note = explained_checkpoints(store, checkpoints)
        log.info(note)
        few = single_checkpoint_warning(store, checkpoints, paths)
        if few:
            log.warning(few)
        eps = label_smoothing if label_smoothing is not None else store.label_smoothing
        options = InfluenceOptions(
            engine=engine,
            loss=loss,
            layers=layers,
            label_smoothing=eps,
            batch_size=batch_size,
            precision=precision,
            scratch_dir=scratch_dir,
        )
        self._setup(store, store.encode(train), paths, options, device, progress, None)

    @classmethod
    def from_parts(
        cls,
        store: RunStore | None,
        train_ids: np.ndarray,
        checkpoints: list[Path],
        options: InfluenceOptions,
        *,
        device: str | torch.device | None = None,
        progress: bool = True,
        read: Callable | None = None,
    ) -> "TracIn":
        """A TracIn over parts already resolved (what ``explain`` and the methods hold).

        Args:
            store: the run's store (id maps for :meth:`influence` and :meth:`top_k`, its cached
                checkpoint reader); None: ids only, checkpoints read from disk.
            train_ids: ``[M, 3]`` training triples as ids.
            checkpoints: the checkpoint files summed over, as given (no rule applied).
            options: the engine's options, used as given, except that a zero (automatic) batch size
                is fixed here when the store is known, as the engine would choose it on ``device``
                (torchrun's shards are made of whole batches, so the size must be known up front).
            device: where the gradients are computed; default the store's, else the CPU.
            progress: :meth:`influence` and :meth:`top_k` show a progress bar.
            read: ``read(path, map_location) -> checkpoint dict``; default the store's cached reader.

        Returns:
            The TracIn object.

        Raises:
            TracegraphError: an unknown engine or loss.
        """
        self = cls.__new__(cls)
        self._setup(
            store, np.asarray(train_ids, np.int64).reshape(-1, 3), list(checkpoints), options, device, progress, read
        )
        return self

    def _setup(self, store, train_ids, checkpoints, options, device, progress, read) -> None:
        check_influence_options(options)
        self.run = store
        self.train_ids = train_ids
        self.checkpoints = checkpoints
        self.device = (
            _device(device) if device is not None else store.device if store is not None else torch.device("cpu")
        )
        self.options = replace(options)  # a copy: the caller's options object may change afterwards
        if not options.batch_size and store is not None:
            self.options.batch_size = auto_batch_size(len(store.entities), self.device)
        self.read = read or (store.read_checkpoint if store is not None else None)
        self.progress = progress
        self._train_self: np.ndarray | None = None

    def __repr__(self) -> str:
        o = self.options
        return (
            f"TracIn({self.run!r}, {len(self.train_ids)} training triples, {len(self.checkpoints)} checkpoints, "
            f"loss={o.loss!r}, layers={o.layers!r}, engine={o.engine!r})"
        )

    def result(
        self, test_ids: np.ndarray, rows: np.ndarray | None = None, *, device=None, progress=None
    ) -> InfluenceResult:
        """The engine's full result for test triples given as ids.

        Args:
            test_ids: ``[T, 3]`` test triples as ids (explain appends the margin methods' rivals here).
            rows: the training rows scored (positions in ``train_ids``, in this order); default all.
            device: overrides the object's device for this call (one device of several).
            progress: a progress display to report to (None: silent).

        Returns:
            An :class:`~tracegraph.kg.explain.tracin.engine.InfluenceResult`: ``scores`` ``[T, len(rows)]``,
            ``train_self`` of the rows, ``test_self``, the checkpoints with their learning rates, the layers.
        """
        train = self.train_ids if rows is None else self.train_ids[np.asarray(rows, np.int64)]
        res = compute_influence(
            self.checkpoints,
            train,
            np.asarray(test_ids, np.int64).reshape(-1, 3),
            self.options,
            self.device if device is None else _device(device),
            progress,
            read=self.read,
        )
        if rows is None:
            self._train_self = np.asarray(res.train_self, np.float64)
        return res

    def per_checkpoint(
        self, test_ids: np.ndarray, rows: np.ndarray | None = None, *, progress=None
    ) -> Iterator[InfluenceResult]:
        """:meth:`result` one checkpoint at a time, what the cosine and RelatIF need before the sum.

        Args:
            test_ids: ``[T, 3]`` test triples as ids.
            rows: the training rows scored (positions in ``train_ids``, in this order); default all.
            progress: a progress display to report to (None: silent).

        Yields:
            One :class:`~tracegraph.kg.explain.tracin.engine.InfluenceResult` per checkpoint, in order:
            ``scores`` η_k ⟨∇ℓ_k(train), ∇ℓ_k(test)⟩, ``train_self`` and ``test_self`` η_k ‖∇ℓ_k‖²,
            ``checkpoints`` that one checkpoint.
        """
        for path in self.checkpoints:
            yield TracIn.from_parts(
                self.run, self.train_ids, [path], self.options, device=self.device, read=self.read
            ).result(test_ids, rows, progress=progress)

    def _compute(self, test_ids: np.ndarray) -> InfluenceResult:
        with make_progress() if self.progress else contextlib.nullcontext() as progress:
            return self.result(test_ids, progress=progress)

    def _test_ids(self, test) -> np.ndarray:
        if self.run is None:
            raise TracegraphError("this TracIn holds ids only (built without a run): pass test ids to result()")
        if isinstance(test, tuple) and len(test) == 3 and all(isinstance(x, str) for x in test):
            test = [test]
        return self.run.encode(test)

    def influence(self, test) -> np.ndarray:
        """``[T, M]``: the influence of each of the M training triples on each of the T test triples.

        Also records the training triples' self-influence (:meth:`self_influence`).

        Args:
            test: label triples: one ``(head, relation, tail)``, a list of them, a DataFrame or a triples file.

        Returns:
            ``[T, M]`` float64 Σ_k η_k ⟨∇ℓ_k(train), ∇ℓ_k(test)⟩, training triples in ``train_ids``'s order.

        Raises:
            TracegraphError: this TracIn holds ids only (built by :meth:`from_parts` without a store),
                or a label is unknown.
            DataError: a triples file's label is unknown (naming the line).
        """
        return np.asarray(self._compute(self._test_ids(test)).scores, np.float64)

    def self_influence(self) -> np.ndarray:
        """``[M]``: each training triple's Σ_k η_k ‖∇ℓ_k‖² (computed with the first influence call)."""
        if self._train_self is None:
            self._compute(self.train_ids[:1])
        return self._train_self

    def top_k(self, test, k: int = 10) -> pd.DataFrame:
        """One test triple's k proponents (positive influence, strongest first) and k opponents (most negative first).

        Fewer are listed when fewer training triples have an influence of that sign.

        Args:
            test: one label triple ``(head, relation, tail)``, or a DataFrame or triples file holding one.
            k: proponents and opponents each, at least 1.

        Returns:
            A DataFrame with columns head, relation, tail, influence, self_influence, role
            (``proponent`` or ``opponent``), proponents first.

        Raises:
            TracegraphError: not exactly one test triple, k below 1, an unknown label, or a TracIn
                that holds ids only.
            DataError: a triples file's label is unknown (naming the line).
        """
        ids = self._test_ids(test)
        if len(ids) != 1:
            raise TracegraphError(f"top_k explains one test triple, got {len(ids)}")
        if k < 1:
            raise TracegraphError(f"k must be at least 1, not {k}")
        scores = np.asarray(self._compute(ids).scores, np.float64)[0]
        order, roles = pick(scores, None, k)
        ent, rel = self.run.entities.labels, self.run.relations.labels
        rows = [
            (ent[h], rel[r], ent[t], float(scores[i]), float(self._train_self[i]), role)
            for i, role in zip(order, roles)
            for h, r, t in [self.train_ids[i]]
        ]
        return pd.DataFrame(rows, columns=["head", "relation", "tail", "influence", "self_influence", "role"])


def _device(device) -> torch.device:
    return resolve_device(device) if isinstance(device, str) else torch.device(device)


__all__ = ["TracIn"]
