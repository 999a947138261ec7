"""`tracegraph filter`: the training graph around each test triple (semantics: docs/filtering.md).

The filtering flags are defined once here so that `tracegraph explain` offers exactly the same
ones. To reuse them in another command, give its function these parameters (names as in
:data:`FILTER_PARAMS`) with the option objects below as defaults, then call
:func:`filter_options_from_cli`::

    def explain(..., n_hops: int = N_HOPS, min_degree: int = MIN_DEGREE,
                preserve_test_edges: bool = PRESERVE_TEST_EDGES, strict_hop_constraint: bool = STRICT_HOP,
                path_filtering: bool = PATH_FILTERING, max_total_path_length: int = MAX_PATH_LENGTH,
                strict_path_filtering: bool = STRICT_PATH, save_edges_only: bool = EDGES_ONLY):
        options = filter_options_from_cli(**{k: locals()[k] for k in FILTER_PARAMS})
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from tracegraph.cli.common import FILTER_OLD_FLAGS, DatasetOpt, dataset_splits, old_flags_command, table_console

N_HOPS = typer.Option(2, "--n-hops", min=0, help="Keep nodes within this many hops of the head AND of the tail.")
MIN_DEGREE = typer.Option(
    2,
    "--min-degree",
    min=0,
    help="Keep an edge if an endpoint has at least this many distinct neighbours "
    "(full training graph, self-loops excluded).",
)
PRESERVE_TEST_EDGES = typer.Option(
    True, "--preserve-test-edges/--no-preserve-test-edges", help="Always keep edges touching the test head or tail."
)
STRICT_HOP = typer.Option(
    False, "--strict-hop-constraint", help="Measure hop distances with the direct head–tail edges removed."
)
PATH_FILTERING = typer.Option(
    False, "--path-filtering", help="Then keep only edges on a simple head–tail path of length <= L."
)
MAX_PATH_LENGTH = typer.Option(
    3, "--max-total-path-length", min=1, metavar="L", help="L for path filtering (exact and vectorised for L <= 4)."
)
STRICT_PATH = typer.Option(
    False,
    "--strict-path-filtering",
    help="Keep only path edges of the n-hop subgraph, ignoring degree and test-edge rules.",
)
EDGES_ONLY = typer.Option(False, "--save-edges-only", help="Keep one triple (the first) per node pair.")

#: parameter names a command must use for the shared filtering flags (in --help order)
FILTER_PARAMS = (
    "n_hops",
    "min_degree",
    "preserve_test_edges",
    "strict_hop_constraint",
    "path_filtering",
    "max_total_path_length",
    "strict_path_filtering",
    "save_edges_only",
)


def filter_options_from_cli(
    n_hops,
    min_degree,
    preserve_test_edges,
    strict_hop_constraint,
    path_filtering,
    max_total_path_length,
    strict_path_filtering,
    save_edges_only,
):
    """The parsed flag values -> :class:`~tracegraph.kg.explain.neighborhood.FilterOptions`."""
    from tracegraph.kg.explain.neighborhood import FilterOptions

    return FilterOptions(
        n_hops=n_hops,
        min_degree=min_degree,
        preserve_test_edges=preserve_test_edges,
        strict_hop=strict_hop_constraint,
        path_filtering=path_filtering,
        max_path_length=max_total_path_length,
        strict_path=strict_path_filtering,
        edges_only=save_edges_only,
    )


def output_name(k: int, head: str, tail: str, width: int = 3) -> str:
    """``triple_NNN_<head>_<tail>_train.txt``; ':', '/', '\\' and whitespace become '_'."""
    from tracegraph.kg.data.triples import triple_file_stem

    return f"{triple_file_stem(k, head, tail, width)}_train.txt"


def filter_cmd(
    train: Optional[Path] = typer.Option(
        None, "--train", help="Training triples (head<TAB>relation<TAB>tail), or --dataset."
    ),
    dataset: Optional[str] = DatasetOpt,
    test_triples: Path = typer.Option(..., "--test-triples", help="Test triples to filter around."),
    output: Path = typer.Option(
        ..., "--output", "-o", help="A file when there is one test triple, otherwise a directory."
    ),
    n_hops: int = N_HOPS,
    min_degree: int = MIN_DEGREE,
    preserve_test_edges: bool = PRESERVE_TEST_EDGES,
    strict_hop_constraint: bool = STRICT_HOP,
    path_filtering: bool = PATH_FILTERING,
    max_total_path_length: int = MAX_PATH_LENGTH,
    strict_path_filtering: bool = STRICT_PATH,
    save_edges_only: bool = EDGES_ONLY,
    cache: bool = typer.Option(
        True,
        "--cache/--no-cache",
        help="Reuse/write the graph index in the user cache dir (keyed by the file's content; $TRACEGRAPH_CACHE_DIR).",
    ),
):
    """Write the filtered training graph for each test triple, with per-triple statistics.

    Semantics: docs/filtering.md. An unknown head/tail marks that triple as failed and the others go on; exit code 0 if any triple succeeded, 2 if none did.
    """
    import numpy as np
    from rich.table import Table
    from rich.text import Text

    from tracegraph.errors import TracegraphError
    from tracegraph.kg.explain.neighborhood import GraphIndex
    from tracegraph.kg.data.split import write_triples
    from tracegraph.kg.data.triples import read_labeled_triples, read_triples
    from tracegraph.runtime.checkpoints import atomic_write_json
    from tracegraph.runtime.progress import console, make_progress, setup_logging

    setup_logging()  # the index cache reports where it was read or written
    train = dataset_splits(dataset, ("train",), train=train)["train"]

    options = filter_options_from_cli(
        n_hops,
        min_degree,
        preserve_test_edges,
        strict_hop_constraint,
        path_filtering,
        max_total_path_length,
        strict_path_filtering,
        save_edges_only,
    )
    ts = read_triples(train)
    tests = read_labeled_triples(test_triples)
    t0 = time.perf_counter()
    index = GraphIndex.load_or_build(train, ts.ids, ts.num_entities, use_cache=cache)
    index_s = time.perf_counter() - t0
    single = len(tests) == 1 and not output.is_dir()
    if not single and output.exists() and not output.is_dir():
        raise TracegraphError(f"{output}: exists and is not a directory ({len(tests)} test triples need one)")
    labels = (np.asarray(ts.entities.labels, dtype=object), np.asarray(ts.relations.labels, dtype=object))
    width = max(3, len(str(len(tests) - 1)))
    records = []
    with make_progress() as progress:
        task = progress.add_task("filtering", total=len(tests), info="")
        for k, (h, r, t, line) in enumerate(zip(tests.heads, tests.relations, tests.tails, tests.lines)):
            rec = {"index": k, "line": int(line), "head": h, "relation": r, "tail": t}
            missing = [x for x in (h, t) if x not in ts.entities]
            if missing:
                msg = f"{test_triples}:{line}: entity {missing[0]!r} is not in the training graph {train}"
                if single:
                    raise TracegraphError(msg)
                rec.update(status="failed", error=msg)
                console.print(f"skipped: {msg}", style="yellow", markup=False, highlight=False)
            else:
                res = index.filter(ts.entities.id(h), ts.entities.id(t), options)
                path = output if single else output / output_name(k, h, t, width)
                rows = ts.ids[res.triple_rows]
                write_triples(path, zip(labels[0][rows[:, 0]], labels[1][rows[:, 1]], labels[0][rows[:, 2]]))
                rec.update(status="ok", output=str(path), **res.stats())
            records.append(rec)
            progress.update(task, advance=1, info=f"{k + 1}/{len(tests)}")

    table = Table(
        title=Text(
            f"filtered {train} ({len(ts)} triples; index {index_s:.2f} s{', cached' if index.loaded_from else ''})"
        )
    )
    for c in ("#", "head", "tail", "nodes", "edges", "reduction", "time"):
        table.add_column(c, justify="left" if c in ("head", "tail") else "right")
    for rec in records:
        if rec["status"] == "ok":
            table.add_row(
                str(rec["index"]),
                Text(rec["head"]),
                Text(rec["tail"]),
                str(rec["nodes_kept"]),
                str(rec["edges_kept"]),
                f"{100 * rec['reduction_ratio']:.2f} %",
                f"{rec['seconds']:.3f} s",
            )
        else:
            table.add_row(str(rec["index"]), Text(rec["head"]), Text(rec["tail"]), "-", "-", "failed", "-")
    table_console().print(table)  # results on stdout (like `data stats`); progress and warnings on stderr
    ok = sum(rec["status"] == "ok" for rec in records)
    if not single:
        atomic_write_json(
            output / "filter_summary.json",
            {
                "train": str(train),
                "test_triples": str(test_triples),
                "training_triples": len(ts),
                "options": options.__dict__,
                "index_seconds": index_s,
                "index_cache": str(index.loaded_from) if index.loaded_from else None,
                "succeeded": ok,
                "failed": len(records) - ok,
                "triples": records,
            },
        )
    if ok == 0:
        raise TracegraphError(f"no test triple could be filtered; see {output / 'filter_summary.json'}")


def register(app: typer.Typer) -> None:
    app.command("filter", cls=old_flags_command(FILTER_OLD_FLAGS))(filter_cmd)  # --output-dir: the old scripts' name
