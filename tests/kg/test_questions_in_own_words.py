"""Questions in the user's own words, one resolver for every command and the Python API: entities
by label or node name, relations by label, readable name or predicate; an ambiguous name refused
with its candidates, a typo answered with the closest labels and names; every unresolved question
reported at once, with its line and reason, or set aside in ``unresolved.tsv`` with
``--skip-unresolved`` / ``skip_unresolved=True``.

Expected labels are read by hand from the import's files (``edge_map.json``: predicate and
qualifiers -> relation label; node names "drug i" / "disease i" for CHEBI:i / MONDO:i)."""

import json

import pandas as pd
import pytest

import tracegraph
from tracegraph.errors import TracegraphError
from tracegraph.kg.data.labels import RunLabels
from tracegraph.kg.data.idmap import IdMap
from tests.conftest import run_cli, run_cli_error
from tracegraph.kg.data.questions import UnresolvedQuestions


def _relation(kgx_run, predicate, **qualifiers):
    """The relation label edge_map.json gives a predicate and its qualifiers."""
    emap = json.loads((kgx_run / "graph" / "edge_map.json").read_text())
    return emap[json.dumps({"predicate": predicate, **qualifiers}, sort_keys=True)]


def _write(path, rows):
    path.write_text("".join("\t".join(r) + "\n" for r in rows))
    return path


def _explain(kgx_run, questions, out, *extra):
    run, train = kgx_run / "run", kgx_run / "graph" / "triples.txt"
    return [
        "explain",
        "--model-dir",
        run,
        "--train",
        train,
        "--test-triples",
        questions,
        "-o",
        out,
        "--top-k",
        "2",
        *extra,
    ]


def test_explain_takes_names_and_predicates_in_the_file_and_the_list_form(kgx_run, tmp_path):
    treats = _relation(kgx_run, "biolink:treats")
    up = _relation(kgx_run, "biolink:affects", object_direction_qualifier="increased")
    asked = [
        ("drug 1", "biolink:treats", "disease 2"),  # names and a predicate
        ("CHEBI:3", treats, "MONDO:4"),  # labels
        ("CHEBI:0", "biolink:affects (object_direction_qualifier=increased)", "disease 0"),  # a full name
    ]
    meant = [["CHEBI:1", treats, "MONDO:2"], ["CHEBI:3", treats, "MONDO:4"], ["CHEBI:0", up, "MONDO:0"]]
    res = run_cli(_explain(kgx_run, _write(tmp_path / "q.tsv", asked), tmp_path / "file"))
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "file" / "summary.json").read_text())
    assert [[t["head"], t["relation"], t["tail"]] for t in summary["triples"]] == meant
    assert summary["explained"] == 3 and summary["unresolved"] == []
    assert not (tmp_path / "file" / "unresolved.tsv").exists()
    frame = tracegraph.open_run(kgx_run / "run").explain(asked, top_k=2, quiet=True)
    listed = [[t["head"], t["relation"], t["tail"]] for t in frame.attrs["summary"]["triples"]]
    assert listed == meant


def test_a_name_typed_in_another_case_means_its_entity_unless_that_is_ambiguous():
    labels = RunLabels(entity_names={"HP:1": "Hypercholesterolemia", "X:1": "Cell", "X:2": "cell"})
    entities = IdMap(["HP:1", "X:1", "X:2"])
    assert labels.entity("hypercholesterolemia", entities) == "HP:1"
    assert labels.entity("HYPERCHOLESTEROLEMIA", entities) == "HP:1"
    assert labels.entity("cell", entities) == "X:2"  # the exact name first
    with pytest.raises(TracegraphError, match="name of 2 entities"):
        labels.entity("CELL", entities)


def test_score_and_predict_triples_take_names_and_predicates(kgx_run, tmp_path):
    run = tracegraph.open_run(kgx_run / "run")
    treats = _relation(kgx_run, "biolink:treats")
    by_name = run.score([("drug 1", "biolink:treats", "disease 2")])
    by_label = run.score([("CHEBI:1", treats, "MONDO:2")])
    pd.testing.assert_frame_equal(by_name, by_label)
    res = run_cli(
        [
            "predict",
            "--model-dir",
            kgx_run / "run",
            "--triples",
            _write(tmp_path / "t.tsv", [("drug 1", "biolink:treats", "disease 2")]),
        ]
    )
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[1].startswith(f"CHEBI:1,{treats},MONDO:2,")


def test_an_ambiguous_name_is_refused_listing_its_candidates(kgx_run):
    run = tracegraph.open_run(kgx_run / "run")
    run.labels.entity_names = {**run.labels.entity_names, "CHEBI:2": "drug 1"}  # two entities named "drug 1"
    up = _relation(kgx_run, "biolink:affects", object_direction_qualifier="increased")
    down = _relation(kgx_run, "biolink:affects", object_direction_qualifier="decreased")
    with pytest.raises(UnresolvedQuestions) as e:
        run.explain([("drug 1", "biolink:affects", "MONDO:1")])
    assert str(e.value) == (
        "entity 'drug 1' is the name of 2 entities (CHEBI:1, CHEBI:2); give its label; "
        f"relation 'biolink:affects' names 2 relations (its qualifiers differ): "
        f"{up} = biolink:affects (object_direction_qualifier=increased); "
        f"{down} = biolink:affects (object_direction_qualifier=decreased); give one of their labels; "
        "skip_unresolved=True explains the others and lists these in unresolved.tsv"
    )


