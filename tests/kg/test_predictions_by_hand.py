"""`predict` by hand on a 9-entity run: rows per query (ranks from 1, the logistic of each score
computed here), queries broadcast one-to-many, name columns with names for some labels only,
training answers left out on either side (a naive loop over the training file), each kind of
query of the `predict` command equal to its Python form, output files read back, and every
refusal word for word."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

import tracegraph
from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.predictions import NAME_COLUMNS, PREDICT_COLUMNS, check_output, predict_command, write_predictions

TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=2)
ROWS = [(f"e{i}", f"r{i % 2}", f"e{(3 * i + 1) % 9}") for i in range(18)]


def _train(folder, reciprocal):
    folder.mkdir()
    (folder / "train.txt").write_text("".join("\t".join(t) + "\n" for t in ROWS))
    tracegraph.train(
        train=folder / "train.txt",
        output_dir=folder / "run",
        epochs=1,
        batch_size=8,
        device="cpu",
        model=dict(TINY, reciprocal=reciprocal),
        quiet=True,
    )
    return folder / "run"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("predict")
    return {rec: _train(d / f"reciprocal_{rec}", rec) for rec in (True, False)}


def _open(runs, reciprocal=True):
    return tracegraph.open_run(runs[reciprocal])  # a fresh Run each time: tests change its names


def _all_scores(run, head=None, relation=None, tail=None) -> dict[str, float]:
    """Every candidate's score from the model's own triple scorer, one triple at a time: (h, r, e)
    for tails; for heads (e, r, t), or (t, r⁻¹, e) in a model trained with reciprocal relations."""
    ents = run.entities.labels
    r = run.relations.labels.index(relation)
    inverse = head is None and run.model.config.reciprocal
    out = {}
    with torch.no_grad():
        for i, e in enumerate(ents):
            if head is not None:
                h, rr, t = ents.index(head), r, i
            elif inverse:
                h, rr, t = ents.index(tail), r + len(run.relations), i
            else:
                h, rr, t = i, r, ents.index(tail)
            s = run.model.score_triples(torch.tensor([h]), torch.tensor([rr]), torch.tensor([t]))
            out[e] = float(s[0])
    return out


def test_rows_rank_from_one_with_the_logistic_of_their_score(runs):
    run = _open(runs)
    top = run.predict(head="e2", relation="r0", k=4)
    assert list(top.columns) == PREDICT_COLUMNS  # no names in this run: no name columns
    assert top["rank"].tolist() == [1, 2, 3, 4]
    for score, p in zip(top["score"], top["probability"]):
        assert p == pytest.approx(1 / (1 + math.exp(-score)), rel=1e-9)
    want = sorted(_all_scores(run, head="e2", relation="r0").items(), key=lambda kv: -kv[1])[:4]
    assert top["tail"].tolist() == [e for e, _ in want]
    np.testing.assert_allclose(top["score"], [s for _, s in want], rtol=1e-4, atol=1e-5)


def test_one_head_broadcasts_over_relations_and_one_relation_over_heads(runs):
    run = _open(runs)
    many_rel = run.predict(head="e1", relation=["r0", "r1"], k=2)
    assert many_rel["head"].tolist() == ["e1"] * 4 and many_rel["relation"].tolist() == ["r0", "r0", "r1", "r1"]
    assert many_rel["rank"].tolist() == [1, 2, 1, 2]
    many_heads = run.predict(head=["e1", "e5", "e7"], relation="r1", k=1)
    assert many_heads["head"].tolist() == ["e1", "e5", "e7"] and many_heads["relation"].tolist() == ["r1"] * 3
    for h in ("e1", "e5", "e7"):  # each query answered as if asked alone
        alone = run.predict(head=h, relation="r1", k=1)
        assert many_heads[many_heads["head"] == h]["tail"].tolist() == alone["tail"].tolist()
    two = run.predict(head=["e1", "e5"], relation="r1", k=1)  # two heads, one relation
    assert two["head"].tolist() == ["e1", "e5"] and two["relation"].tolist() == ["r1", "r1"]
    pairs = run.predict(head=["e1", "e5"], relation=["r0", "r1"], k=1)
    assert list(zip(pairs["head"], pairs["relation"])) == [("e1", "r0"), ("e5", "r1")]
    with pytest.raises(TracegraphError) as e:
        run.predict(head=["e1", "e5"], relation=["r0", "r1", "r0"])
    assert str(e.value) == "2 entities and 3 relations: give one of each per query"


@pytest.mark.parametrize(
    "kwargs",
    [dict(head="e1"), dict(head="e1", tail="e2", relation="r0"), dict(relation="r0"), dict(tail="e1", relation=None)],
)
def test_a_query_needs_a_relation_and_one_side(runs, kwargs):
    with pytest.raises(TracegraphError) as e:
        _open(runs).predict(**kwargs)
    assert str(e.value) == ("give a relation and either a head (its tails are ranked) or a tail (its heads are ranked)")


def test_name_columns_appear_with_any_names_and_fall_back_to_the_label(runs):
    run = _open(runs)
    run.labels.relation_names = {"r0": "reads"}  # relation names only
    top = run.predict(tail="e4", relation=["r0", "r1"], k=2)
    assert list(top.columns) == PREDICT_COLUMNS + NAME_COLUMNS
    assert top["relation_name"].tolist() == ["reads", "reads", "r1", "r1"]
    assert top["head_name"].tolist() == top["head"].tolist() and top["tail_name"].tolist() == ["e4"] * 4

    run = _open(runs)
    run.labels.entity_names = {"e4": "four"}  # one entity's name only
    top = run.predict(tail="e4", relation="r1", k=3)
    assert list(top.columns) == PREDICT_COLUMNS + NAME_COLUMNS
    assert top["tail_name"].tolist() == ["four"] * 3 and top["relation_name"].tolist() == ["r1"] * 3
    assert top["head_name"].tolist() == [("four" if h == "e4" else h) for h in top["head"]]
    every = run.predict(tail="e4", relation="r1", k=len(run.entities))  # e4 among the heads too
    assert "four" in every["head_name"].tolist()
    assert every["head_name"].tolist() == [("four" if h == "e4" else h) for h in every["head"]]


@pytest.mark.parametrize("reciprocal", [True, False])
@pytest.mark.parametrize("side", ["head", "tail"])
def test_exclude_train_leaves_out_the_training_answers_of_that_side(runs, reciprocal, side):
    run = _open(runs, reciprocal)
    q = "e4" if side == "head" else "e2"
    ask = dict(tail=q) if side == "head" else dict(head=q)
    known = {t[0] if side == "head" else t[2] for t in ROWS if t[1] == "r0" and (t[2] if side == "head" else t[0]) == q}
    assert known  # the query has training answers to leave out
    scores = _all_scores(run, relation="r0", **ask)
    want = [e for e, _ in sorted(scores.items(), key=lambda kv: -kv[1]) if e not in known]
    got = run.predict(relation="r0", k=len(want), exclude_train=True, **ask)
    assert got[side].tolist() == want  # every other answer, in score order: exactly the known ones left out
    every = run.predict(relation="r0", k=len(scores), **ask)  # without the option nothing is left out
    assert sorted(every[side]) == sorted(scores) and known <= set(every[side])


def test_exclude_train_without_a_recorded_training_file_is_refused(runs):
    run = _open(runs)
    run.data_files.pop("train")
    with pytest.raises(TracegraphError) as e:
        run.predict(head="e1", relation="r0", exclude_train=True)
    assert str(e.value) == f"{run.path}: the run records no training file, so none of its triples can be excluded"


def _command(run, capsys, **given):
    kinds = dict(head=None, tail=None, relation=None, query=None, query_file=None, triples=None)
    predict_command(run, **(kinds | given), top_k=given.pop("top_k", 2), exclude_train=False, output=None)
    return pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))


def test_each_kind_of_query_of_the_command_equals_its_python_form(runs, tmp_path, capsys):
    run = _open(runs)
    one = run.predict(head="e3", relation="r1", k=2)
    pd.testing.assert_frame_equal(_command(run, capsys, head="e3", relation="r1"), one)
    pd.testing.assert_frame_equal(_command(run, capsys, query=["e3", "r1"]), one)
    heads = run.predict(tail="e1", relation="r0", k=2)
    pd.testing.assert_frame_equal(_command(run, capsys, tail="e1", relation="r0"), heads)
    qf = tmp_path / "queries.tsv"
    qf.write_text("e3\tr1\ne6\tr0\n")
    both = run.predict(head=["e3", "e6"], relation=["r1", "r0"], k=2)
    pd.testing.assert_frame_equal(_command(run, capsys, query_file=qf), both)
    tf = tmp_path / "triples.tsv"
    tf.write_text("e0\tr0\te1\ne2\tr1\te7\n")
    scored = _command(run, capsys, triples=tf)
    pd.testing.assert_frame_equal(scored, run.score(tf))
    assert scored["head"].tolist() == ["e0", "e2"]


def test_a_query_file_label_error_names_the_file_and_its_line(runs, tmp_path):
    run = _open(runs)
    qf = tmp_path / "queries.tsv"
    qf.write_text("e3\tr1\ne3\tnope\n")
    with pytest.raises(DataError) as e:
        predict_command(run, None, None, None, None, qf, None, 2, False, None)
    assert str(e.value.path) == str(qf) and e.value.line == 2 and "relation 'nope' is not in the id map" in str(e.value)
    qf.write_text("e3\tr1\tthird\n")
    with pytest.raises(DataError) as e:
        predict_command(run, None, None, None, None, qf, None, 2, False, None)
    assert e.value.line == 1


@pytest.mark.parametrize(
    "given",
    [
        dict(),
        dict(head="e1", relation="r0", query=["e1", "r0"]),
        dict(query=["e1", "r0"], triples="t.tsv"),
        dict(query_file="q.tsv", triples="t.tsv"),
        dict(relation="r0", query_file="q.tsv"),
    ],
)
def test_the_command_takes_exactly_one_kind_of_query(runs, given):
    kinds = dict(head=None, tail=None, relation=None, query=None, query_file=None, triples=None)
    with pytest.raises(TracegraphError) as e:
        predict_command(_open(runs), **(kinds | given), top_k=2, exclude_train=False, output=None)
    assert str(e.value) == (
        "give exactly one of --head H --relation R, --tail T --relation R, --query HEAD RELATION, "
        "--query-file, --triples"
    )


@pytest.mark.parametrize("given", [dict(head="e1"), dict(tail="e1"), dict(relation="r0"), dict(head="e1", tail="e2")])
def test_a_single_query_needs_relation_and_one_side(runs, given):
    kinds = dict(head=None, tail=None, relation=None, query=None, query_file=None, triples=None)
    with pytest.raises(TracegraphError) as e:
        predict_command(_open(runs), **(kinds | given), top_k=2, exclude_train=False, output=None)
    assert str(e.value) == "give --relation with --head (its tails are ranked) or with --tail (its heads are ranked)"


def test_outputs_by_extension_read_back_to_the_frame(tmp_path, capsys):
    frame = pd.DataFrame([("a", "r", 1, "b", 0.5, 0.62), ("a", "r", 2, "c", -1.0, 0.27)], columns=PREDICT_COLUMNS)
    write_predictions(frame, None)
    out = capsys.readouterr().out
    assert out.splitlines() == ["head,relation,rank,tail,score,probability", "a,r,1,b,0.5,0.62", "a,r,2,c,-1.0,0.27"]
    write_predictions(frame, tmp_path / "p.TSV")  # the extension in any case
    assert (tmp_path / "p.TSV").read_text().splitlines()[1] == "a\tr\t1\tb\t0.5\t0.62"
    write_predictions(frame, tmp_path / "p.csv")
    assert (tmp_path / "p.csv").read_bytes().decode() == out
    write_predictions(frame, tmp_path / "p.json")
    assert json.loads((tmp_path / "p.json").read_text()) == [
        dict(zip(PREDICT_COLUMNS, ["a", "r", 1, "b", 0.5, 0.62])),
        dict(zip(PREDICT_COLUMNS, ["a", "r", 2, "c", -1.0, 0.27])),
    ]
    write_predictions(frame.iloc[:0], tmp_path / "none.csv")  # no rows: an empty file, no header
    assert (tmp_path / "none.csv").read_text() == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["none.csv", "p.TSV", "p.csv", "p.json"]


@pytest.mark.parametrize(
    "path,message",
    [
        ("pred.xlsx", "-o pred.xlsx: predict writes .csv, .tsv or .json files, not .xlsx"),
        ("pred", "-o pred: predict writes .csv, .tsv or .json files, not no extension"),
    ],
)
def test_an_output_predict_cannot_write_is_refused_before_writing(tmp_path, path, message):
    with pytest.raises(TracegraphError) as e:
        check_output(path)
    assert str(e.value) == message
    with pytest.raises(TracegraphError):
        write_predictions(pd.DataFrame([("a", "r", 1, "b", 0.5, 0.6)], columns=PREDICT_COLUMNS), tmp_path / path)
    assert list(tmp_path.iterdir()) == []
    check_output(None)
    check_output("x.JSON")


def test_predict_frame_gives_ten_answers_and_leaves_none_out_by_default(runs):
    from tracegraph.kg.predictions import predict_frame

    run = _open(runs)
    top = predict_frame(run, head="e2", relation="r0")
    assert top["rank"].tolist() == list(range(1, 11))
    every = predict_frame(run, head="e2", relation="r0", k=len(run.entities))
    assert "e7" in every["tail"].tolist()  # (e2, r0, e7) is a training triple, kept without exclude_train


def _bad_query_file(run, tmp_path, text):
    qf = tmp_path / "queries.tsv"
    qf.write_text(text)
    with pytest.raises(DataError) as e:
        predict_command(run, None, None, None, None, qf, None, 2, False, None)
    return str(e.value), str(qf)


def test_query_file_errors_say_what_the_file_holds_and_where(runs, tmp_path):
    run = _open(runs)
    msg, qf = _bad_query_file(run, tmp_path, "")
    assert msg == f"{qf}: query file is empty"
    msg, qf = _bad_query_file(run, tmp_path, "e3\tr1\tthird\n")
    assert msg == f"{qf}:1: expected 2 tab-separated fields (head<TAB>relation), found 3"
    msg, qf = _bad_query_file(run, tmp_path, "e3\tr1\ne3\tr0\nnobody\tr0\n")
    assert msg.startswith(f"{qf}:3: entity 'nobody' is not in the id map")
    run.labels.entity_names = {"e1": "twin", "e2": "twin"}  # a name two entities share
    msg, qf = _bad_query_file(run, tmp_path, "twin\tr0\n")
    assert msg == f"{qf}:1: entity 'twin' is the name of 2 entities (e1, e2); give its label"


def test_the_command_passes_exclude_train_and_the_output_file_on(runs, tmp_path):
    run = _open(runs)
    known = {"e7"}  # (e2, r0, e7) is the one training triple of (e2, r0, ?)
    n = len(run.entities) - len(known)
    qf = tmp_path / "q.tsv"
    qf.write_text("e2\tr0\n")
    kinds = dict(head=None, tail=None, relation=None, query=None, query_file=None, triples=None)
    for i, given in enumerate([dict(head="e2", relation="r0"), dict(query=["e2", "r0"]), dict(query_file=qf)]):
        out = tmp_path / f"p{i}.csv"
        predict_command(run, **(kinds | given), top_k=n + 1, exclude_train=True, output=out)
        got = pd.read_csv(out)
        assert len(got) == n and not known & set(got["tail"]), given


def test_a_single_row_is_written_with_its_header(tmp_path):
    frame = pd.DataFrame([("a", "r", 1, "b", 0.5, 0.62)], columns=PREDICT_COLUMNS)
    write_predictions(frame, tmp_path / "one.csv")
    assert (tmp_path / "one.csv").read_text().splitlines() == [",".join(PREDICT_COLUMNS), "a,r,1,b,0.5,0.62"]
