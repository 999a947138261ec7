"""One trained run as a Python object: what ``evaluate``, ``predict`` and ``explain`` share.

A :class:`Run` is a run directory (what ``tracegraph train`` or ``tracegraph import`` writes)
opened once: its ``config.json``, its id maps, its checkpoints with their epochs and learning
rates, and its models, loaded lazily and each checkpoint at most once (kept in a small cache).
Labels go in, pandas DataFrames with the CLI's CSV columns come out (``RUN_DIR``: a run trained
on the bundled UMLS for 2 epochs; tests/kg/test_run_api.py runs these examples on one):

>>> import tracegraph
>>> run = tracegraph.open_run(RUN_DIR)
>>> [(c.epoch, c.lr) for c in run.checkpoints]
[(1, 0.003), (2, 0.003)]
>>> top = run.predict("steroid", "interacts_with", k=3)
>>> top.columns.tolist(), top["rank"].tolist()
(['head', 'relation', 'rank', 'tail', 'score', 'probability'], [1, 2, 3])
>>> run.score([("steroid", "interacts_with", "eicosanoid")]).columns.tolist()
['head', 'relation', 'tail', 'score', 'probability']
>>> ev = run.evaluate([("steroid", "interacts_with", "eicosanoid")])
>>> sorted(ev.metrics), ev.ranks["side"].tolist()
(['both', 'head', 'tail'], ['tail', 'head'])
>>> why = run.explain([("steroid", "interacts_with", "eicosanoid")], top_k=2)  # tracin-margin-path, --loss logit
>>> len(why), why.columns[-4:].tolist()
(4, ['TracInScore', 'SelfInfluence', 'MethodScore', 'HeadTailWalk'])
>>> run.explain([("steroid", "interacts_with", "eicosanoid")], top_k=2, explainer="tracin-margin").columns[-1]
'MethodScore'
>>> run.explain([("steroid", "interacts_with", "eicosanoid")], top_k=2, explainer="tracin").columns[-1]
'SelfInfluence'
>>> run.predict("steroids", "interacts_with")
Traceback (most recent call last):
...
tracegraph.kg.data.triples.UnknownLabelError: entity 'steroids' is not in the id map; closest: 'steroid'

:mod:`tracegraph.kg.api` opens, trains and imports runs; the CLI commands are thin calls into
them, and so is :func:`tracegraph.kg.explain.tracin.explain.run_explain`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.model.model_io import (
    build_model, list_epoch_checkpoints, model_dir_of, read_id_maps, resolve_checkpoint, run_label_smoothing,
)
from tracegraph.kg.data.triples import IdMap, KnownTails, encode_triples, read_labeled_triples, with_reciprocals
from tracegraph.runtime.checkpoints import load_checkpoint, read_json
from tracegraph.runtime.precision import resolve_device

PREDICT_COLUMNS = ["head", "relation", "rank", "tail", "score", "probability"]
SCORE_COLUMNS = ["head", "relation", "tail", "score", "probability"]
RANKS_COLUMNS = ["head", "relation", "tail", "side", "rank", "rank_optimistic", "rank_pessimistic", "score",
                 "top_predictions"]
CACHE_BYTES = 2 * 2**30  # checkpoint contents kept per run; beyond this the least recently used is dropped


@dataclass(frozen=True)
class RunCheckpoint:
    """A saved checkpoint: its file, the epoch it ends and the learning rate used in that epoch."""

    path: Path
    epoch: int | None
    lr: float | None


@dataclass
class Evaluation:
    """``run.evaluate(...)``: filtered metrics per side and one row of ``ranks.csv`` per test triple and side."""

    metrics: dict
    ranks: pd.DataFrame
    checkpoint: Path
    unseen: dict | None = None  # what --unseen did with test triples naming entities absent from training

    def __repr__(self) -> str:
        both = self.metrics.get("both", {})
        return (f"Evaluation(MRR {both.get('mrr', float('nan')):.4f}, Hits@1 {both.get('hits@1', float('nan')):.4f}, "
                f"Hits@10 {both.get('hits@10', float('nan')):.4f}, {both.get('count', 0)} ranks)")


class Run:
    """A trained run directory (or one checkpoint file of it), opened once.

    ``device`` is where models are loaded and scored ("cpu", "cuda", "cuda:1" or "auto").
    Cheap to open: nothing is read until it is needed, and no weights until a model is used.
    """

    def __init__(self, path: str | Path, device: str | torch.device = "cpu", cache_bytes: int = CACHE_BYTES):
        self.checkpoint = resolve_checkpoint(path)  # the model scored by predict/score/evaluate
        self.path = model_dir_of(self.checkpoint)
        self.device = resolve_device(device) if isinstance(device, str) else torch.device(device)
        self._payloads: OrderedDict[str, dict] = OrderedDict()  # checkpoint contents, least recently used first
        self._models: dict[tuple[str, str], tuple[torch.nn.Module, RunCheckpoint]] = {}  # those asked for by load()
        self._cache_bytes = cache_bytes
        self._lock = threading.Lock()  # explain --devices reads checkpoints from several threads

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, device={str(self.device)!r})"

    # ------------------------------------------------------------------ what the directory holds

    @property
    def model_dir(self) -> Path:  # the name LoadedModel used; helpers written for it accept a Run
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
        return self._maps[0]

    @property
    def relations(self) -> IdMap:
        return self._maps[1]

    @property
    def label_smoothing(self) -> float:
        return run_label_smoothing(self.path)

    @cached_property
    def data_files(self) -> dict[str, Path]:
        """The run's train/valid/test files, found from any working directory and after a move, each
        checked against its recorded sha256 (kg/data/datafiles.py); a missing or changed one is an error."""
        from tracegraph.kg.data.datafiles import resolve_data_files

        return resolve_data_files(self.path, self.config)

    @cached_property
    def checkpoints(self) -> list[RunCheckpoint]:
        """Every ``checkpoints/epoch_NNNN.pt`` in epoch order (TracIn sums over them), or the single
        model when there are none. Learning rates come from ``training_history.json`` when it has
        them, else from the checkpoint itself (which is then read and cached)."""
        paths = list_epoch_checkpoints(self.path) or [self.checkpoint]
        return [self.checkpoint_info(p) for p in paths]

    def checkpoint_info(self, path: str | Path) -> RunCheckpoint:
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
        """One checkpoint file's contents, read from disk once (kept while they fit the cache).

        Tensors stay on the CPU whatever ``map_location`` asks (it is accepted so this can stand
        in for ``load_checkpoint``, as the TracIn engine's reader): models are moved after building.
        Do not modify the returned dict; it is shared."""
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
        """``(model in eval mode, RunCheckpoint)`` of one checkpoint file; the model is built once per device."""
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
        n_ent, n_rel = model_config.get("num_entities"), model_config.get("num_relations")
        if (n_ent is not None and n_ent != len(self.entities)) or (n_rel is not None and n_rel != len(self.relations)):
            raise DataError(f"id maps ({len(self.entities)} entities, {len(self.relations)} relations) do not match "
                            f"the model ({n_ent}, {n_rel})", Path(path))

    # ------------------------------------------------------------------ labels <-> ids

    def encode(self, triples) -> np.ndarray:
        """Triples as labels -> an [M, 3] id array. Accepts a triples file, a DataFrame (columns
        head/relation/tail, else the first three) or an iterable of (head, relation, tail)."""
        if isinstance(triples, (str, Path)):
            return encode_triples(read_labeled_triples(triples), self.entities, self.relations)
        h, r, t = _columns(triples, 3)
        return np.stack([self.entities.ids(h, "entity"), self.relations.ids(r, "relation"),
                         self.entities.ids(t, "entity")], axis=1).reshape(-1, 3)

    def known_tails(self, sources: Iterable) -> KnownTails:
        """The filter index of the true triples in ``sources`` (files or label triples), with reciprocals.
        A file's triple naming a label the model has no id for filters nothing (a run trained with
        ``--unseen drop`` keeps such files)."""
        from tracegraph.kg.data.unseen import encode_known

        ids = [encode_known(read_labeled_triples(s), self.entities, self.relations) if isinstance(s, (str, Path))
               else self.encode(s) for s in sources]
        ids = np.concatenate(ids) if ids else np.zeros((0, 3), np.int64)
        c = self.model.config
        return KnownTails([with_reciprocals(ids, c.num_relations) if c.reciprocal else ids], c.num_relation_rows)

    # ------------------------------------------------------------------ the API

    @cached_property
    def labels(self):
        """Readable names of entities and relations from the run's recorded label files (kg/data/labels.py)."""
        from tracegraph.kg.data.labels import run_labels

        return run_labels(self.path, self.config, self.entities)

    def predict(self, head: str | Sequence[str] | None = None, relation: str | Sequence[str] | None = None,
                k: int = 10, exclude_train: bool = False, *, tail: str | Sequence[str] | None = None) -> pd.DataFrame:
        """The ``k`` best tails of (head, relation, ?) or, with ``tail=`` instead of a head, the ``k`` best
        heads of (?, relation, tail); lists ask several queries at once. Entities and relations by label or
        by the name the run's label files give them (a KGX run's ``biolink:treats``). ``exclude_train``
        leaves out answers already known in the training file. Columns as ``tracegraph predict`` writes
        them: head, relation, rank, tail, score, probability (and head_name, relation_name, tail_name
        when the run has names)."""
        from tracegraph.kg.predictions import predict_frame

        return predict_frame(self, head=head, relation=relation, tail=tail, k=k, exclude_train=exclude_train)

    @torch.no_grad()
    def score(self, triples) -> pd.DataFrame:
        """The model's score (logit) and probability of each triple (labels, a DataFrame or a file)."""
        ids = self.encode(triples)
        t = torch.as_tensor(ids, device=self.device)
        scores = self.model.score_triples(t[:, 0], t[:, 1], t[:, 2]).float().cpu().numpy()
        ent, rel = self.entities.labels, self.relations.labels
        # the probability in float32, as the score is: the CSV keeps the digits it always had
        rows = [(ent[h], rel[r], ent[tl], float(s), _sigmoid(s)) for (h, r, tl), s in zip(ids, scores)]
        return pd.DataFrame(rows, columns=SCORE_COLUMNS)

    def evaluate(self, test, filter_triples=None, top_k: int = 10, batch_size: int = 256,
                 entity_chunk: int = 65536, unseen: str = "include") -> Evaluation:
        """Filtered ranks of ``test`` (a file or label triples) against every entity.

        ``filter_triples``: the known true triples (files or label triples) removed from each ranking;
        default the run's train/valid/test files; ``test`` itself is always added. Returns the
        metrics and a DataFrame with ``ranks.csv``'s columns (``top_predictions``: a JSON list of
        [entity, score] pairs, unambiguous for ids holding ':' or ';'). ``unseen`` (a test file's
        entities absent from the training file): include | drop | error, see kg/data/unseen.py."""
        import json

        from tracegraph.kg.model.evaluate import evaluate
        from tracegraph.kg.data.unseen import evaluation_triples

        report = None
        if isinstance(test, (str, Path)):
            # with filter files given, a recorded training file that is gone leaves the unseen check to the id map
            train_file = self.data_files.get("train") if not filter_triples else _optional_train(self)
            test_ids, report = evaluation_triples(self, test, unseen, [train_file] if train_file else [])
        else:
            test_ids = self.encode(test)
        sources = list(filter_triples) if filter_triples else list(self.data_files.values())
        if not sources:  # an imported model, say: say so rather than report a test-only filtered MRR silently
            from tracegraph.runtime.progress import log

            log.warning(f"{self.path}: the run records no data files, so only the test triples are filtered "
                        f"(give the known true triples with --filter)")
        known = self.known_tails([*sources, test])
        metrics, sides = evaluate(self.model, test_ids, known, batch_size=batch_size, entity_chunk=entity_chunk,
                                  top_k=top_k, device=self.device)
        ent, rel = self.entities.labels, self.relations.labels
        rows = []
        for rk in sides:
            for i, (h, r, t) in enumerate(test_ids):
                top = json.dumps([[ent[e], round(float(s), 4)] for e, s in zip(rk.topk_ids[i], rk.topk_scores[i])],
                                 ensure_ascii=False) if top_k else ""
                rows.append((ent[h], rel[r], ent[t], rk.side, rk.realistic[i], rk.optimistic[i], rk.pessimistic[i],
                             float(rk.score[i]), top))
        return Evaluation(metrics, pd.DataFrame(rows, columns=RANKS_COLUMNS), self.checkpoint, report)

    def explain(self, test_triples, train=None, top_k: int | None = None, output_dir=None, **options) -> pd.DataFrame:
        """Exact TracIn: every training triple's influence on each test triple, summed over the checkpoints.

        ``test_triples``: a file or label triples; ``train``: the training triples to rank (default
        the run's training file). ``options``: those of :class:`~tracegraph.kg.explain.tracin.explain.ExplainConfig`
        (``explainer``: the CLI's ``--method``, default ``tracin-margin-path``, or ``tracin`` with
        ``loss="train-loss"``, the earlier codebase's convention; ``method``: the engine; ``loss``,
        ``layers``, ``side`` (``"head"``: the margin methods explain the head prediction), ``checkpoints``,
        ``batch_size``, ``node_name_dict``, …) and
        ``n_hops`` plus :class:`~tracegraph.kg.explain.neighborhood.FilterOptions` fields to rank only each
        test triple's filtered subgraph. Returns one DataFrame with the ``_tracin.csv`` columns, the
        test triples one after the other; ``output_dir`` also keeps the files ``explain`` writes."""
        import dataclasses
        import tempfile

        from tracegraph.kg.explain.neighborhood import FilterOptions
        from tracegraph.kg.explain.tracin.explain import CSV_HEADER, EXTRA_COLUMNS, ExplainConfig, run_explain

        filter_fields = {f.name for f in dataclasses.fields(FilterOptions)}
        n_hops = options.pop("n_hops", None)
        filter_opts = {k: options.pop(k) for k in list(options) if k in filter_fields}
        train = train if train is not None else self.data_files.get("train")
        if train is None:
            raise TracegraphError(f"{self.path}: the run records no training file that still exists; pass train=")
        rows: list = []
        with tempfile.TemporaryDirectory(prefix="tracegraph_explain_") as tmp:
            if not isinstance(test_triples, (str, Path)):  # labels: checked here, so a typo is an error, not a skip
                ids = self.encode(test_triples)
                test_triples = Path(tmp) / "test_triples.txt"
                ent, rel = self.entities.labels, self.relations.labels
                test_triples.write_text("".join(f"{ent[h]}\t{rel[r]}\t{ent[t]}\n" for h, r, t in ids))
            cfg = ExplainConfig(model_dir=str(self.checkpoint), train=str(train), test_triples=str(test_triples),
                                output_dir=str(output_dir or Path(tmp) / "out"), top_k=top_k,
                                device=str(self.device), **options)
            subsets = (self.training_subsets(train, FilterOptions(n_hops=n_hops, **filter_opts))
                       if n_hops is not None else None)
            summary = run_explain(cfg, subsets, run=self, collect=rows)
        extra = EXTRA_COLUMNS[:len(rows[0]) - len(CSV_HEADER)] if rows else []  # methods other than tracin
        frame = pd.DataFrame(rows, columns=[*CSV_HEADER, *extra])
        frame.attrs["summary"] = summary  # failures (unknown labels in a file, empty subgraphs), timings
        return frame

    def training_subsets(self, train, filter_options):
        """``(head_id, tail_id) -> rows`` of ``train`` kept by the filter, on one cached graph index."""
        from tracegraph.kg.explain.neighborhood import GraphIndex

        index = GraphIndex.load_or_build(train, self.encode(train), len(self.entities))
        return lambda h, t: index.filter(h, t, filter_options).triple_rows


