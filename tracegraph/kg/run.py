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
>>> why.columns[-5:].tolist(), set(why["Role"]) <= {"proponent", "opponent"}
(['TracInScore', 'SelfInfluence', 'MethodScore', 'HeadTailWalk', 'Role'], True)
>>> run.explain([("steroid", "interacts_with", "eicosanoid")], top_k=2, method="tracin-margin").columns[-2]
'MethodScore'
>>> run.explain([("steroid", "interacts_with", "eicosanoid")], top_k=2, method="tracin").columns[-2]
'SelfInfluence'
>>> run.predict("steroids", "interacts_with")
Traceback (most recent call last):
...
tracegraph.kg.data.questions.UnresolvedQuestions: entity 'steroids' is not in the id map; closest: 'steroid'

:mod:`tracegraph.kg.api` opens, trains and imports runs; the CLI commands are thin calls into
them, and so is :func:`tracegraph.kg.explain.tracin.explain.run_explain`.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.tracin.engine import DEFAULT_LOSS
from tracegraph.kg.explain.tracin.explain import ExplainConfig, explain_questions, run_explain
from tracegraph.kg.model.run_evaluation import RANKS_COLUMNS, Evaluation, evaluate_store
from tracegraph.kg.model.store import RunCheckpoint, RunStore, label_columns, run_files
from tracegraph.kg.outputs import prepare_output_dir, write_explanations
from tracegraph.kg.predictions import PREDICT_COLUMNS
from tracegraph.runtime.progress import quiet as silenced, setup_logging

SCORE_COLUMNS = ["head", "relation", "tail", "score", "probability"]


