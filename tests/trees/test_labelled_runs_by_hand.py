"""trees/labelled_runs.py by hand: ``split.csv`` for one split and for folds, the pooled report and the
folds' means and spreads, ``metrics.json``'s fields (task, classes, counts, how the split was made,
the gain in points), the files written per arm; fine-tuning and probing on a tiny labelled dataset
with the run folders per arm and fold, each arm's pooled report against the predictions of the saved
classifiers (or probes) recomputed here tree by tree, and the refusals word for word.

References: classification figures of small prediction lists worked out by hand in exact fractions;
``split.csv`` written out by hand; per-tree loops over the saved models; the seeded random encoder
rebuilt here from the seed.
"""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from tracegraph.errors import TracegraphError
from tracegraph.runtime.checkpoints import save_checkpoint
from tracegraph.trees.cache import build_dataset
from tracegraph.trees.synthetic import synthetic_trees
from tracegraph.trees.inputs import DataConfig
from tracegraph.trees.labelled import LabelRow, TreeDataset
from tracegraph.trees.labelled_runs import _finish, _summary, load_labelled, probe_on_labels, write_split
from tracegraph.trees.metrics import classification_report
from tracegraph.trees.train import TrainConfig, load_classifier, make_encoder

ENC = dict(hidden_channels=8, num_interactions=1, num_rbf=4)


def names_only(files, split=None):
    """files: (stem, class index); a dataset of placeholders, one item per file, CSV lines from 2."""
    items = [SimpleNamespace(y=y) for _, y in files]
    rows = {s: LabelRow(s, "ab"[y], split, k) for k, (s, y) in enumerate(files, start=2)}
    return TreeDataset(items, [s for s, _ in files], ["a", "b"], rows, "labels.csv")


def test_split_csv_for_one_split_and_for_folds(tmp_path):
    ds = names_only([("f1", 0), ("f2", 1), ("f3", 0)])
    write_split(tmp_path, ds, [(["f1", "f3"], ["f2"])])
    assert (tmp_path / "split.csv").read_text() == "name,label,split\nf1,a,train\nf2,b,test\nf3,a,train\n"
    write_split(tmp_path, ds, [(["f2"], ["f3", "f1"]), (["f1", "f3"], ["f2"])])
    assert (tmp_path / "split.csv").read_text() == "name,label,fold\nf3,a,0\nf1,a,0\nf2,b,1\n"


def test_the_pooled_report_and_the_folds_mean_and_spread():
    ds = names_only([("f1", 0), ("f2", 1)])
    # fold 0: true a a b, predicted a b b: accuracy 2/3, recalls 1/2 and 1, F1 2/3 and 2/3
    # fold 1: true b a, predicted b a: all 1
    folds = [(np.array([0, 0, 1]), np.array([0, 1, 1])), (np.array([1, 0]), np.array([1, 0]))]
    rep = _summary(ds, folds)
    # pooled: true a a b b a, predicted a b b b a: accuracy 4/5, recalls 2/3 and 1, F1 0.8 and 0.8
    assert (rep["n"], rep["accuracy"], rep["balanced_accuracy"], rep["macro_f1"]) == pytest.approx((5, 0.8, 5 / 6, 0.8))
    assert rep["folds"] == [
        pytest.approx({"accuracy": 2 / 3, "balanced_accuracy": 0.75, "macro_f1": 2 / 3}),
        {"accuracy": 1.0, "balanced_accuracy": 1.0, "macro_f1": 1.0},
    ]
    assert rep["accuracy_fold_mean"] == pytest.approx(5 / 6) and rep["accuracy_fold_std"] == pytest.approx(1 / 6)
    assert rep["balanced_accuracy_fold_mean"] == pytest.approx(0.875)
    assert rep["balanced_accuracy_fold_std"] == pytest.approx(0.125)
    assert rep["macro_f1_fold_mean"] == pytest.approx(5 / 6) and rep["macro_f1_fold_std"] == pytest.approx(1 / 6)
    one = _summary(ds, folds[:1])
    assert "folds" not in one and not any(k.endswith("_fold_mean") for k in one)
    assert one["accuracy"] == pytest.approx(2 / 3)


