"""`tracegraph data …`: statistics, splits, KGX import."""

from __future__ import annotations

import json
from pathlib import Path
import shutil
from typing import List, Optional

import typer

from tracegraph.cli.common import table_console

data_app = typer.Typer(help="Inspect, split and import knowledge-graph data.", no_args_is_help=True)


@data_app.command("stats")
def stats(
    files: List[Path] = typer.Argument(..., help="Triples files (head<TAB>relation<TAB>tail)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
):
    """Counts per file (and combined): triples, entities, relations, duplicates, degrees."""
    from rich.table import Table

    from tracegraph.kg.data.split import triple_stats

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
            name,
            str(s["triples"]),
            str(s["entities"]),
            str(s["relations"]),
            str(s["duplicate_triples"]),
            str(s["self_loops"]),
            f"{d['min']}/{d['median']:g}/{d['max']}",
        )
    table_console().print(table)


@data_app.command("split")
def split(
    file: Path = typer.Argument(..., help="All triples, one file."),
    output_dir: Path = typer.Option(
        ..., "--output-dir", "-o", help="Writes train.txt, valid.txt, test.txt here (created; written at once)."
    ),
    valid_fraction: float = typer.Option(0.1, help="Fraction of triples for validation."),
    test_fraction: float = typer.Option(0.1, help="Fraction of triples for testing."),
    seed: int = typer.Option(0, help="Shuffle seed; the same seed gives the same split."),
    unseen_to_train: bool = typer.Option(
        False,
        "--unseen-to-train",
        help="Move valid/test triples with an entity or relation that train lacks into train, instead of dropping them.",
    ),
):
    """Reproducible split. Valid/test triples with an entity or relation unseen in train are dropped
    (or, with --unseen-to-train, moved into train) and reported per split; an empty split is warned of."""
    from tracegraph.kg.data.split import split_file, split_notes

    res = split_file(file, output_dir, valid_fraction, test_fraction, seed, unseen_to_train)
    typer.echo(f"train {len(res.train)}  valid {len(res.valid)}  test {len(res.test)}  -> {output_dir}")
    for level, sentence in split_notes(res, {"valid": valid_fraction, "test": test_fraction}):
        typer.echo(f"{level}: {sentence}", err=True)


@data_app.command("import-kgx")
def import_kgx_cmd(
    nodes: Path = typer.Argument(
        ...,
        help="The KGX nodes file: *_nodes.tsv (header line; id, name, category; | between values) or "
        "*nodes.jsonl, .gz too. Or a folder holding one *_nodes.tsv/*_edges.tsv (or .jsonl) pair; then "
        "leave EDGES out.",
    ),
    edges: Optional[Path] = typer.Argument(
        None, help="The KGX edges file: *_edges.tsv or *edges.jsonl (subject, predicate, object, qualifiers, negated)."
    ),
    output_dir: Path = typer.Option(
        ..., "--output-dir", "-o", help="Folder for triples.txt and its label files (created; files written at once)."
    ),
):
    """KGX TSV or JSON Lines -> triples.txt, node_dict.txt, node_name_dict.txt, rel_dict.txt, edge_map.json.

    Negated edges (negated: true) are left out, node rows that repeat exactly are merged, spaces
    around ids are removed; each is reported as a note naming the first few.
    """
    from tracegraph.errors import DataError, TracegraphError
    from tracegraph.kg.data.kgx import import_kgx
    from tracegraph.kg.data.kgx_read import find_pair

    if not nodes.exists():
        raise DataError("KGX nodes file or folder not found", nodes)
    if nodes.is_dir():
        if edges is not None:
            raise TracegraphError(f"{nodes} is a folder: give it alone, or the nodes and edges files")
        nodes, edges = find_pair(nodes)
        typer.echo(f"reading {nodes} and {edges}", err=True)
    elif edges is None:
        raise TracegraphError(f"{nodes}: give the edges file after the nodes file, or a folder holding both")
    res = import_kgx(nodes, edges, output_dir)
    typer.echo(f"{res.triples} triples, {res.entities} entities, {res.relations} relations -> {output_dir}")
    for note in res.notes:
        typer.echo(f"note: {note}", err=True)