class Run(RunStore):
    """A trained run directory (or one checkpoint file of it), opened once, and what you ask of it.

    ``device`` is where models are loaded and scored ("cpu", "cuda", "cuda:1" or "auto").
    Cheap to open: nothing is read until it is needed, and no weights until a model is used. What
    the directory holds (config, id maps, checkpoints, models) is :class:`~tracegraph.kg.model.store.RunStore`'s.
    """

    # ------------------------------------------------------------------ the API

    @cached_property
    def labels(self):
        """Readable names of entities and relations from the run's recorded label files (kg/data/labels.py)."""
        from tracegraph.kg.data.labels import run_labels

        return run_labels(self.path, self.config, self.entities)

    def predict(
        self,
        head: str | Sequence[str] | None = None,
        relation: str | Sequence[str] | None = None,
        k: int = 10,
        exclude_train: bool = False,
        *,
        tail: str | Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """The ``k`` best tails of (head, relation, ?), or heads of (?, relation, tail).

        Give ``tail=`` instead of a head for heads; lists ask several queries at once.

        Args:
            head: a head label (or a list: one query each); leave out to ask for heads with ``tail``.
            relation: a relation by label or by the name the run's label files give it (a KGX run's
                ``biolink:treats``).
            k: answers per query.
            exclude_train: leave out answers already known in the training file (fewer than ``k`` rows when fewer remain).
            tail: a tail label (or list): the query is (?, relation, tail).

        Returns:
            A DataFrame with the columns ``tracegraph predict`` writes: head, relation, rank, tail, score,
            probability (and head_name, relation_name, tail_name when the run has names).
        """
        from tracegraph.kg.predictions import predict_frame

        return predict_frame(self, head=head, relation=relation, tail=tail, k=k, exclude_train=exclude_train)

    @torch.no_grad()
    def score(self, triples) -> pd.DataFrame:
        """The model's score (logit) and probability of each triple.

        Args:
            triples: A triples file, a DataFrame or an iterable of ``(head, relation, tail)``;
                entities by label or name, relations by label, readable name or predicate.

        Returns:
            One row per triple: its labels, score and probability.

        Raises:
            UnresolvedQuestions: Triples that name no entity or relation of the run (all listed).
            DataError: If a file is malformed.
        """
        ids = self.encode(self.resolve_questions(triples).labels)
        t = torch.as_tensor(ids, device=self.device)
        scores = self.model.score_triples(t[:, 0], t[:, 1], t[:, 2]).float().cpu().numpy()
        ent, rel = self.entities.labels, self.relations.labels
        # the probability in float32, as the score is: the CSV keeps the digits it always had
        rows = [(ent[h], rel[r], ent[tl], float(s), _sigmoid(s)) for (h, r, tl), s in zip(ids, scores)]
        return pd.DataFrame(rows, columns=SCORE_COLUMNS)

    def evaluate(
        self,
        test,
        filter_triples=None,
        top_k: int = 10,
        batch_size: int = 256,
        entity_chunk: int = 65536,
        unseen: str = "include",
    ) -> Evaluation:
        """Filtered ranks of ``test`` against every entity.

        Args:
            test: A triples file or label triples.
            filter_triples: More known true triples (files or label triples) removed from each
                ranking, added to the run's train, valid and test files; ``test`` itself is always
                filtered too.
            top_k: Best-scored entities listed per test triple and side.
            batch_size: Queries per batch.
            entity_chunk: Entities scored at a time.
            unseen: What to do with a test file's entities absent from the training file:
                ``"include"``, ``"drop"`` or ``"error"``.

        Returns:
            The metrics and a DataFrame with ``ranks.csv``'s columns (``top_predictions``: a JSON list of
            ``[entity, score]`` pairs, unambiguous for ids holding ``:`` or ``;``).

        Raises:
            DataError: If a file is malformed or a label is unknown.
            TracegraphError: If an unseen entity is refused by the policy.
        """
        return evaluate_store(
            self, test, filter_triples, top_k=top_k, batch_size=batch_size, entity_chunk=entity_chunk, unseen=unseen
        )

    def explain(
        self,
        test_triples,
        train=None,
        *,
        method: str | None = None,
        engine: str = "exact",
        loss: str = DEFAULT_LOSS,
        layers: str = "all",
        side: str = "tail",
        checkpoints: list[str] | None = None,
        top_k: int | None = None,
        batch_size: int = 0,
        precision: str = "fp32",
        label_smoothing: float | None = None,
        node_name_dict=None,
        edge_map=None,
        n_hops: int | None = None,
        min_degree: int = 2,
        preserve_test_edges: bool = True,
        strict_hop: bool = False,
        path_filtering: bool = False,
        max_path_length: int = 3,
        strict_path: bool = False,
        edges_only: bool = False,
        output_dir=None,
        overwrite: bool = False,
        skip_unresolved: bool = False,
        quiet: bool = False,
    ) -> pd.DataFrame:
        """Rank training triples by their influence on each test triple (``tracegraph explain``).

        Args:
            test_triples: a triples file, or (head, relation, tail) triples; entities by label or name,
                relations by label, readable name or predicate (``biolink:treats``). Questions that
                name no entity or relation of the run are all listed in one error.
            train: the training triples to rank, and the training file of the rank filter; default the
                run's recorded training file. A file that differs from the recorded one (edited since
                training) is used as given, with a warning.
            method: the explanation method (the CLI's ``--method``): a name of
                ``tracegraph.kg.explain.methods.METHODS`` (docs/explaining.md, "How to choose"); default
                tracin-margin-path, or with ``loss="train-loss"`` plain tracin.
            engine: how TracIn is computed (``--engine``): exact, autograd or vmap.
            loss: TracIn's loss convention: logit (default), score or train-loss.
            layers: all, last:N, or comma-separated parameter names.
            side: the prediction the margin methods explain: tail (of (h, r, ?)) or head (reciprocal models).
            checkpoints: default the epoch checkpoints up to the model's epoch (a run opened on one
                checkpoint file: that one); or ["all"], ["best"], ["final"], paths.
            top_k: keep at most k proponents and k opponents per test triple (default every row).
            batch_size: training triples per step (0: automatic).
            precision: fp32 (exact) or bf16.
            label_smoothing: for loss="train-loss"; default the run's.
            node_name_dict: name<TAB>index file for the _label columns (default the run's recorded one).
            edge_map: edge_map.json for relation labels (default the run's recorded one).
            n_hops: rank only each test triple's n-hop subgraph (None: every training triple); the
                filter's options follow (docs/filtering.md).
            min_degree: keep a triple only if an endpoint has at least this many neighbours.
            preserve_test_edges: always keep triples touching the test head or tail.
            strict_hop: measure hop distances with the direct head–tail edges removed.
            path_filtering: keep only triples on a short simple head–tail path.
            max_path_length: the path length bound of the path filters.
            strict_path: path filtering over the whole n-hop subgraph, ignoring ``min_degree``.
            edges_only: keep one triple per node pair.
            output_dir: also write the files ``explain`` writes there (refused when it holds files,
                unless ``overwrite``).
            overwrite: replace the explanation files already in ``output_dir``.
            skip_unresolved: explain the questions that resolve and set the others aside:
                ``.attrs["summary"]["unresolved"]`` and, with ``output_dir``, ``unresolved.tsv``.
            quiet: no progress bar and no log lines (warnings still show); by default the log says
                which checkpoints are summed.

        Returns:
            One DataFrame with the ``_tracin.csv`` columns (``Role`` last), the test triples one after
            the other; ``.attrs["summary"]`` is summary.json (unresolved questions, failures, ranks,
            timings) and
            ``.attrs["explanations"]`` each test triple's companion JSON (method, rank, score, rival, …) without its rows.

        Raises:
            TracegraphError: a bad value (named by its parameter).
            UnresolvedQuestions: questions that name no entity or relation of the run, every one
                with its line (or position) and reason, unless ``skip_unresolved``.
        """
        from tracegraph.kg.explain.neighborhood import FilterOptions

        # a training file given is this explanation's training file, in the filter too (a warning
        # says when it is not the recorded one); else the recorded one, which must be unchanged
        filter_files = None if train is None else [str(f) for f in self.data_files_with(train=train).values()]
        train = train if train is not None else self.data_files.get("train")
        if train is None:
            raise TracegraphError(f"{self.path}: the run records no training file that still exists; pass train=")
        if not isinstance(test_triples, (str, Path)):  # a list, a DataFrame, any iterable: read once
            test_triples = list(zip(*label_columns(test_triples, 3)))
        cfg = ExplainConfig(
            model_dir=str(self.opened_with),
            train=str(train),
            test_triples=test_triples,
            output_dir=None if output_dir is None else str(output_dir),
            checkpoints=checkpoints,
            engine=engine,
            method=method,
            loss=loss,
            layers=layers,
            top_k=top_k,
            batch_size=batch_size,
            precision=precision,
            device=str(self.device),
            label_smoothing=label_smoothing,
            node_name_dict=_s(node_name_dict),
            edge_map=_s(edge_map),
            side=side,
            skip_unresolved=skip_unresolved,
            filter_files=filter_files,
        )
        questions = explain_questions(cfg, self)  # every question resolved before any work or file
        subsets = None
        if n_hops is not None:
            subsets = self.training_subsets(
                train,
                FilterOptions(
                    n_hops=n_hops,
                    min_degree=min_degree,
                    preserve_test_edges=preserve_test_edges,
                    strict_hop=strict_hop,
                    path_filtering=path_filtering,
                    max_path_length=max_path_length,
                    strict_path=strict_path,
                    edges_only=edges_only,
                ),
            )
        if output_dir is not None:
            prepare_output_dir(output_dir, cfg, overwrite)
        if quiet:
            with silenced():
                result = run_explain(cfg, subsets, run=self, questions=questions)
        else:
            setup_logging()
            result = run_explain(cfg, subsets, run=self, questions=questions)
        if output_dir is not None:
            write_explanations(result, output_dir)
        frame = result.frame()
        frame.attrs["summary"] = result.summary  # failures (unknown labels in a file, empty subgraphs), timings
        # plain dicts (each companion JSON without its rows): pandas compares attrs when frames are concatenated
        frame.attrs["explanations"] = [ex.meta for ex in result.explanations]
        return frame

    def training_subsets(self, train, filter_options):
        """A function giving the rows of ``train`` that the neighbourhood filter keeps for a head and tail.

        The graph index is built once (and cached).

        Args:
            train: The training triples file.
            filter_options: The filter settings.

        Returns:
            ``subsets(head_id, tail_id)``, returning sorted row indices.
        """
        from tracegraph.kg.explain.neighborhood import GraphIndex

        index = GraphIndex.load_or_build(train, self.encode(train), len(self.entities))
        return lambda h, t: index.filter(h, t, filter_options).triple_rows

    def report(self, output, explanations=(), necessity=None, test=None, **options) -> Path:
        """Write this run's self-contained HTML report (what ``tracegraph report`` writes).

        Args:
            output: The HTML file.
            explanations: ``tracegraph explain -o`` directories to include.
            necessity: ``necessity.json`` or its directory, or None.
            test: Triples to rank for the metrics; None uses ``evaluation/ranks.csv``, else the run's
                test file.
            **options: ``n_pro`` and ``n_opp``, the rows in each proponent and opponent table.

        Returns:
            The path written.
        """
        from tracegraph.report import report_run  # on first use: the report loads matplotlib

        return report_run(self, output, explanations=explanations, necessity=necessity, test=test, **options)


def _s(p):
    return None if p is None else str(p)


def _sigmoid(x: float) -> float:
    from scipy.special import expit  # the logistic function without overflow; in x's precision

    return float(expit(x))


__all__ = ["Run", "RunCheckpoint", "Evaluation", "run_files", "PREDICT_COLUMNS", "SCORE_COLUMNS", "RANKS_COLUMNS"]