def test_a_typo_is_answered_with_the_closest_labels_and_names(kgx_run):
    run = tracegraph.open_run(kgx_run / "run")
    treats = _relation(kgx_run, "biolink:treats")
    with pytest.raises(UnresolvedQuestions) as e:
        run.predict("durg 1", "biolink:treat")
    (u,) = e.value.unresolved
    entity, relation = u.reason.split("; relation ")
    # 'durg 1' against 'drug 1': 5 of 6 characters in matching blocks, ratio 10/12; 'drug 2' etc. 8/12
    assert entity.startswith("entity 'durg 1' is not in the id map; closest: 'drug 1' (CHEBI:1), ")
    assert relation.startswith(f"'biolink:treat' is not in the id map; closest: 'biolink:treats' ({treats})")


# ------------------------------------------------------------------ every unresolved question at once

BAD = [
    ("CHEBI:1", "biolink:treats", "MONDO:1"),
    ("nobody", "biolink:treats", "MONDO:1"),  # line 2: no such entity, nothing close
    ("drug 2", "biolink:treats", "disease 2"),
    ("CHEBI:1", "biolink:affects", "MONDO:1"),  # line 4: two relations share the predicate
]


def _bad_reasons(kgx_run):
    up = _relation(kgx_run, "biolink:affects", object_direction_qualifier="increased")
    down = _relation(kgx_run, "biolink:affects", object_direction_qualifier="decreased")
    return {
        2: "entity 'nobody' is not in the id map",
        4: "relation 'biolink:affects' names 2 relations (its qualifiers differ): "
        f"{up} = biolink:affects (object_direction_qualifier=increased); "
        f"{down} = biolink:affects (object_direction_qualifier=decreased); give one of their labels",
    }


def test_explain_refuses_every_unresolved_question_in_one_error_and_writes_nothing(kgx_run, tmp_path):
    q = _write(tmp_path / "q.tsv", BAD)
    why = _bad_reasons(kgx_run)
    run_cli_error(
        _explain(kgx_run, q, tmp_path / "out"),
        tmp_path,
        kgx_run / "run",
        contains=f"{q}: 2 of 4 questions name no entity or relation of the run: "
        f"line 2 (nobody | biolink:treats | MONDO:1): {why[2]}; "
        f"line 4 (CHEBI:1 | biolink:affects | MONDO:1): {why[4]}; "
        "--skip-unresolved explains the others and lists these in unresolved.tsv",
    )


def test_the_list_form_refuses_the_same_questions_as_the_file_form(kgx_run, tmp_path):
    run = tracegraph.open_run(kgx_run / "run")
    with pytest.raises(UnresolvedQuestions) as listed:
        run.explain(BAD)
    with pytest.raises(UnresolvedQuestions) as filed:
        run.explain(_write(tmp_path / "q.tsv", BAD))
    assert [(u.line, u.reason) for u in listed.value.unresolved] == sorted(_bad_reasons(kgx_run).items())
    assert listed.value.unresolved == filed.value.unresolved  # no blank lines: positions are lines
    assert str(listed.value).startswith("2 of 4 questions name no entity or relation of the run: question 2 (nobody ")


def test_skip_unresolved_explains_the_others_and_lists_the_rest_in_unresolved_tsv(kgx_run, tmp_path):
    q = _write(tmp_path / "q.tsv", BAD)
    out = tmp_path / "out"
    res = run_cli(_explain(kgx_run, q, out, "--skip-unresolved"))
    assert res.exit_code == 0, res.output
    assert "explained 2 of 4 test triples (2 unresolved in unresolved.tsv, 0 failed, 0 skipped)" in res.stdout
    why = _bad_reasons(kgx_run)
    expected = [
        "line\tquestion\treason",
        f"2\tnobody | biolink:treats | MONDO:1\t{why[2]}",
        f"4\tCHEBI:1 | biolink:affects | MONDO:1\t{why[4]}",
    ]
    assert (out / "unresolved.tsv").read_text().splitlines() == expected
    summary = json.loads((out / "summary.json").read_text())
    assert [t["index"] for t in summary["triples"]] == [0, 2]  # file names keep the question's place
    assert [u["line"] for u in summary["unresolved"]] == [2, 4]
    # the Python list form writes the same file
    frame = tracegraph.open_run(kgx_run / "run").explain(
        BAD, top_k=2, skip_unresolved=True, output_dir=tmp_path / "api", quiet=True
    )
    assert (tmp_path / "api" / "unresolved.tsv").read_text().splitlines() == expected
    assert sorted(set(frame["TestHead"])) == ["CHEBI:1", "CHEBI:2"]
    # a later run with nothing unresolved leaves no stale list behind
    _write(q, BAD[:1])
    assert run_cli(_explain(kgx_run, q, out, "--overwrite")).exit_code == 0
    assert not (out / "unresolved.tsv").exists()


def test_predict_names_every_bad_line_of_a_query_file_at_once(kgx_run, tmp_path):
    qf = _write(tmp_path / "q.tsv", [("drug 1", "biolink:treats"), ("nobody", "biolink:treats"), ("CHEBI:1", "nope")])
    run_cli_error(
        ["predict", "--model-dir", kgx_run / "run", "--query-file", qf],
        tmp_path,
        contains=f"{qf}: 2 of 3 questions name no entity or relation of the run: "
        "line 2 (nobody | biolink:treats): entity 'nobody' is not in the id map; "
        "line 3 (CHEBI:1 | nope): relation 'nope' is not in the id map",
    )
