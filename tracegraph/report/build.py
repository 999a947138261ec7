"""A run's report from its directory.

Gather what it holds (settings, history, test ranks, explanations, a necessity test) into
sections and write the page.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.data.triples import read_labeled_triples
from tracegraph.report.explained import explained_section
from tracegraph.report.explanations import ExplainedTriple, read_explanations
from tracegraph.report.html import Section, cards, e, num, write_page
from tracegraph.report.hubs import HubGraph, hub_graph
from tracegraph.report.necessity import necessity_card, necessity_section, read_necessity
from tracegraph.report.sections import metrics_section, settings_section, side_metrics, training_section
from tracegraph.report.unresolved import read_unresolved, unresolved_section
from tracegraph.runtime.checkpoints import read_json

RANKS_NEEDED = {"head", "relation", "tail", "side", "rank"}
# ranking a missing explained triple reads the run's data files for the filter, and the hub check
# its training file: up to this size
MAX_FILTER_BYTES = 500 * 2**20


def test_ranks(run, test=None) -> tuple[pd.DataFrame | None, str]:
    """The run's filtered test ranks, and where they came from (as HTML).

    The ranks are ``test`` ranked now when given, else the run's ``evaluation/ranks.csv``
    (``tracegraph evaluate``), else its recorded test file ranked now.

    Args:
        run: The open run.
        test: A triples file to rank now, or None.

    Returns:
        The ranks (None when there is nothing to rank) and an HTML note on their source.

    Raises:
        DataError: If the saved ranks.csv lacks a column, or a file is malformed.
    """
    if test is not None:
        return run.evaluate(test).ranks, f"computed now on <code>{e(test)}</code>"
    saved = run.path / "evaluation" / "ranks.csv"
    if saved.is_file():
        ranks = pd.read_csv(
            saved, dtype={"head": str, "relation": str, "tail": str, "side": str}, keep_default_na=False
        )
        missing = RANKS_NEEDED - set(ranks.columns)
        if missing:
            raise DataError(f"not a ranks.csv of `tracegraph evaluate`: no column {', '.join(sorted(missing))}", saved)
        return ranks, f"read from <code>{e(saved)}</code> (written by <code>tracegraph evaluate</code>)"
    recorded = _recorded_files(run).get("test")
    if recorded:
        return run.evaluate(recorded).ranks, f"computed now on the run's test file <code>{e(recorded)}</code>"
    return None, "The run records no test file that still exists and none was given: pass <code>--test FILE</code>."


def _recorded_files(run) -> dict:
    # a recorded data file gone or changed: the report shows what the run recorded, ranking nothing anew
    try:
        return run.data_files
    except DataError:
        return {}


def fill_ranks(run, triples: list[ExplainedTriple], ranks: pd.DataFrame | None) -> None:
    """Give every explained triple without a recorded rank or score one, in place.

    The rank comes from the test ranks when they hold it, else the triple is ranked now with the run
    when its data files exist and are small enough to read for the filter (``MAX_FILTER_BYTES``).
    A triple the run cannot rank (a label it does not know) keeps "—".

    Args:
        run: The open run.
        triples: The explained triples; their ``rank``, ``score`` and sources are filled in.
        ranks: The test ranks, or None.
    """
    index = {}
    if ranks is not None:
        for row in ranks.itertuples(index=False):
            index[(str(row.head), str(row.relation), str(row.tail), str(row.side))] = row
    todo = []
    for t in triples:
        hit = index.get((*t.triple, t.side))
        if t.rank is None and hit is not None:
            t.rank, t.rank_source = float(hit.rank), "ranks.csv"
            if t.score is None and "score" in ranks.columns:
                t.score = float(hit.score)
        if t.rank is None or t.score is None:
            todo.append(t)
    if not todo:
        return
    files = _recorded_files(run)
    if not files.get("train") or sum(Path(f).stat().st_size for f in files.values()) > MAX_FILTER_BYTES:
        return
    try:
        ev = run.evaluate([t.triple for t in todo], top_k=0)
    except (TracegraphError, KeyError):  # labels from another run: leave "—"
        return
    got = {(r.head, r.relation, r.tail, r.side): r for r in ev.ranks.itertuples(index=False)}
    for t in todo:
        r = got.get((*t.triple, t.side))
        if r is not None and t.rank is None:
            t.rank, t.rank_source = float(r.rank), "computed"
        if r is not None and t.score is None:
            t.score = float(r.score)


def training_graph(run, triples: list[ExplainedTriple]) -> HubGraph | None:
    """The run's training graph as the hub check needs it (report/hubs.py), or None.

    None when there is no explained triple, or the run's training file is gone, changed, or larger
    than ``MAX_FILTER_BYTES``.

    Args:
        run: The open run.
        triples: The explained triples (their heads' and tails' neighbours are kept).

    Returns:
        The degrees, the hub threshold and the explained entities' neighbours.
    """
    train = _recorded_files(run).get("train")
    if not triples or not train or Path(train).stat().st_size > MAX_FILTER_BYTES:
        return None
    lt = read_labeled_triples(train)
    return hub_graph(zip(lt.heads, lt.relations, lt.tails), {x for t in triples for x in (t.head, t.tail)})


def report_sections(
    run,
    *,
    explanations=(),
    necessity=None,
    test=None,
    marks: dict | None = None,
    mark_label: str = "marked",
    n_pro: int = 10,
    n_opp: int = 5,
    explained_title: str = "Explained test triples",
    explained_intro: str = "",
) -> list[Section]:
    """The general sections of a run's report, in page order.

    Their keys: cards, training, metrics, explanations, unresolved (questions explain could not
    explain, when an explanations folder lists some), necessity, settings. The demo places its own
    sections among them.

    Args:
        run: a :class:`~tracegraph.kg.run.Run`.
        explanations: ``tracegraph explain -o`` directories.
        necessity: ``necessity.json``, its directory, or the dict already read (None: no section).
        test: triples to rank for the metrics (default: ``evaluation/ranks.csv``, else the run's test file).
        marks: training triples to tag per explained test triple (see :func:`explained_section`).
        mark_label: the tag's words.
        n_pro: rows in each proponent table.
        n_opp: rows in each opponent table.
        explained_title: the explained section's heading (text).
        explained_intro: the explained section's first paragraph (HTML, replacing the general one).

    Returns:
        The sections.

    Raises:
        DataError: an explanation directory, a necessity file or ``ranks.csv`` cannot be read.
    """
    triples = [t for d in explanations for t in read_explanations(d)]
    unresolved = unresolved_section([(Path(d), read_unresolved(d)) for d in explanations])
    nec = read_necessity(necessity) if necessity is not None else None
    ranks, source = test_ranks(run, test)
    fill_ranks(run, triples, ranks)
    history_file = run.path / "training_history.json"
    history = read_json(history_file) if history_file.is_file() else []
    loss = (run.config.get("train") or {}).get("loss")
    sections = [
        _cards(run, ranks, triples, nec),
        training_section(history, f"training loss ({loss})" if loss else "training loss", run.config),
        metrics_section(ranks, source, run.labels.relation_names),
    ]
    if triples:
        sections.append(
            explained_section(
                triples,
                marks=marks,
                mark_label=mark_label,
                n_pro=n_pro,
                n_opp=n_opp,
                title=explained_title,
                intro=explained_intro,
                graph=training_graph(run, triples),
            )
        )
    if unresolved is not None:
        sections.append(unresolved)
    if nec is not None:
        sections.append(necessity_section(nec, "" if isinstance(necessity, dict) else str(necessity)))
    sections.append(settings_section(run.config))
    return sections


def _cards(run, ranks, triples, nec) -> Section:
    sizes = run.config.get("sizes") or {}
    items = [
        ("entities", e(sizes.get("entities", len(run.entities)))),
        ("relations", e(sizes.get("relations", len(run.relations)))),
    ]
    if "train_triples" in sizes:
        items.append(("training triples", e(sizes["train_triples"])))
    if ranks is not None and not ranks.empty:
        b = side_metrics(ranks)["both"]
        items.append(("test MRR / Hits@10 (both sides)", f"{num(b['mrr'])} / {num(b['hits@10'])}"))
    if triples:
        items.append(("explained test triples", str(len(triples))))
    card = necessity_card(nec) if nec else None
    if card:
        items.append(card)
    return Section("cards", cards(items))


def report_run(run, output, *, explanations=(), necessity=None, test=None, n_pro: int = 10, n_opp: int = 5) -> Path:
    """Write one self-contained HTML report of a run (what ``tracegraph report`` and ``Run.report`` do).

    Args:
        run: A :class:`~tracegraph.kg.run.Run`.
        output: The ``.html`` file to write (atomically: a failure leaves no file).
        explanations: ``tracegraph explain -o`` directories.
        necessity: ``necessity.json`` or its directory.
        test: Triples to rank for the metrics (default: ``evaluation/ranks.csv``, else the run's test file).
        n_pro: Rows in each proponent table.
        n_opp: Rows in each opponent table.

    Returns:
        The path written.

    Raises:
        DataError: If an input cannot be read.
        TracegraphError: If ``output`` is not an ``.html`` file.
    """
    output = Path(output)
    if output.suffix.lower() not in (".html", ".htm"):
        raise TracegraphError(f"-o {output}: the report is one HTML file; name it .html")
    sections = report_sections(run, explanations=explanations, necessity=necessity, test=test, n_pro=n_pro, n_opp=n_opp)
    return write_page(
        output, sections, title=f"tracegraph report: {run.path.name}", subtitle=f"ConvE link prediction run {run.path}"
    )


__all__ = ["fill_ranks", "report_run", "report_sections", "test_ranks", "training_graph"]
