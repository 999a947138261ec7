"""The explanation files the facade writes, and the folder rule, checked on records built by hand (no model)."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from tracegraph.errors import TracegraphError
from tracegraph.kg import outputs
from tracegraph.kg.explain.tracin.explain import ExplainConfig
from tracegraph.kg.explain.tracin.rows import CSV_HEADER, ExplainResult, Explanation

LABELS = ["h", "H", "r", "R", "t", "T", "a", "A", "s", "S", "b", "B"]


def _explanation(name, rows, extra=()):
    cols = [*CSV_HEADER, *extra, "Role"]
    return Explanation(name, {"test_triple": {"head": "h", "rank": 2}}, pd.DataFrame(rows, columns=cols))


def _cfg(**kw):
    return ExplainConfig(model_dir="m", train="t", test_triples="x", **kw)


def test_write_csv_texts_labels_and_writes_scores_exactly(tmp_path):
    p = tmp_path / "x.csv"
    # label columns that are numbers stay as written (str), scores given as ints or numpy become exact floats
    row = [1, 2.5, "r", "R", "t", "T", "a", "A", "s", "S", "b", "B", 3, 0.1 + 0.2, "opponent"]
    outputs.write_csv(p, [tuple(row)], [*CSV_HEADER, "Role"])
    with open(p, newline="", encoding="utf-8") as f:
        got = list(csv.reader(f))
    assert got == [[*CSV_HEADER, "Role"], ["1", "2.5", *row[2:12], "3.0", "0.30000000000000004", "opponent"]]
    assert list(tmp_path.iterdir()) == [p]  # no temporary file left beside it


def test_write_explanations_writes_csv_json_and_summary(tmp_path):
    e1 = _explanation("triple_000_h_t", [LABELS + [0.5, 2.0, "proponent"], LABELS + [-0.25, 1.0, "opponent"]])
    e2 = _explanation("triple_001_h_u", [LABELS + [1.0, 3.0, 7.5, "proponent"]], extra=["MethodScore"])
    out = tmp_path / "deep" / "out"
    written = outputs.write_explanations(ExplainResult([e1, e2], {"method": "tracin", "n": 2}), out)
    assert written == [
        "triple_000_h_t_tracin.csv",
        "triple_000_h_t_tracin.json",
        "triple_001_h_u_tracin.csv",
        "triple_001_h_u_tracin.json",
        "summary.json",
    ]
    assert sorted(p.name for p in out.iterdir()) == sorted(written)
    lines = (out / "triple_000_h_t_tracin.csv").read_text(encoding="utf-8").splitlines()
    assert lines == [
        ",".join([*CSV_HEADER, "Role"]),
        ",".join(LABELS) + ",0.5,2.0,proponent",
        ",".join(LABELS) + ",-0.25,1.0,opponent",
    ]
    j = json.loads((out / "triple_001_h_u_tracin.json").read_text())
    row = dict(zip([*CSV_HEADER, "MethodScore", "Role"], LABELS + [1.0, 3.0, 7.5, "proponent"]))
    assert j == {"test_triple": {"head": "h", "rank": 2}, "rows": [row]}
    assert type(j["rows"][0]["TracInScore"]) is float
    assert json.loads((out / "summary.json").read_text()) == {"method": "tracin", "n": 2}
    assert e1.meta == {"test_triple": {"head": "h", "rank": 2}}  # the record itself is not changed


def test_write_explanations_with_no_explanation_writes_the_summary(tmp_path):
    assert outputs.write_explanations(ExplainResult([], {"n": 0}), tmp_path / "o") == ["summary.json"]


def test_a_missing_or_empty_folder_is_fine(tmp_path):
    outputs.prepare_output_dir(tmp_path / "none", _cfg())
    (tmp_path / "empty").mkdir()
    outputs.prepare_output_dir(tmp_path / "empty", _cfg())
    assert not (tmp_path / "none").exists()


def test_a_folder_in_use_is_refused_unless_overwrite_or_skip(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(TracegraphError) as e:
        outputs.prepare_output_dir(out, _cfg())
    assert str(e.value) == (
        f"{out}: the output folder is not empty; use overwrite=True to replace its "
        f"explanations or skip_existing=True to add to them"
    )
    outputs.prepare_output_dir(out, _cfg(skip_existing=True))  # no summary.json: nothing to compare
    assert (out / "notes.txt").exists()


def test_overwrite_deletes_only_earlier_explanation_files(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    for n in (
        "triple_000_a_b_tracin.csv",
        "triple_000_a_b_tracin.json",
        "summary.json",
        "notes.txt",
        "triple_000_a_b.csv",
        "other_tracin.csv",
    ):
        (out / n).write_text("x")
    outputs.prepare_output_dir(out, _cfg(), overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "other_tracin.csv", "triple_000_a_b.csv"]
    (out / "notes.txt").unlink()
    outputs.prepare_output_dir(out, _cfg(), overwrite=True)  # no summary.json to delete: fine


@pytest.mark.parametrize(
    "key,before,now,kw",
    [
        ("method", "tracin", "tracin-margin-path", {}),
        ("engine", "autograd", "exact", {}),
        ("loss", "train-loss", "logit", {}),
        ("side", "head", "tail", {}),
        ("top_k", 5, 10, {"top_k": 10}),
    ],
)
def test_skip_existing_refuses_a_folder_written_with_other_settings(tmp_path, key, before, now, kw):
    out = tmp_path / "o"
    out.mkdir()
    same = {
        "method": "tracin-margin-path",
        "engine": "exact",
        "loss": "logit",
        "side": "tail",
        "top_k": kw.get("top_k"),
    }
    (out / "summary.json").write_text(json.dumps(dict(same, **{key: before})))
    with pytest.raises(TracegraphError) as e:
        outputs.prepare_output_dir(out, _cfg(skip_existing=True, **kw))
    assert str(e.value) == (
        f"{out}: skip_existing would mix two explanation runs: the folder's {key} is "
        f"{before!r}, this run's {now!r} (use overwrite, or another folder)"
    )
    (out / "summary.json").write_text(json.dumps(same))
    outputs.prepare_output_dir(out, _cfg(skip_existing=True, **kw))  # the same settings: kept


def test_skip_existing_names_the_first_setting_that_differs_and_ignores_unrecorded_ones(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"engine": "vmap", "side": "head", "devices": ["x"]}))
    with pytest.raises(TracegraphError, match="the folder's engine is 'vmap', this run's 'exact'"):
        outputs.prepare_output_dir(out, _cfg(skip_existing=True))
    (out / "summary.json").write_text(json.dumps({"side": "tail", "other": 1}))
    outputs.prepare_output_dir(out, _cfg(skip_existing=True))


def test_the_recorded_method_is_the_default_one_for_the_loss():
    assert outputs._settings(_cfg(loss="train-loss")) == {
        "method": "tracin",
        "engine": "exact",
        "loss": "train-loss",
        "side": "tail",
        "top_k": None,
    }
    assert outputs._settings(_cfg())["method"] == "tracin-margin-path"
    assert outputs._settings(_cfg(method="relatif", engine="vmap", side="head", top_k=3)) == {
        "method": "relatif",
        "engine": "vmap",
        "loss": "logit",
        "side": "head",
        "top_k": 3,
    }


@pytest.mark.parametrize("main", [True, False])
def test_explain_files_writes_only_on_the_main_process(tmp_path, monkeypatch, main):
    seen = {}
    e = _explanation("triple_000_h_t", [LABELS + [0.5, 2.0, "proponent"]])

    def fake(cfg, train_subsets, run=None, questions=None):
        seen.update(cfg=cfg, subsets=train_subsets, run=run, questions=questions)
        return ExplainResult([e], {"n": 1})

    monkeypatch.setattr(outputs, "run_explain", fake)
    monkeypatch.setattr(outputs, "is_main_process", lambda: main)
    cfg = _cfg(output_dir=str(tmp_path / "o"))
    assert outputs.explain_files(cfg, {"k": 1}, run="R", questions="Q") == {"n": 1}
    assert seen == {"cfg": cfg, "subsets": {"k": 1}, "run": "R", "questions": "Q"}
    want = ["summary.json", "triple_000_h_t_tracin.csv", "triple_000_h_t_tracin.json"] if main else []
    if main:
        assert sorted(p.name for p in (tmp_path / "o").iterdir()) == want
    else:
        assert not (tmp_path / "o").exists()


def test_csv_is_utf8_whatever_the_locale(tmp_path):
    # a user under an ASCII locale (no UTF-8 mode) still gets UTF-8 files with non-ASCII labels
    import os
    import subprocess
    import sys

    p = tmp_path / "u.csv"
    code = (
        "import sys; from tracegraph.kg.outputs import write_csv; from tracegraph.kg.explain.tracin.rows import "
        "CSV_HEADER; write_csv(sys.argv[1], [['\\u00e9'] * 12 + [1.0, 2.0]], CSV_HEADER)"
    )
    env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0")
    done = subprocess.run([sys.executable, "-c", code, str(p)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert p.read_bytes().splitlines()[1] == ",".join(["é"] * 12).encode("utf-8") + b",1.0,2.0"


def test_write_explanations_into_an_existing_folder(tmp_path):
    # skip_existing and overwrite runs write into the folder that is already there
    out = tmp_path / "o"
    out.mkdir()
    (out / "triple_000_h_t_tracin.csv").write_text("kept")
    e = _explanation("triple_001_h_u", [LABELS + [0.5, 2.0, "proponent"]])
    assert outputs.write_explanations(ExplainResult([e], {"n": 1}), out)[-1] == "summary.json"
    assert (out / "triple_000_h_t_tracin.csv").read_text() == "kept"
    assert (out / "triple_001_h_u_tracin.csv").is_file()


def test_integer_score_columns_are_written_as_floats(tmp_path):
    # a HeadTailWalk (or any score) column held as integers is written as floats in the JSON as in the CSV
    e = _explanation("triple_000_h_t", [LABELS + [1, 2, 3, 4, "proponent"]], extra=["MethodScore", "HeadTailWalk"])
    assert str(e.rows["HeadTailWalk"].dtype) == "int64"
    outputs.write_explanations(ExplainResult([e], {}), tmp_path)
    row = json.loads((tmp_path / "triple_000_h_t_tracin.json").read_text())["rows"][0]
    assert [type(row[k]) for k in ("TracInScore", "SelfInfluence", "MethodScore", "HeadTailWalk")] == [float] * 4
    assert (tmp_path / "triple_000_h_t_tracin.csv").read_text().splitlines()[1].endswith(",1.0,2.0,3.0,4.0,proponent")
