"""`tracegraph tune`: tiny Optuna studies on UMLS, on CPU."""

import hashlib
import json

import pytest

from tests.conftest import run_cli

optuna = pytest.importorskip("optuna")

SPACE = {
    "format": "tracegraph-search-space",
    "version": 1,
    "preset": "umls",
    "fixed": {
        "epochs": 2,
        "batch_size": 512,
        "embedding_dim": 12,
        "embedding_height": 3,
        "embedding_width": 4,
        "output_channels": 4,
    },
    "params": {
        "learning_rate": {"type": "float", "low": 0.001, "high": 0.02, "log": True},
        "output_dropout": {"type": "float", "low": 0.0, "high": 0.5},
    },
}


def _tune(umls_dir, out, space_file, trials, *extra):
    return run_cli(
        [
            "tune",
            "--train",
            umls_dir / "train.txt",
            "--valid",
            umls_dir / "valid.txt",
            "--search-space",
            space_file,
            "-o",
            out,
            "--trials",
            trials,
            "--devices",
            "cpu",
            "--num-threads",
            "1",
            *extra,
        ]
    )


@pytest.mark.slow
def test_tune_writes_a_preset_train_accepts_and_resumes(umls_dir, tmp_path):
    space = tmp_path / "space.json"
    space.write_text(json.dumps(SPACE, indent=1))
    out = tmp_path / "study"
    res = _tune(umls_dir, out, space, 2, "--test", umls_dir / "test.txt")
    assert res.exit_code == 0, res.stderr
    study = optuna.load_study(study_name="tracegraph", storage=f"sqlite:///{out / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(study.trials) == 2 and len(done) == 2  # no pruning before 5 finished trials
    best = max(done, key=lambda t: t.value)
    summary = json.loads((out / "tune_summary.json").read_text())
    assert summary["best_trial"] == best.number and summary["best_valid_mrr"] == pytest.approx(best.value)
    assert "test" in summary and 0 < summary["test"]["both"]["mrr"] <= 1
    # every trial reported valid MRR after each of its 2 evaluations (what the pruner sees)
    assert all(sorted(t.intermediate_values) == [1, 2] for t in done)
    preset = json.loads((out / "best_preset.json").read_text())
    for k, v in best.params.items():
        assert preset["settings"][k] == pytest.approx(v)
    assert preset["settings"]["lr_scheduler"] == "plateau"  # from the base preset
    best_dir = out / "trials" / f"trial_{best.number:04d}"
    assert not (best_dir / "checkpoints").exists()  # trials keep best_model.pt only
    assert not (best_dir / "test_results.json").exists()  # no trial looks at test
    # the valid MRR a trial reports is the standard one: test triples filtered out too
    res = run_cli(
        [
            "evaluate",
            "--model-dir",
            best_dir,
            "--test",
            umls_dir / "valid.txt",
            "-o",
            tmp_path / "ev",
            "--filter",
            umls_dir / "train.txt",
            "--filter",
            umls_dir / "test.txt",
            "--device",
            "cpu",
        ]
    )
    assert res.exit_code == 0, res.stderr
    ev = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert ev["metrics"]["both"]["mrr"] == pytest.approx(best.value, rel=1e-6)

    # the best preset trains as is
    run = tmp_path / "again"
    res = run_cli(
        [
            "train",
            "--train",
            umls_dir / "train.txt",
            "-o",
            run,
            "--preset",
            out / "best_preset.json",
            "--epochs",
            "1",
            "--device",
            "cpu",
        ]
    )
    assert res.exit_code == 0, res.stderr
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["train"]["learning_rate"] == pytest.approx(best.params["learning_rate"])
    assert cfg["train"]["preset_sha256"] == hashlib.sha256((out / "best_preset.json").read_bytes()).hexdigest()

    # resume: the same command with --trials 3 runs exactly one more trial in the same study
    res = _tune(umls_dir, out, space, 3)
    assert res.exit_code == 0, res.stderr
    study = optuna.load_study(study_name="tracegraph", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.number for t in study.trials] == [0, 1, 2]
    res = _tune(umls_dir, out, space, 3)  # already holds 3: nothing to run
    assert (
        res.exit_code == 0
        and len(optuna.load_study(study_name="tracegraph", storage=f"sqlite:///{out / 'study.db'}").trials) == 3
    )


def test_bad_search_space_names_file_and_line(umls_dir, tmp_path):
    space = tmp_path / "space.json"
    bad = dict(SPACE, params={"learning_rate": {"type": "float", "low": 0.1, "high": 0.01}})
    space.write_text(json.dumps(bad, indent=1))
    res = _tune(umls_dir, tmp_path / "o", space, 1)
    assert res.exit_code == 2
    line = next(i for i, s in enumerate(space.read_text().splitlines(), 1) if '"learning_rate"' in s)
    assert f"space.json:{line}: learning_rate: needs numeric" in res.stderr
    space.write_text(json.dumps(dict(SPACE, params={"learnig_rate": {"type": "float", "low": 0.1, "high": 1}})))
    res = _tune(umls_dir, tmp_path / "o", space, 1)
    assert res.exit_code == 2 and "unknown setting 'learnig_rate'" in res.stderr


def test_missing_optuna_says_how_to_install(umls_dir, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "optuna", None)  # makes `import optuna` raise ImportError
    space = tmp_path / "space.json"
    space.write_text(json.dumps(SPACE))
    res = _tune(umls_dir, tmp_path / "o", space, 1)
    assert res.exit_code == 2 and "pip install 'tracegraph[tune]'" in res.stderr


@pytest.mark.slow
def test_two_workers_share_one_study(umls_dir, tmp_path):
    space = tmp_path / "space.json"
    space.write_text(json.dumps(dict(SPACE, fixed=dict(SPACE["fixed"], epochs=1))))
    out = tmp_path / "study"
    res = run_cli(
        [
            "tune",
            "--train",
            umls_dir / "train.txt",
            "--valid",
            umls_dir / "valid.txt",
            "--search-space",
            space,
            "-o",
            out,
            "--trials",
            2,
            "--devices",
            "cpu,cpu",
            "--num-threads",
            1,
        ]
    )
    assert res.exit_code == 0, res.stderr
    study = optuna.load_study(study_name="tracegraph", storage=f"sqlite:///{out / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    # each worker finishes the trial it started: 2, or 3 when both started before either ended
    assert 2 <= len(done) <= 3 and len(study.trials) == len(done)
    assert len({t.params["learning_rate"] for t in done}) == len(done)  # workers sample with their own seeds


def test_a_study_whose_trials_all_fail_stops_with_an_error(umls_dir, tmp_path):
    # every trial is misconfigured (the CE loss has no fused variant): Optuna would retry forever,
    # since failed trials never count towards --trials; tune gives up after max(3, trials) failures
    space = dict(SPACE, fixed=dict(SPACE["fixed"], epochs=1, loss="ce", loss_impl="fused"))
    (tmp_path / "space.json").write_text(json.dumps(space))
    res = _tune(umls_dir, tmp_path / "study", tmp_path / "space.json", 2)
    assert res.exit_code == 2 and "3 trials failed" in res.stderr, res.stderr
    study = optuna.load_study(study_name="tracegraph", storage=f"sqlite:///{tmp_path / 'study' / 'study.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL] * 3