def run_files(run) -> list[str]:
    """The train/valid/test files recorded in a run's config.json (those that still exist)."""
    return list(run.data_files.values()) if isinstance(run, Run) else list(Run(run.checkpoint).data_files.values())


def _optional_train(run: Run):
    try:
        return run.data_files.get("train")
    except DataError:
        return None


def _info(path: Path, payload: dict) -> RunCheckpoint:
    lr = payload.get("lr")
    return RunCheckpoint(path, payload.get("epoch"), float(lr) if lr is not None else None)


def _nbytes(payload: dict) -> int:
    return sum(t.numel() * t.element_size() for t in payload.get("model", {}).values() if torch.is_tensor(t))


def _sigmoid(x: float) -> float:
    return float(1 / (1 + np.exp(-x)))


def _columns(triples, n: int) -> list[list[str]]:
    """Label triples (a DataFrame or an iterable of tuples) -> ``n`` lists of labels."""
    if isinstance(triples, pd.DataFrame):
        named = ["head", "relation", "tail"][:n]
        cols = named if all(c in triples.columns for c in named) else list(triples.columns[:n])
        return [triples[c].astype(str).tolist() for c in cols]
    rows = [tuple(t) for t in triples]
    bad = next((t for t in rows if len(t) != n), None)
    if bad is not None:
        raise TracegraphError(f"expected (head, relation, tail) triples, got {bad!r}")
    return [[str(t[j]) for t in rows] for j in range(n)]


__all__ = ["Run", "RunCheckpoint", "Evaluation", "run_files", "PREDICT_COLUMNS", "SCORE_COLUMNS",
           "RANKS_COLUMNS"]
