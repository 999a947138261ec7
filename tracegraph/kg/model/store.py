"""A run directory opened once: what every layer above the model reads from a run.

A :class:`RunStore` holds a run's ``config.json``, its id maps, its checkpoints with their epochs
and learning rates, and its models, loaded lazily and each checkpoint at most once (kept in a
small cache). It scores nothing and writes nothing: the explanation engine and the methods take a
store; the facade :class:`tracegraph.kg.run.Run` adds predict, score, evaluate and explain on top.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.datafiles import resolve_data_files
from tracegraph.kg.data.labels import RunLabels, run_labels
from tracegraph.kg.data.questions import TRIPLE, Questions, resolve, resolve_file
from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.data.triples import KnownTails, encode_triples, read_labeled_triples, with_reciprocals
from tracegraph.kg.data.unseen import encode_known
from tracegraph.kg.model.model_io import (
    build_model,
    check_maps,
    list_epoch_checkpoints,
    model_dir_of,
    read_id_maps,
    resolve_checkpoint,
    run_label_smoothing,
)
from tracegraph.runtime.checkpoints import load_checkpoint, read_json
from tracegraph.runtime.precision import resolve_device

CACHE_BYTES = 2 * 2**30  # checkpoint contents kept per run; beyond this the least recently used is dropped


@dataclass(frozen=True)
class RunCheckpoint:
    """A saved checkpoint: its file, the epoch it ends and the learning rate used in that epoch."""

    path: Path
    epoch: int | None
    lr: float | None


class RunStore:
    """A trained run directory (or one checkpoint file of it), opened once.

    Args:
        path: the run directory, or one checkpoint file of it (then that is the model scored).
        device: where models are loaded ("cpu", "cuda", "cuda:1" or "auto").
        cache_bytes: checkpoint contents kept in memory before the least recently used is dropped.
        data_files: split name ("train", "valid", "test") -> a file to use in place of the one the
            run recorded (a training file edited since training, say): used as it is, with a
            warning when its bytes differ from the recorded ones.
        stand_in: split name -> a file to use only when the recorded one is missing or changed.

    Cheap to open: nothing is read until it is needed, and no weights until a model is used.
    """

    def __init__(
        self,
        path: str | Path,
        device: str | torch.device = "cpu",
        cache_bytes: int = CACHE_BYTES,
        data_files: dict | None = None,
        stand_in: dict | None = None,
    ):
        self.opened_with = Path(path)  # a checkpoint file here means "this checkpoint" (explain)
        self.given_files = {k: Path(v) for k, v in (data_files or {}).items() if v is not None}
        self.stand_in = {k: Path(v) for k, v in (stand_in or {}).items() if v is not None}
        self.checkpoint = resolve_checkpoint(path)  # the model scored by predict/score/evaluate
        self.path = model_dir_of(self.checkpoint)
        self.device = resolve_device(device) if isinstance(device, str) else torch.device(device)
        self._payloads: OrderedDict[str, dict] = OrderedDict()  # checkpoint contents, least recently used first
        self._models: dict[tuple[str, str], tuple[torch.nn.Module, RunCheckpoint]] = {}  # those asked for by load()
        self._cache_bytes = cache_bytes
        self._lock = threading.Lock()  # explain --devices reads checkpoints from several threads

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, device={str(self.device)!r})"

    # ------------------------------------------------------------------ what the directory holds

    @property
    def model_dir(self) -> Path:  # the name LoadedModel used; helpers written for it accept a store
        """The run directory (same as :attr:`path`)."""
        return self.path

    @cached_property
    def config(self) -> dict:
        """``config.json`` (every training setting, sizes, versions); empty when the run has none."""
        p = self.path / "config.json"
        return read_json(p) if p.is_file() else {}

    @cached_property
    def _maps(self) -> tuple[IdMap, IdMap]:
        return read_id_maps(self.checkpoint)

    @property
    def entities(self) -> IdMap:
        """The run's entity map."""
        return self._maps[0]

    @property
    def relations(self) -> IdMap:
        """The run's relation map."""
        return self._maps[1]

    @property
    def label_smoothing(self) -> float:
        """The label smoothing the run trained with (0 when unrecorded)."""
        return run_label_smoothing(self.path)

    @cached_property
    def data_files(self) -> dict[str, Path]:
        """The run's train/valid/test files, found from any working directory and after a move.

        Each is checked against its recorded sha256 (:mod:`tracegraph.kg.data.datafiles`); a file
        given when the run was opened (``data_files``) is used in place of the recorded one.

        Raises:
            DataError: a recorded file is missing or its content changed (the message names the flag
                that gives another file).
        """
        return self.data_files_with()

    def data_files_with(self, **given) -> dict[str, Path]:
        """:attr:`data_files` with more files given in place of the recorded ones (not cached).

        Args:
            **given: split name -> file, e.g. ``train=...`` (None: the recorded one).

        Returns:
            split name -> file.

        Raises:
            DataError: a recorded file not given is missing or its content changed.
        """
        files = {**self.given_files, **{k: Path(v) for k, v in given.items() if v is not None}}
        return resolve_data_files(self.path, self.config, files, self.stand_in)

    @cached_property
    def labels(self) -> RunLabels:
        """Readable names of entities and relations from the run's recorded label files.

        Those are a KGX import's ``node_name_dict.txt`` and ``edge_map.json``; empty when the run has
        none.
        """
        return run_labels(self.path, self.config, self.entities)

    @cached_property
    def checkpoints(self) -> list[RunCheckpoint]:
        """Every ``checkpoints/epoch_NNNN.pt`` in epoch order (TracIn sums over them).

        Without any, the single model. Learning rates come from ``training_history.json`` when it
        has them, else from the checkpoint itself (which is then read and cached).
        """
        paths = list_epoch_checkpoints(self.path) or [self.checkpoint]
        return [self.checkpoint_info(p) for p in paths]

    def checkpoint_info(self, path: str | Path) -> RunCheckpoint:
        """The epoch and learning rate of one checkpoint file (from the history when recorded there).

        Args:
            path: The checkpoint file.

        Returns:
            Its :class:`RunCheckpoint`.
        """
        path = Path(path)
        stem = path.stem
        if stem.startswith("epoch_") and stem[6:].isdigit():
            lr = self._history_lr.get(int(stem[6:]))
            if lr is not None:
                return RunCheckpoint(path, int(stem[6:]), lr)
        return _info(path, self.read_checkpoint(path))

    @cached_property
    def _history_lr(self) -> dict[int, float]:
        p = self.path / "training_history.json"
        history = read_json(p) if p.is_file() else []
        return {int(h["epoch"]): float(h["lr"]) for h in history if "epoch" in h and h.get("lr") is not None}

    # ------------------------------------------------------------------ models, each loaded once

    @property
    def model(self):
        """The run's model (best, else final, else last checkpoint, or the file it was opened with), in eval mode."""
        return self.load(self.checkpoint)[0]

    def read_checkpoint(self, path: str | Path, map_location=None) -> dict:
        """One checkpoint file's weights, config, epoch and lr, read from disk once and cached.

        Tensors stay on the CPU whatever ``map_location`` asks (it is accepted so that this can stand
        in for ``load_checkpoint`` as the TracIn engine's reader); models are moved after building.

        Args:
            path: The checkpoint file.
            map_location: Ignored.

        Returns:
            The payload. It is shared: do not modify it.

        Raises:
            DataError: If the file cannot be loaded or disagrees with the run's id maps.
        """
        key = str(Path(path).resolve())
        with self._lock:
            if key in self._payloads:
                self._payloads.move_to_end(key)
                return self._payloads[key]
        full = load_checkpoint(path, map_location="cpu")
        # only what scoring and TracIn use: a training checkpoint's optimizer state would triple the memory
        payload = {k: full[k] for k in ("model", "model_config", "epoch", "lr") if k in full}
        del full
        self._check_maps(payload.get("model_config") or {}, path)
        with self._lock:
            self._payloads[key] = payload
            while len(self._payloads) > 1 and sum(map(_nbytes, self._payloads.values())) > self._cache_bytes:
                self._payloads.popitem(last=False)
        return payload

    def load(self, path: str | Path, device: str | torch.device | None = None):
        """The model of one checkpoint file, in eval mode; it is built once per device.

        Args:
            path: The checkpoint file.
            device: Where to put the model; None for the store's device.

        Returns:
            ``(model, RunCheckpoint)``.

        Raises:
            DataError: If the file cannot be loaded or the weights do not fit.
        """
        path = Path(path)
        dev = self.device if device is None else torch.device(device)
        key = (str(path.resolve()), str(dev))
        with self._lock:
            if key in self._models:
                return self._models[key]
        payload = self.read_checkpoint(path)
        entry = (build_model(payload, path).to(dev).eval(), _info(path, payload))
        with self._lock:
            return self._models.setdefault(key, entry)

    def _check_maps(self, model_config: dict, path) -> None:
        check_maps(self.entities, self.relations, model_config, path)

    def _triple_keys(self, ids: np.ndarray) -> np.ndarray:
        """One integer per id triple (for set operations on triples)."""
        n, r = len(self.entities), len(self.relations)
        return (ids[:, 0] * r + ids[:, 1]) * n + ids[:, 2]

    # ------------------------------------------------------------------ labels <-> ids

    def encode(self, triples) -> np.ndarray:
        """Map label triples to ids.

        Args:
            triples: A triples file, a DataFrame (columns head/relation/tail, else its first three) or
                an iterable of ``(head, relation, tail)``.

        Returns:
            ``[M, 3]`` int64 ids.

        Raises:
            DataError: If a file's label is unknown (naming the line).
            TracegraphError: If a given label is unknown or a row is not a triple.
        """
        if isinstance(triples, (str, Path)):
            return encode_triples(read_labeled_triples(triples), self.entities, self.relations)
        h, r, t = label_columns(triples, 3)
        return np.stack(
            [self.entities.ids(h, "entity"), self.relations.ids(r, "relation"), self.entities.ids(t, "entity")], axis=1
        ).reshape(-1, 3)

    def resolve_questions(self, questions, kinds: tuple[str, ...] = TRIPLE) -> Questions:
        """Questions in the user's words turned into the run's labels (:mod:`tracegraph.kg.data.questions`).

        Entities by label or by a name only one has; relations by label, readable name or predicate.

        Args:
            questions: A questions file, a DataFrame or an iterable of tuples.
            kinds: What each field is (``TRIPLE``: head, relation, tail; ``QUERY``: head, relation).

        Returns:
            The resolved questions.

        Raises:
            UnresolvedQuestions: Questions that name no entity or relation of the run, all of them
                with their line (or position) and reason.
            DataError: A file is missing or malformed.
        """
        if isinstance(questions, (str, Path)):
            q = resolve_file(questions, self.labels, self.entities, self.relations, kinds)
        else:
            rows = list(zip(*label_columns(questions, len(kinds))))
            q = resolve(rows, self.labels, self.entities, self.relations, kinds=kinds)
        return q.check()

    def known_tails(self, sources: Iterable, leave_out: np.ndarray | None = None) -> KnownTails:
        """The filter index of the true triples in ``sources``, with reciprocals for reciprocal models.

        A file's triple naming a label the model has no id for filters nothing (a run trained with
        ``--unseen drop`` keeps such files).

        Args:
            sources: Triples files or label triples.
            leave_out: Id triples ``[M, 3]`` that are not known true however often ``sources`` list
                them (the facts a necessity arm removed, for the filter after removal); None: none.

        Returns:
            The index.
        """
        ids = [
            encode_known(read_labeled_triples(s), self.entities, self.relations)
            if isinstance(s, (str, Path))
            else self.encode(s)
            for s in sources
        ]
        ids = np.concatenate(ids) if ids else np.zeros((0, 3), np.int64)
        if leave_out is not None and len(leave_out):
            ids = ids[~np.isin(self._triple_keys(ids), self._triple_keys(np.asarray(leave_out, np.int64)))]
        c = self.model.config
        return KnownTails([with_reciprocals(ids, c.num_relations) if c.reciprocal else ids], c.num_relation_rows)


