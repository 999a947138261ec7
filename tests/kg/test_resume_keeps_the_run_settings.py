"""What ``--resume`` may change: the settings that decide how long and how a run goes on are
reported as changes, any other difference stops with one message naming the option and both values,
and the data files must be the same bytes (sha256) wherever they now are.

The recorded side is built by hand the way config.json holds it (``train``: the settings, with the
model's nested; ``data_files``: path and sha256 per split), the hashes with hashlib."""

import hashlib
from dataclasses import asdict

import pytest

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.resume_policy import flag, settings_changed
from tracegraph.kg.model.train_config import TrainConfig

# how long to go on, how often to evaluate and save, where and how fast to compute (the module's rule)
MAY_CHANGE = {
    "epochs": 7,
    "patience": 3,
    "min_epochs": 2,
    "eval_every": 5,
    "checkpoint_every": 4,
    "eval_batch_size": 64,
    "device": "cuda",
    "num_workers": 2,
    "memory_cleanup": True,
    "compile": True,
    "cuda_graphs": False,
    "tf32": False,
    "deterministic": True,
    "gradient_checkpointing": True,
}
ONLY = (
    "--epochs, --patience, --min-epochs, --eval-every, --checkpoint-every, --eval-batch-size, --device, "
    "--num-workers, --memory-cleanup, --compile, --cuda-graphs, --tf32, --deterministic, "
    "--gradient-checkpointing"
)


def _cfg(**kw):
    return TrainConfig(**{"train": "train.txt", "output_dir": "run", **kw})


def _recorded(cfg, data_files=None):
    rec = {"train": asdict(cfg)}
    if data_files is not None:
        rec["data_files"] = data_files
    return rec