def test_metrics_json_fields_gain_and_files_per_arm(tmp_path):
    ds = names_only([("f1", 0), ("f2", 1), ("f3", 0)])
    ds.append(SimpleNamespace(y=0))  # a second tree of f3
    ds.names.append("f3")
    pre = classification_report([0, 1, 0], [0, 1, 0], ["a", "b"])
    rnd = classification_report([0, 1, 0], [0, 0, 0], ["a", "b"])  # accuracy 2/3, balanced 1/2, F1 (0.8 + 0) / 2
    splits = [(["f1", "f3"], ["f2"])]
    res = _finish(tmp_path / "new", ds, splits, {"pretrained": pre, "random": rnd}, "probe", 7)
    _finish(tmp_path / "deep" / "er", ds, splits, {"pretrained": pre}, "probe", 7)  # folders on the way are made
    assert (tmp_path / "deep" / "er" / "metrics.json").exists()
    (tmp_path / "deep" / "er" / "metrics.json").unlink()
    for f in (tmp_path / "deep" / "er").iterdir():
        f.unlink()
    (tmp_path / "deep" / "er").rmdir()
    (tmp_path / "deep").rmdir()
    assert {k: res[k] for k in ("task", "classes", "files", "trees", "split", "seed")} == {
        "task": "probe",
        "classes": ["a", "b"],
        "files": 3,
        "trees": 4,
        "split": "stratified",
        "seed": 7,
    }
    assert res["gain_points"] == pytest.approx({"accuracy": 100 / 3, "balanced_accuracy": 50.0, "macro_f1": 60.0})
    assert res["arms"] == {"pretrained": pre, "random": rnd}
    assert json.loads((tmp_path / "new" / "metrics.json").read_text()) == res
    assert (tmp_path / "new" / "split.csv").read_text().startswith("name,label,split\n")
    for png in ("confusion.png", "confusion-random.png"):
        assert (tmp_path / "new" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = _finish(tmp_path / "fresh", ds, splits + splits, {"fresh": pre}, "finetune", 0)
    assert res["split"] == "2 folds" and "gain_points" not in res and res["task"] == "finetune"
    assert sorted(p.name for p in (tmp_path / "fresh").iterdir()) == ["confusion.png", "metrics.json", "split.csv"]
    given = names_only([("f1", 0), ("f2", 1)], split="train")
    assert _finish(None, given, splits, {"pretrained": pre}, "probe", 0)["split"] == "from the labels file"
    assert not (tmp_path / "None").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "new"]


def test_load_labelled_needs_both_folder_and_labels(tmp_path):
    for dc in (DataConfig(trees_dir=str(tmp_path)), DataConfig(labels="l.csv"), DataConfig()):
        with pytest.raises(TracegraphError) as e:
            load_labelled(dc)
        assert str(e.value) == "give both --trees DIR and --labels FILE"
    (tmp_path / "a.swc").write_text("1 1 0 0 0 1 -1\n2 1 1 0 0 1 1\n3 1 1 3 0 1 2\n")
    (tmp_path / "b.swc").write_text("1 1 0 0 0 1 -1\n2 1 1 0 0 1 1\n")  # not labelled: left out
    (tmp_path / "l.csv").write_text("a,x\n")
    ds = load_labelled(DataConfig(trees_dir=str(tmp_path), labels=str(tmp_path / "l.csv"), node_spacing=2.5))
    # arc lengths 1 then 3 at a spacing of 2.5: the middle point goes, the leaf stays
    assert ds.names == ["a"] and ds.classes == ["x"] and ds[0].pos[:, :2].tolist() == [[0, 0], [1, 3]]


# ------------------------------------------------------------------------- runs on tiny data


@pytest.fixture(scope="module")
def tiny():
    """Six files of two classes (file f5 holds two trees), classes interleaved as synthetic_trees grows them."""
    items = build_dataset(synthetic_trees(4, seed=1, max_nodes=10))[:7]
    names = ["f0", "f1", "f2", "f3", "f4", "f5", "f5"]
    ys = [0, 1, 0, 1, 0, 1, 1]
    for d, y in zip(items, ys):
        d.y = torch.tensor([y])
    rows = {f"f{k}": LabelRow(f"f{k}", "ab"[k % 2], None, k + 2) for k in range(6)}
    return TreeDataset(items, names, ["a", "b"], rows, "labels.csv")


