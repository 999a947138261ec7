"""``tracegraph predict`` and ``Run.predict``: the best tails of (h, r, ?) or heads of (?, r, t), with names.

Entities and relations are given by label or by the readable name the run's label files give them
(a KGX run's ``biolink:treats`` for ``predicate:4``); the output adds name columns when the run has
names. Output files are CSV, TSV or JSON, chosen by the extension; any other extension is refused
before anything is computed.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Sequence

import pandas as pd

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.questions import QUERY
from tracegraph.kg.data.triples import KnownTails, read_labeled_triples
from tracegraph.kg.model.queries import top_answers
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_json

PREDICT_COLUMNS = ["head", "relation", "rank", "tail", "score", "probability"]
NAME_COLUMNS = ["head_name", "relation_name", "tail_name"]
OUTPUT_SUFFIXES = (".csv", ".tsv", ".json")


def check_output(path: str | Path | None) -> None:
    """Refuse an ``-o`` whose extension predict cannot write (before any work).

    Args:
        path: The output path, or None for stdout.

    Raises:
        TracegraphError: If the extension is not .csv, .tsv or .json.
    """
    if path is not None and Path(path).suffix.lower() not in OUTPUT_SUFFIXES:
        suffix = Path(path).suffix or "no extension"
        raise TracegraphError(f"-o {path}: predict writes .csv, .tsv or .json files, not {suffix}")


def predict_frame(run, head=None, relation=None, tail=None, k: int = 10, exclude_train: bool = False) -> pd.DataFrame:
    """The ``k`` best answers of each query as a DataFrame (see :meth:`tracegraph.kg.run.Run.predict`).

    Args:
        run: an opened :class:`~tracegraph.kg.run.Run`.
        head: a head (or list): rank the tails of (head, relation, ?).
        relation: a relation (or list), by label or readable name.
        tail: a tail (or list): rank the heads of (?, relation, tail). Give head or tail, not both.
        k: answers per query.
        exclude_train: leave out answers already known in the run's training file (a query then
            has fewer than ``k`` rows when fewer answers remain).

    Returns:
        Columns head, relation, rank, tail, score, probability (plus head_name, relation_name,
        tail_name when the run has names); the ranked side varies with rank.

    Raises:
        TracegraphError: neither or both of head and tail, or no relation.
        UnresolvedQuestions: queries that name no entity or relation of the run (all listed).
    """
    if relation is None or (head is None) == (tail is None):
        raise TracegraphError(
            "give a relation and either a head (its tails are ranked) or a tail (its heads are ranked)"
        )
    side = "tail" if head is not None else "head"
    asked = list(zip(*_broadcast(head if side == "tail" else tail, relation)))
    resolved = run.resolve_questions(asked, QUERY).labels  # every query resolved, all bad ones listed at once
    given, rels = [e for e, _ in resolved], [r for _, r in resolved]
    labels = run.labels
    a, r = run.entities.ids(given, "entity"), run.relations.ids(rels, "relation")
    known = _known_answers(run, side) if exclude_train else None
    ids, scores = top_answers(run.model, a, r, side, k, known, run.device)
    from scipy.special import expit  # the logistic function without overflow

    ent = run.entities.labels
    rows = []
    for j in range(len(given)):
        for rank, (e, v) in enumerate(zip(ids[j].tolist(), scores[j].tolist()), start=1):
            if v == float("-inf"):  # a left-out training answer: fewer than k answers remain
                break
            h, t = (given[j], ent[e]) if side == "tail" else (ent[e], given[j])
            rows.append((h, rels[j], rank, t, v, float(expit(v))))
    frame = pd.DataFrame(rows, columns=PREDICT_COLUMNS)
    if labels.entity_names or labels.relation_names:
        names = labels.entity_names
        frame["head_name"] = [names.get(x, x) for x in frame["head"]]
        frame["relation_name"] = [labels.relation_names.get(x, x) for x in frame["relation"]]
        frame["tail_name"] = [names.get(x, x) for x in frame["tail"]]
    return frame


def _known_answers(run, side: str) -> KnownTails:
    """The training triples' answers on ``side``, keyed as :func:`top_answers` looks them up."""
    from tracegraph.kg.data.unseen import encode_known

    train = run.data_files.get("train")
    if train is None:
        raise TracegraphError(f"{run.path}: the run records no training file, so none of its triples can be excluded")
    c = run.model.config
    if side == "tail" or c.reciprocal:
        return run.known_tails([train])
    ids = encode_known(read_labeled_triples(train), run.entities, run.relations)
    return KnownTails([ids[:, [2, 1, 0]]], c.num_relations)


