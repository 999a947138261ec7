"""`predict` both ways, with names: heads of (?, r, t) checked against float64 scores of every
candidate (the reciprocal query for a reciprocal model, every (e, r, t) without), relations by their
KGX predicate, name columns from the run's label files, and output formats by extension."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

import tracegraph
from tests.conftest import UMLS, run_cli, run_cli_error
from tests.kg.umls_run import QUERY, all_scores, float64_model, labels_of, triples_of
from tracegraph.errors import TracegraphError

TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=2)


def test_heads_of_a_reciprocal_model_are_its_inverse_query_ranked(run_dir):
    run = tracegraph.open_run(run_dir)
    ents, rels = labels_of(run_dir / "node_dict.txt"), labels_of(run_dir / "rel_dict.txt")
    ref_model, _ = float64_model(run_dir / "best_model.pt")
    t, r = ents.index(QUERY[2]), rels.index(QUERY[1])
    ref = all_scores(ref_model, t, r + len(rels))  # (t, r⁻¹, ?)
    top = run.predict(tail=QUERY[2], relation=QUERY[1], k=5)
    assert top["tail"].tolist() == [QUERY[2]] * 5 and top["relation"].tolist() == [QUERY[1]] * 5
    assert top["head"].tolist() == [ents[i] for i in np.argsort(-ref)[:5]]
    np.testing.assert_allclose(top["score"], np.sort(ref)[::-1][:5], rtol=1e-5, atol=1e-6)

    known = {h for h, rr, tt in triples_of(UMLS / "train.txt") if (rr, tt) == QUERY[1:]}
    assert known  # the query has training heads to leave out
    fresh = run.predict(tail=QUERY[2], relation=QUERY[1], k=5, exclude_train=True)
    kept = [ents[i] for i in np.argsort(-ref) if ents[i] not in known][:5]
    assert fresh["head"].tolist() == kept


def test_heads_without_reciprocals_score_every_candidate_head(tmp_path):
    rows = [f"e{i}\tr{i % 2}\te{(3 * i + 1) % 9}" for i in range(18)]
    (tmp_path / "train.txt").write_text("\n".join(rows) + "\n")
    run = tracegraph.train(
        train=tmp_path / "train.txt",
        output_dir=tmp_path / "run",
        epochs=1,
        batch_size=8,
        device="cpu",
        model=dict(TINY, reciprocal=False),
    )
    model, _ = float64_model(tmp_path / "run" / "final_model.pt")
    ents = labels_of(tmp_path / "run" / "node_dict.txt")
    t, r = ents.index("e4"), labels_of(tmp_path / "run" / "rel_dict.txt").index("r1")
    with torch.no_grad():
        ref = model.score_triples(
            torch.arange(len(ents)), torch.full((len(ents),), r), torch.full((len(ents),), t)
        ).numpy()
    top = run.predict(tail="e4", relation="r1", k=len(ents))
    assert top["head"].tolist() == [ents[i] for i in np.argsort(-ref)]
    np.testing.assert_allclose(top["score"], np.sort(ref)[::-1], rtol=1e-5, atol=1e-6)
    trained_heads = {h for h, rr, tt in (x.split("\t") for x in rows) if (rr, tt) == ("r1", "e4")}
    assert trained_heads and not trained_heads & set(
        run.predict(tail="e4", relation="r1", k=len(ents) - len(trained_heads), exclude_train=True)["head"]
    )


def test_a_kgx_relation_is_asked_by_its_predicate_and_names_come_from_the_run(kgx_run):
    run = tracegraph.open_run(kgx_run / "run")
    emap = json.loads((kgx_run / "graph" / "edge_map.json").read_text())
    treats = emap[json.dumps({"predicate": "biolink:treats"}, sort_keys=True)]
    by_name = run.predict(head="CHEBI:1", relation="biolink:treats", k=3)
    by_id = run.predict(head="CHEBI:1", relation=treats, k=3)
    pd.testing.assert_frame_equal(by_name, by_id)
    assert by_name["relation"].tolist() == [treats] * 3
    assert by_name["relation_name"].tolist() == ["biolink:treats"] * 3
    names = {f"CHEBI:{i}": f"drug {i}" for i in range(5)} | {f"MONDO:{i}": f"disease {i}" for i in range(5)}
    assert by_name["head_name"].tolist() == ["drug 1"] * 3
    assert by_name["tail_name"].tolist() == [names[t] for t in by_name["tail"]]
    # the run's entity ids are not the import's (X:0 has no edge): names follow the labels, not the indices
    assert "X:0" not in run.entities
    assert run.predict(head="drug 1", relation="biolink:treats", k=3)["tail"].tolist() == by_name["tail"].tolist()
    with pytest.raises(TracegraphError, match=r"'biolink:affects' names 2 relations .*object_direction_qualifier"):
        run.predict(head="CHEBI:1", relation="biolink:affects")
    up = run.predict(head="CHEBI:1", relation="biolink:affects (object_direction_qualifier=increased)", k=1)
    assert up["relation"].tolist() == [
        emap[json.dumps({"predicate": "biolink:affects", "object_direction_qualifier": "increased"}, sort_keys=True)]
    ]


def test_cli_predict_heads_and_tails_by_name_into_csv_tsv_and_json(kgx_run, tmp_path):
    run = tracegraph.open_run(kgx_run / "run")
    base = ["predict", "--model-dir", kgx_run / "run", "--device", "cpu", "--top-k", "4"]
    assert (
        run_cli([*base, "--tail", "MONDO:2", "--relation", "biolink:treats", "-o", tmp_path / "h.tsv"]).exit_code == 0
    )
    got = pd.read_csv(tmp_path / "h.tsv", sep="\t")
    expected = run.predict(tail="MONDO:2", relation="biolink:treats", k=4)
    assert got["head"].tolist() == expected["head"].tolist() and set(got["tail"]) == {"MONDO:2"}
    assert (
        run_cli([*base, "--head", "CHEBI:0", "--relation", "biolink:treats", "-o", tmp_path / "t.json"]).exit_code == 0
    )
    rows = json.loads((tmp_path / "t.json").read_text())
    assert [x["tail"] for x in rows] == run.predict(head="CHEBI:0", relation="biolink:treats", k=4)["tail"].tolist()
    old = run_cli([*base, "--query", "CHEBI:0", "biolink:treats", "-o", tmp_path / "q.csv"])  # the old form
    assert old.exit_code == 0 and pd.read_csv(tmp_path / "q.csv")["tail"].tolist() == [x["tail"] for x in rows]


@pytest.mark.parametrize(
    "args,contains",
    [
        (
            ["--head", "CHEBI:0", "--relation", "biolink:treats", "-o", "{tmp}/pred.xlsx"],
            "predict writes .csv, .tsv or .json files, not .xlsx",
        ),
        (["--head", "CHEBI:0", "--tail", "MONDO:1", "--relation", "biolink:treats"], "--relation with --head"),
        (["--head", "CHEBI:0"], "--relation with --head"),
        (
            ["--head", "CHEBI:0", "--relation", "biolink:treats", "--query", "CHEBI:0", "biolink:treats"],
            "exactly one of",
        ),
        (["--tail", "MONDO:0", "--relation", "biolink:cures"], "relation 'biolink:cures' is not in the id map"),
    ],
)
def test_predict_errors_are_one_line_and_write_nothing(kgx_run, tmp_path, args, contains):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    run_cli_error(
        ["predict", "--model-dir", kgx_run / "run", "--device", "cpu", *args],
        tmp_path,
        kgx_run / "run",
        contains=contains,
    )


def test_a_split_into_its_own_folder_keeps_the_imports_names(kgx_run, tmp_path):
    """`data split graph/triples.txt -o elsewhere` then train on elsewhere/train.txt: the run still
    knows biolink:treats and the node names (the split brings the import's name files along)."""
    from tracegraph.kg.data.split import split_file

    split_file(kgx_run / "graph" / "triples.txt", tmp_path / "split", 0.1, 0.0, seed=0)
    tracegraph.train(
        train=tmp_path / "split" / "train.txt",
        output_dir=tmp_path / "run",
        epochs=1,
        batch_size=8,
        device="cpu",
        model=TINY,
        quiet=True,
    )
    run = tracegraph.open_run(tmp_path / "run")
    top = run.predict(head="CHEBI:1", relation="biolink:treats", k=2)
    assert top["relation_name"].tolist() == ["biolink:treats"] * 2 and top["head_name"].tolist() == ["drug 1"] * 2
    for name in ("node_name_dict.txt", "node_dict.txt", "edge_map.json"):  # copied byte for byte
        assert (tmp_path / "split" / name).read_bytes() == (kgx_run / "graph" / name).read_bytes()


def test_the_report_names_relations_in_its_per_relation_table(kgx_run, tmp_path):
    run = tracegraph.open_run(kgx_run / "run")
    emap = json.loads((kgx_run / "graph" / "edge_map.json").read_text())
    treats = emap[json.dumps({"predicate": "biolink:treats"}, sort_keys=True)]
    page = run.report(tmp_path / "r.html", test=kgx_run / "graph" / "triples.txt").read_text()
    per_relation = page.split("Per relation", 1)[1]
    assert f"biolink:treats ({treats})" in per_relation