@pytest.fixture(scope="module")
def encoder_file(tmp_path_factory):
    torch.manual_seed(0)
    enc = make_encoder(dict(ENC, cutoff=1.5))
    p = tmp_path_factory.mktemp("enc") / "encoder.pt"
    save_checkpoint(p, {"encoder_config": enc.cfg.to_dict(), "encoder": enc.state_dict()})
    return p


def per_tree(model, items):
    with torch.no_grad():
        return np.array([int(model(Batch.from_data_list([d])).argmax()) for d in items])


def test_fine_tuning_per_fold_and_arm_against_the_saved_classifiers(tiny, encoder_file, tmp_path):
    from tracegraph.trees.labelled_runs import finetune_on_labels

    cfg = TrainConfig(data=DataConfig(seed=0), encoder=dict(ENC), epochs=1, batch_size=4, device="cpu")
    res = finetune_on_labels(cfg, encoder_file, tmp_path, folds=2, compare_random=True, data=tiny)
    splits = tiny.splits(2, 0.3, 0)
    assert list(res["arms"]) == ["pretrained", "random"] and res["split"] == "2 folds"
    for arm, base in (("pretrained", tmp_path), ("random", tmp_path / "random")):
        folds = []
        for k, (_, test_files) in enumerate(splits):
            model = load_classifier(base / f"fold-{k}" / "last.pt")
            assert model.head[2].out_features == 2
            test = tiny.select(test_files)
            folds.append((np.array([int(d.y) for d in test]), per_tree(model, test)))
        assert res["arms"][arm] == _summary(tiny, folds)
        assert res["arms"][arm]["n"] == 7  # every tree tested once
    random_cfg = json.loads((tmp_path / "random" / "fold-0" / "config.json").read_text())
    pre = torch.load(encoder_file, weights_only=True)
    assert random_cfg["encoder"] == pre["encoder_config"]  # the pretrained architecture and cutoff
    assert cfg.encoder == ENC  # the caller's config left alone
    assert json.loads((tmp_path / "metrics.json").read_text()) == res
    with pytest.raises(TracegraphError) as e:
        finetune_on_labels(cfg, None, tmp_path / "x", compare_random=True, data=tiny)
    assert str(e.value) == "--compare-random needs --encoder (the pretrained encoder to compare with)"
    one = finetune_on_labels(cfg, None, tmp_path / "one", test_fraction=0.5, data=tiny)
    assert list(one["arms"]) == ["fresh"] and (tmp_path / "one" / "last.pt").exists()
    ((_, test_files),) = tiny.splits(0, 0.5, 0)
    test = tiny.select(test_files)
    ref = _summary(
        tiny, [(np.array([int(d.y) for d in test]), per_tree(load_classifier(tmp_path / "one" / "last.pt"), test))]
    )
    assert one["arms"]["fresh"] == ref and one["split"] == "stratified"


def test_probing_per_fold_against_probes_fitted_here(tiny, encoder_file, tmp_path):
    from tracegraph.trees.probe import embed, linear_probe_predict
    from tracegraph.trees.train import load_encoder

    res = probe_on_labels(encoder_file, tiny, tmp_path, folds=3, seed=5)
    spec = load_encoder(encoder_file).cfg.to_dict()
    torch.manual_seed(5)  # the random arm: the pretrained architecture, weights seeded by the seed
    random_enc = make_encoder(spec)
    for arm, enc in (("pretrained", load_encoder(encoder_file)), ("random", random_enc)):
        folds = []
        for train_files, test_files in tiny.splits(3, 0.3, 5):
            # each side's trees in the order its files are listed, as the probe reads them
            tr = [d for n in train_files for d, m in zip(tiny, tiny.names) if m == n]
            te = [d for n in test_files for d, m in zip(tiny, tiny.names) if m == n]
            (xtr, ytr), (xte, yte) = embed(enc, tr), embed(enc, te)
            folds.append((yte.numpy(), linear_probe_predict(xtr, ytr, xte, 2).numpy()))
        assert res["arms"][arm] == _summary(tiny, folds), arm
    assert res["gain_points"] == pytest.approx(
        {k: 100 * (res["arms"]["pretrained"][k] - res["arms"]["random"][k]) for k in res["gain_points"]}
    )
    assert json.loads((tmp_path / "metrics.json").read_text()) == res and res["seed"] == 5
    alone = probe_on_labels(encoder_file, tiny, compare_random=False, seed=5, folds=3)
    assert list(alone["arms"]) == ["pretrained"] and "gain_points" not in alone
    assert alone["arms"]["pretrained"] == res["arms"]["pretrained"]