def _broadcast(entities, relations) -> tuple[list[str], list[str]]:
    ents = [entities] if isinstance(entities, str) else list(entities)
    rels = [relations] if isinstance(relations, str) else list(relations)
    if len(ents) == 1 and len(rels) > 1:
        ents = ents * len(rels)
    if len(rels) == 1 and len(ents) > 1:
        rels = rels * len(ents)
    if len(ents) != len(rels):
        raise TracegraphError(f"{len(ents)} entities and {len(rels)} relations: give one of each per query")
    return ents, rels


def predict_command(
    run,
    head: str | None,
    tail: str | None,
    relation: str | None,
    query: Sequence[str] | None,
    query_file,
    triples,
    top_k: int,
    exclude_train: bool,
    output,
) -> None:
    """Run ``tracegraph predict`` on an open run: one kind of query, then write or print.

    Args:
        run: The open run.
        head: With ``relation``: rank the tails of this head.
        tail: With ``relation``: rank the heads of this tail.
        relation: The relation of a single query.
        query: ``[head, relation]`` of one query.
        query_file: A ``head<TAB>relation`` file of queries.
        triples: Triples to score instead of ranking.
        top_k: Answers per query.
        exclude_train: Leave out answers that are training triples.
        output: A .csv, .tsv or .json file; None prints CSV to stdout.

    Raises:
        TracegraphError: If not exactly one kind of query is given.
        DataError: If a query file is malformed, or queries name no entity or relation of the run
            (every such line named).
    """
    single = head is not None or tail is not None or relation is not None
    if sum(x for x in (single, query is not None, query_file is not None, triples is not None)) != 1:
        raise TracegraphError(
            "give exactly one of --head H --relation R, --tail T --relation R, --query HEAD RELATION, "
            "--query-file, --triples"
        )
    if single and (relation is None or (head is None) == (tail is None)):
        raise TracegraphError(
            "give --relation with --head (its tails are ranked) or with --tail (its heads are ranked)"
        )
    if triples is not None:
        frame = run.score(triples)
    elif query_file is not None:
        queries = run.resolve_questions(query_file, QUERY).labels  # all bad lines named at once
        heads, rels = [h for h, _ in queries], [r for _, r in queries]
        frame = predict_frame(run, head=heads, relation=rels, k=top_k, exclude_train=exclude_train)
    elif query is not None:
        frame = predict_frame(run, head=query[0], relation=query[1], k=top_k, exclude_train=exclude_train)
    else:
        frame = predict_frame(run, head=head, relation=relation, tail=tail, k=top_k, exclude_train=exclude_train)
    write_predictions(frame, output)


def write_predictions(frame: pd.DataFrame, output) -> None:
    """Write predictions as CSV to stdout, or to a .csv, .tsv or .json file (atomically).

    Args:
        frame: The predictions.
        output: The file, or None for stdout.

    Raises:
        TracegraphError: If the extension is not .csv, .tsv or .json.
    """
    check_output(output)
    rows = frame.to_dict("records")
    if output is not None and Path(output).suffix.lower() == ".json":
        atomic_write_json(output, rows)
        return
    buf = io.StringIO()
    if rows:
        dialect = "excel-tab" if output is not None and Path(output).suffix.lower() == ".tsv" else "excel"
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), dialect=dialect)
        w.writeheader()
        w.writerows(rows)
    if output is None:
        print(buf.getvalue(), end="")
    else:
        with atomic_path(output) as tmp:
            tmp.write_text(buf.getvalue())


__all__ = ["predict_frame", "predict_command", "write_predictions", "check_output", "PREDICT_COLUMNS", "NAME_COLUMNS"]
