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

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.run_evaluation import RANKS_COLUMNS, Evaluation, evaluate_store
from tracegraph.kg.model.store import RunCheckpoint, RunStore, run_files

PREDICT_COLUMNS = ["head", "relation", "rank", "tail", "score", "probability"]
SCORE_COLUMNS = ["head", "relation", "tail", "score", "probability"]


class Run(RunStore):
    """A trained run directory (or one checkpoint file of it), opened once, and what you ask of it.

    ``device`` is where models are loaded and scored ("cpu", "cuda", "cuda:1" or "auto").
    Cheap to open: nothing is read until it is needed, and no weights until a model is used. What
    the directory holds (config, id maps, checkpoints, models) is :class:`~tracegraph.kg.model.store.RunStore`'s.
    """

    # ------------------------------------------------------------------ the API

    @torch.no_grad()
    def predict(self, head: str | Sequence[str], relation: str | Sequence[str], k: int = 10,
                exclude_train: bool = False) -> pd.DataFrame:
        """The ``k`` best tails of each query (head, relation); a list of heads and/or relations asks
        several queries at once. ``exclude_train`` leaves out tails already known in the training file.
        Columns as ``tracegraph predict`` writes them: head, relation, rank, tail, score, probability."""
        heads, rels = _queries(head, relation)
        h = self.entities.ids(heads, "entity")
        r = self.relations.ids(rels, "relation")
        train = self.data_files.get("train")
        known = self.known_tails([train] if train else []) if exclude_train else None
        model, dev = self.model, self.device
        k = min(k, model.config.num_entities)
        rows = []
        for b0 in range(0, len(h), 256):
            hb = torch.as_tensor(h[b0:b0 + 256], device=dev)
            rb = torch.as_tensor(r[b0:b0 + 256], device=dev)
            s = model.score_all(hb, rb).float()
            if known is not None:
                bi, ti = known.batch(h[b0:b0 + 256], r[b0:b0 + 256])
                s[torch.as_tensor(bi), torch.as_tensor(ti)] = float("-inf")
            vals, idx = s.topk(k, dim=1)
            for j in range(len(hb)):
                for rank, (e, v) in enumerate(zip(idx[j].tolist(), vals[j].tolist()), start=1):
                    rows.append((heads[b0 + j], rels[b0 + j], rank, self.entities.labels[e], v, _sigmoid(v)))
        return pd.DataFrame(rows, columns=PREDICT_COLUMNS)

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
        return evaluate_store(self, test, filter_triples, top_k=top_k, batch_size=batch_size,
                              entity_chunk=entity_chunk, unseen=unseen)

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


def _sigmoid(x: float) -> float:
    return float(1 / (1 + np.exp(-x)))


def _queries(head, relation) -> tuple[list[str], list[str]]:
    heads = [head] if isinstance(head, str) else list(head)
    rels = [relation] if isinstance(relation, str) else list(relation)
    if len(heads) == 1 and len(rels) > 1:
        heads = heads * len(rels)
    if len(rels) == 1 and len(heads) > 1:
        rels = rels * len(heads)
    if len(heads) != len(rels):
        raise TracegraphError(f"{len(heads)} heads and {len(rels)} relations: give one of each per query")
    return heads, rels


__all__ = ["Run", "RunCheckpoint", "Evaluation", "run_files", "PREDICT_COLUMNS", "SCORE_COLUMNS",
           "RANKS_COLUMNS"]