@data_app.command("synthetic")
def synthetic(
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Writes splits, dicts, mechanisms.tsv here."),
    seed: int = typer.Option(0, help="The same seed and options give byte-identical files."),
    quick: bool = typer.Option(False, "--quick", help="The ~4x smaller preset (CI, smoke tests)."),
    drugs: int | None = typer.Option(None, help="Number of drugs (default 200; quick 50)."),
    genes: int | None = typer.Option(None, help="Number of genes (default 400; quick 100)."),
    pathways: int | None = typer.Option(None, help="Number of pathways (default 75; quick 20)."),
    diseases: int | None = typer.Option(None, help="Number of diseases (default 150; quick 40)."),
    phenotypes: int | None = typer.Option(None, help="Number of phenotypes (default 175; quick 45)."),
    test_triples: int | None = typer.Option(None, help="Held-out treats edges in test.txt (default 100; quick 15)."),
    treats_per_drug: float | None = typer.Option(
        None, help="Mechanism walks drawn per drug (default 8; repeats of a pair count once)."
    ),
    module_coherence: float | None = typer.Option(
        None, help="Share of partners from one's own disease module, 0-1 (default 0.95; lower: harder)."
    ),
    noise_edge_fraction: float | None = typer.Option(
        None, help="Random typed edges per background edge (default 0.05)."
    ),
    noise_treats_fraction: float | None = typer.Option(
        None, help="Mechanism-free treats edges per planted one (default 0.05)."
    ),
):
    """A generated biomedical KG with treats edges planted through mechanisms; test mechanisms in mechanisms.tsv."""
    from tracegraph.kg.demo.synthetic import SyntheticConfig, generate, write

    given = {
        "n_drugs": drugs,
        "n_genes": genes,
        "n_pathways": pathways,
        "n_diseases": diseases,
        "n_phenotypes": phenotypes,
        "n_test": test_triples,
        "treats_per_drug": treats_per_drug,
        "module_coherence": module_coherence,
        "noise_edge_fraction": noise_edge_fraction,
        "noise_treats_fraction": noise_treats_fraction,
    }
    overrides = {k: v for k, v in given.items() if v is not None}
    config = SyntheticConfig.quick(**overrides) if quick else SyntheticConfig(**overrides)
    counts = write(generate(config, seed), output_dir)
    typer.echo(
        f"{counts['entities']} entities, {counts['relations']} relations; train {counts['train']}  "
        f"valid {counts['valid']}  test {counts['test']} ({counts['test_mechanism_paths']} mechanism paths)"
        f"  -> {output_dir}"
    )


@data_app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")):
    """Datasets known by name: bundled (UMLS) or downloaded on first use into the cache ($TRACEGRAPH_CACHE_DIR)."""
    from rich.table import Table

    from tracegraph.kg.data.datasets import DATASETS, cache_dir, cached_path

    rows = []
    for d in DATASETS.values():
        cached = d.bundled or cached_path(d).is_dir()
        rows.append(
            {
                "name": d.name,
                "source": d.source,
                "sha256": d.sha256,
                "entities": d.entities,
                "relations": d.relations,
                "train": d.triples[0],
                "valid": d.triples[1],
                "test": d.triples[2],
                "conve_mrr": d.conve_mrr,
                "available": cached,
                "description": d.description,
            }
        )
    if as_json:
        typer.echo(json.dumps({"cache_dir": str(cache_dir()), "datasets": rows}, indent=2))
        return
    table = Table(title=f"datasets (cache: {cache_dir()})")
    for c in ("name", "source", "entities", "relations", "train/valid/test", "ConvE MRR (published)", "here"):
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(
            r["name"],
            r["source"],
            str(r["entities"]),
            str(r["relations"]),
            f"{r['train']}/{r['valid']}/{r['test']}",
            r["conve_mrr"],
            "yes" if r["available"] else "no",
        )
    table_console().print(table)


@data_app.command("get")
def get_cmd(
    name: str = typer.Argument(..., help="A name from `tracegraph data list`."),
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Writes train.txt, valid.txt, test.txt here."),
    source: Optional[str] = typer.Option(
        None, "--from", help="A local copy or mirror URL of the archive (same sha256) instead of the published address."
    ),
):
    """Write a dataset's train/valid/test files into a directory (downloading it into the cache first if needed)."""
    from tracegraph.kg.data.datasets import split_paths
    from tracegraph.runtime.checkpoints import atomic_path

    paths = split_paths(name, source)
    for split, path in paths.items():
        with atomic_path(output_dir / path.name) as tmp:
            shutil.copyfile(path, tmp)
    counts = "  ".join(f"{s} {sum(1 for line in open(p, 'rb') if line.strip())}" for s, p in paths.items())
    typer.echo(f"{name}: {counts}  -> {output_dir}")


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
