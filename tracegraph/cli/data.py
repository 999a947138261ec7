"""`tracegraph data …`: statistics, splits, KGX import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import typer

data_app = typer.Typer(help="Inspect, split and import knowledge-graph data.", no_args_is_help=True)


@data_app.command("stats")
def stats(
    files: List[Path] = typer.Argument(..., help="Triples files (head<TAB>relation<TAB>tail)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
):
    """Counts per file (and combined): triples, entities, relations, duplicates, degrees."""
    from rich.console import Console
    from rich.table import Table

    from tracegraph.kg.split import triple_stats

    res = triple_stats(list(files))
    if as_json:
        typer.echo(json.dumps(res, indent=2))
        return
    table = Table(title="triples")
    cols = ["file", "triples", "entities", "relations", "duplicates", "self-loops", "degree min/median/max"]
    for c in cols:
        table.add_column(c, justify="right" if c != "file" else "left")
    rows = list(res["files"].items()) + ([("combined", res["combined"])] if "combined" in res else [])
    for name, s in rows:
        d = s["degree"]
        table.add_row(
            name, str(s["triples"]), str(s["entities"]), str(s["relations"]),
            str(s["duplicate_triples"]), str(s["self_loops"]), f"{d['min']}/{d['median']:g}/{d['max']}",
        )
    Console().print(table)


@data_app.command("split")
def split(
    file: Path = typer.Argument(..., help="All triples, one file."),
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Writes train.txt, valid.txt, test.txt here."),
    valid_fraction: float = typer.Option(0.1, help="Fraction of triples for validation."),
    test_fraction: float = typer.Option(0.1, help="Fraction of triples for testing."),
    seed: int = typer.Option(0, help="Shuffle seed; the same seed gives the same split."),
):
    """Reproducible split. Valid/test triples with entities or relations unseen in train are dropped and reported."""
    from tracegraph.kg.split import split_file

    res = split_file(file, output_dir, valid_fraction, test_fraction, seed)
    typer.echo(f"train {len(res.train)}  valid {len(res.valid)}  test {len(res.test)}  -> {output_dir}")
    for name, rows in res.dropped.items():
        if rows:
            typer.echo(f"dropped {len(rows)} {name} triples whose entity/relation is not in train, e.g. {rows[0]}", err=True)


@data_app.command("import-kgx")
def import_kgx_cmd(
    nodes: Path = typer.Argument(..., help="nodes.jsonl (id, name, category)."),
    edges: Path = typer.Argument(..., help="edges.jsonl (subject, predicate, object, qualifiers)."),
    output_dir: Path = typer.Option(..., "--output-dir", "-o"),
):
    """KGX JSON Lines -> triples.txt, node_dict.txt, node_name_dict.txt, rel_dict.txt, edge_map.json."""
    from tracegraph.kg.kgx import import_kgx

    res = import_kgx(nodes, edges, output_dir)
    typer.echo(f"{res.triples} triples, {res.entities} entities, {res.relations} relations -> {output_dir}")
    if res.nodes_only_in_edges:
        typer.echo(f"note: {res.nodes_only_in_edges} nodes appear only in edges; named by their id", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