def run_files(store) -> list[str]:
    """The train, valid and test files recorded in a run's config.json (those that still exist).

    Args:
        store: A run store, or an object with a ``checkpoint`` path.

    Returns:
        The file paths.
    """
    store = store if isinstance(store, RunStore) else RunStore(store.checkpoint)
    return list(store.data_files.values())


def filter_index(store: RunStore, files) -> KnownTails:
    """The filter index (known true triples, with reciprocals) of ``files`` under the store's id maps.

    Args:
        store: The run.
        files: Triples files or label triples.

    Returns:
        The index.
    """
    return store.known_tails(files)


def label_columns(triples, n: int) -> list[list[str]]:
    """Split label triples into ``n`` columns.

    Args:
        triples: A DataFrame (columns head/relation/tail, else its first ``n``) or an iterable of
            tuples.
        n: Labels per row.

    Returns:
        ``n`` lists of labels.

    Raises:
        TracegraphError: If a row does not have ``n`` labels.
    """
    import pandas as pd

    if isinstance(triples, pd.DataFrame):
        named = ["head", "relation", "tail"][:n]
        cols = named if all(c in triples.columns for c in named) else list(triples.columns[:n])
        return [triples[c].astype(str).tolist() for c in cols]
    rows = list(triples)
    label = next((t for t in rows if isinstance(t, str)), None)
    if label is not None:  # tuple("drug") would be four one-letter labels
        raise TracegraphError(
            f"expected (head, relation, tail) triples, got the label {label!r}: "
            "give one triple as a tuple, several as a list of tuples"
        )
    rows = [tuple(t) for t in rows]
    bad = next((t for t in rows if len(t) != n), None)
    if bad is not None:
        raise TracegraphError(f"expected (head, relation, tail) triples, got {bad!r}")
    return [[str(t[j]) for t in rows] for j in range(n)]


def _info(path: Path, payload: dict) -> RunCheckpoint:
    lr = payload.get("lr")
    return RunCheckpoint(path, payload.get("epoch"), float(lr) if lr is not None else None)


def _nbytes(payload: dict) -> int:
    return sum(t.numel() * t.element_size() for t in payload.get("model", {}).values() if torch.is_tensor(t))


__all__ = ["RunStore", "RunCheckpoint", "run_files", "filter_index", "label_columns"]