def test_each_fold_is_fine_tuned_on_its_own_files_and_resumes(tiny, encoder_file, tmp_path, monkeypatch):
    import tracegraph.trees.train as tt
    from tracegraph.trees.labelled_runs import finetune_on_labels

    real, calls = tt.finetune, []

    def recording(cfg, encoder_path, output_dir, resume=False, data=None, num_classes=None):
        calls.append(
            (encoder_path, output_dir, resume, [d.name for d in data[0]], [d.name for d in data[1]], num_classes)
        )
        return real(cfg, encoder_path, output_dir, resume=resume, data=data, num_classes=num_classes)

    monkeypatch.setattr(tt, "finetune", recording)
    for d, n in zip(tiny, tiny.names):
        d.name = n
    cfg = TrainConfig(data=DataConfig(seed=3), encoder=dict(ENC), epochs=1, batch_size=4, device="cpu")
    cfg.freeze_encoder = True
    first = finetune_on_labels(cfg, encoder_file, tmp_path, folds=2, data=tiny)
    assert (first["task"], first["seed"], first["split"]) == ("finetune", 3, "2 folds")
    splits = tiny.splits(2, 0.3, 3)  # the data config's seed
    expected = []
    for k, (train, test) in enumerate(splits):
        by_file = lambda files: [n for n in tiny.names if n in files]  # noqa: E731
        expected.append((encoder_file, tmp_path / f"fold-{k}", False, by_file(train), by_file(test), 2))
    assert calls == expected
    lines = ["name,label,fold"] + [f"{n},{tiny.rows[n].label},{k}" for k, (_, te) in enumerate(splits) for n in te]
    assert (tmp_path / "split.csv").read_text() == "\n".join(lines) + "\n"
    pre = torch.load(encoder_file, weights_only=True)["encoder"]
    tuned = load_classifier(tmp_path / "fold-0" / "last.pt").encoder.state_dict()
    assert all(torch.equal(pre[k], tuned[k]) for k in pre)  # the frozen pretrained encoder, not a fresh one
    with pytest.raises(TracegraphError, match="already holds a run"):  # no resume unless asked
        finetune_on_labels(cfg, encoder_file, tmp_path, folds=2, data=tiny)
    # an interruption after fold 0: --resume continues fold 0 and starts fold 1
    import shutil

    shutil.rmtree(tmp_path / "fold-1")
    calls.clear()
    again = finetune_on_labels(cfg, encoder_file, tmp_path, folds=2, data=tiny, resume=True)
    assert [c[2] for c in calls] == [True, False] and again == first


def test_fine_tuning_reads_the_folder_its_config_names(tmp_path):
    from tracegraph.trees.labelled_runs import finetune_on_labels

    d = tmp_path / "trees"
    d.mkdir()
    for k in range(4):
        rows = [f"{i + 1} 3 {i * (1 + k)} 0 0 1 {i if i else -1}" for i in range(5)]
        (d / f"t{k}.swc").write_text("\n".join(rows) + "\n")
    (tmp_path / "l.csv").write_text("t0,x\nt1,y\nt2,x\nt3,y\n")
    dc = DataConfig(trees_dir=str(d), labels=str(tmp_path / "l.csv"))
    cfg = TrainConfig(data=dc, encoder=dict(ENC), epochs=1, batch_size=4, device="cpu")
    res = finetune_on_labels(cfg, None, tmp_path / "out", test_fraction=0.5)
    assert res["classes"] == ["x", "y"] and res["files"] == 4 and res["arms"]["fresh"]["n"] == 2


def test_probing_defaults_one_stratified_split_seed_zero_with_a_random_twin(tiny, encoder_file):
    res = probe_on_labels(encoder_file, tiny)
    ((_, test_files),) = tiny.splits(0, 0.3, 0)
    assert (res["task"], res["seed"], res["split"]) == ("probe", 0, "stratified")
    assert list(res["arms"]) == ["pretrained", "random"]
    assert res["arms"]["random"]["n"] == sum(n in test_files for n in tiny.names)