def _file(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p, {"path": str(p), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def test_option_names_from_setting_names():
    assert flag("learning_rate") == "--learning-rate"
    assert flag("epochs") == "--epochs"
    assert flag("eval_batch_size") == "--eval-batch-size"


@pytest.mark.parametrize("setting", sorted(MAY_CHANGE))
def test_each_resumable_setting_is_reported_with_both_values(setting):
    old = _cfg()
    new = _cfg(**{setting: MAY_CHANGE[setting]})
    assert settings_changed(_recorded(old), new) == [
        {"setting": setting, "old": getattr(old, setting), "new": MAY_CHANGE[setting]}
    ]


def test_several_changes_come_in_the_order_of_the_settings_and_unchanged_ones_are_not_listed():
    old = _cfg(epochs=2, eval_every=1, device="cpu")
    new = _cfg(epochs=9, eval_every=3, device="cpu")
    assert settings_changed(_recorded(old), new) == [
        {"setting": "epochs", "old": 2, "new": 9},
        {"setting": "eval_every", "old": 1, "new": 3},
    ]
    assert settings_changed(_recorded(old), old) == []


def test_a_changed_learning_rate_is_refused_naming_the_option_both_values_and_the_way_on():
    with pytest.raises(TracegraphError) as e:
        settings_changed(_recorded(_cfg(learning_rate=0.003)), _cfg(learning_rate=0.01))
    assert str(e.value) == (
        "--resume: --learning-rate was 0.003 in this run, now 0.01; a resumed run keeps its settings "
        f"(only {ONLY} may change): pass --learning-rate 0.003 to continue, or train a new run into "
        "another --output-dir"
    )


def test_a_changed_model_setting_is_refused_like_a_training_setting():
    old, new = _cfg(model={"embedding_dim": 100}), _cfg(model={"embedding_dim": 200})
    with pytest.raises(TracegraphError, match=r"^--resume: --embedding-dim was 100 in this run, now 200; "):
        settings_changed(_recorded(old), new)


def test_a_changed_epoch_count_is_refused_under_a_cosine_schedule_only():
    with pytest.raises(TracegraphError) as e:
        settings_changed(_recorded(_cfg(epochs=2, lr_scheduler="cosine")), _cfg(epochs=4, lr_scheduler="cosine"))
    assert str(e.value).startswith(
        "--resume: --epochs was 2 in this run, now 4 (the cosine schedule spans the recorded epochs); "
    )
    changes = settings_changed(_recorded(_cfg(epochs=2, lr_scheduler="step")), _cfg(epochs=4, lr_scheduler="step"))
    assert changes == [{"setting": "epochs", "old": 2, "new": 4}]
    with pytest.raises(TracegraphError) as e:  # any other refused setting carries no cosine reason
        settings_changed(_recorded(_cfg(seed=1)), _cfg(seed=2))
    assert "cosine" not in str(e.value) and str(e.value).startswith("--resume: --seed was 1 in this run, now 2; ")


def test_paths_switches_and_preset_names_are_not_compared():
    old = _cfg()
    new = _cfg(
        train="elsewhere/train.txt",
        output_dir="moved",
        valid="v.txt",
        test="t.txt",
        entity_map="e.txt",
        relation_map="r.txt",
        filter_triples=["f.txt"],
        preset="umls",
        preset_sha256="ab" * 32,
        resume=True,
        overwrite=True,
    )
    assert settings_changed(_recorded(old), new) == []


def test_settings_the_record_does_not_hold_are_not_compared():
    rec = _recorded(_cfg())
    del rec["train"]["learning_rate"]
    assert settings_changed(rec, _cfg(learning_rate=0.5)) == []
    assert settings_changed({}, _cfg(learning_rate=0.5)) == []  # no train section: nothing to compare


def test_the_same_data_files_pass_wherever_they_are(tmp_path):
    tr, tr_rec = _file(tmp_path, "a.txt", "h\tr\tt\n")
    va, va_rec = _file(tmp_path, "b.txt", "x\tr\ty\n")
    moved = tmp_path / "moved.txt"
    moved.write_text("h\tr\tt\n")
    rec = _recorded(_cfg(), {"train": tr_rec, "valid": va_rec})
    assert settings_changed(rec, _cfg(train=str(moved), valid=str(va))) == []


def test_a_data_file_with_other_bytes_is_refused(tmp_path):
    tr, tr_rec = _file(tmp_path, "a.txt", "h\tr\tt\n")
    other = tmp_path / "other.txt"
    other.write_text("h\tr\tu\n")
    with pytest.raises(TracegraphError) as e:
        settings_changed(_recorded(_cfg(), {"train": tr_rec}), _cfg(train=str(other)))
    assert str(e.value) == (
        f"--resume: --train {other} is not the file the run was trained with ({tr}, another "
        "sha256); give that file to continue it"
    )


@pytest.mark.parametrize("split", ["valid", "test"])
def test_a_split_given_or_left_out_unlike_the_run_is_refused(tmp_path, split):
    tr, tr_rec = _file(tmp_path, "a.txt", "h\tr\tt\n")
    sp, sp_rec = _file(tmp_path, "s.txt", "x\tr\ty\n")
    with pytest.raises(TracegraphError) as e:  # recorded with the split, resumed without it
        settings_changed(_recorded(_cfg(), {"train": tr_rec, split: sp_rec}), _cfg(train=str(tr)))
    assert str(e.value) == f"--resume: the run was trained with --{split} {sp}; give the same files to continue it"
    with pytest.raises(TracegraphError) as e:  # recorded without it, resumed with it
        settings_changed(_recorded(_cfg(), {"train": tr_rec}), _cfg(train=str(tr), **{split: str(sp)}))
    assert str(e.value) == f"--resume: the run was trained without --{split}; give the same files to continue it"


def test_a_run_without_recorded_hashes_is_not_checked(tmp_path):
    gone = str(tmp_path / "not-there.txt")  # not even read: nothing to compare it with
    assert settings_changed(_recorded(_cfg()), _cfg(train=gone)) == []
    assert settings_changed(_recorded(_cfg(), ["not", "a", "dict"]), _cfg(train=gone)) == []
