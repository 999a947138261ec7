import ast
import json
from pathlib import Path

import numpy as np
import pytest
from torch_geometric.loader import DataLoader

from tests.conftest import run_cli
from tests.trees.labelled_fixtures import labelled_dir, write_png
from tracegraph.errors import DataError
from tracegraph.trees import load_dataset
from tracegraph.trees.synthetic import synthetic_tree
from tracegraph.trees.files import read_tree_file
from tracegraph.trees.labelled import read_labels
from tracegraph.trees.metrics import classification_report
from tracegraph.trees.skeleton import draw_tree, planar_tree
from tracegraph.trees.splits import stratified_folds, stratified_split


def _two_tree_image(rng, size=128):
    """Two disconnected vessel trees side by side: the right one larger."""
    img = np.zeros((size, 2 * size), dtype=bool)
    img[:, :size] = draw_tree(planar_tree(rng, size=size, depth=3, length=20), (size, size), radius=1)
    img[:, size:] = draw_tree(planar_tree(rng, size=size, depth=5, length=30), (size, size), radius=1)
    return img


# ------------------------------------------------------------------------------ splits


def test_splits_are_reproducible_stratified_and_never_leak_a_file():
    labels = {f"f{i:02d}": i % 3 for i in range(31)}
    a = stratified_split(labels, 0.3, seed=7)
    shuffled = dict(sorted(labels.items(), key=lambda kv: hash(kv[0][::-1])))
    assert stratified_split(shuffled, 0.3, seed=7) == a  # order of listing does not matter
    assert stratified_split(labels, 0.3, seed=8) != a
    assert set(a) == set(labels) and set(a.values()) == {"train", "test"}
    for c in range(3):
        members = [n for n, y in labels.items() if y == c]
        n_test = sum(a[n] == "test" for n in members)
        assert n_test == round(len(members) * 0.3)
    folds = stratified_folds(labels, 4, seed=3)
    assert folds == stratified_folds(shuffled, 4, seed=3) and folds != stratified_folds(labels, 4, seed=4)
    sizes = np.bincount(list(folds.values()))
    assert sizes.max() - sizes.min() <= 1
    for c in range(3):
        per = np.bincount([folds[n] for n, y in labels.items() if y == c], minlength=4)
        assert per.max() - per.min() <= 1


def test_dataset_splits_keep_every_tree_of_a_file_together(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["name,label"]
    for k in range(6):
        write_png(_two_tree_image(rng), tmp_path / f"img{k}.png")
        rows.append(f"img{k},{'ab'[k % 2]}")
    (tmp_path / "l.csv").write_text("\n".join(rows) + "\n")
    ds = load_dataset(tmp_path, tmp_path / "l.csv", trees_per_image=2, max_nodes=40)
    assert len(ds) == 12 and ds.names.count("img0") == 2
    for folds in (0, 3):
        splits = ds.splits(folds=folds, test_fraction=0.34, seed=1)
        assert splits == ds.splits(folds=folds, test_fraction=0.34, seed=1)
        for train, test in splits:
            assert not set(train) & set(test) and set(train) | set(test) == set(ds.names)
            tr, te = ds.select(train), ds.select(test)
            assert len(tr) + len(te) == 12 and not set(tr.names) & set(te.names)
        if folds:  # each file is held out exactly once
            assert sorted(n for _, test in splits for n in test) == sorted(set(ds.names))


# ------------------------------------------------------------------------------ metrics


def test_classification_report_matches_a_naive_count():
    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
    y[y == 3] = 2  # class 3 absent from the truth: excluded from the macro averages
    rep = classification_report(y, p, ["a", "b", "c", "d"])
    f1s, recalls = [], []
    for k, c in enumerate("abcd"):
        tp = sum(1 for t, q in zip(y, p) if t == k and q == k)
        fp = sum(1 for t, q in zip(y, p) if t != k and q == k)
        fn = sum(1 for t, q in zip(y, p) if t == k and q != k)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        assert rep["per_class"][c] == pytest.approx({"precision": prec, "recall": rec, "f1": f1, "support": tp + fn})
        if tp + fn:
            f1s.append(f1), recalls.append(rec)
        for q in range(4):
            assert rep["confusion_matrix"][k][q] == sum(1 for t, r in zip(y, p) if t == k and r == q)
    assert rep["accuracy"] == pytest.approx(np.mean(y == p))
    assert rep["macro_f1"] == pytest.approx(np.mean(f1s)) and rep["balanced_accuracy"] == pytest.approx(
        np.mean(recalls)
    )


# ------------------------------------------------------------------------------ inputs


def test_load_dataset_api_gives_data_with_y_for_a_training_loop(tmp_path):
    d, labels = labelled_dir(tmp_path, per_class=3, max_nodes=30, pngs=2)
    (d / "unlabelled.swc").write_text((d / "c0-0.swc").read_text())
    ds = load_dataset(d, labels=labels, max_nodes=25)
    assert ds.classes == ["graded", "healthy"] and len(ds) == 8 and "unlabelled" not in ds.names
    rows = {r.name: r.label for r in read_labels(labels)}
    for item, name in zip(ds, ds.names):
        assert ds.classes[int(item.y)] == rows[name] and item.name == name and item.num_nodes <= 25
    batch = next(iter(DataLoader(ds, batch_size=8)))
    assert batch.y.shape == (8,) and batch.paths.max() < batch.num_nodes
    unl = load_dataset(d, max_nodes=25)
    assert len(unl) == 9 and all(int(x.y) == -1 for x in unl)


def _edges_by_position(t):
    return {frozenset((tuple(t.pos[c].round(6)), tuple(t.pos[t.parent[c]].round(6)))) for c in range(1, t.num_nodes)}


def test_graph_files_json_and_npz(tmp_path):
    t = synthetic_tree(0, np.random.default_rng(1), max_nodes=40)
    edges = np.stack([np.arange(1, t.num_nodes), t.parent[1:]], 1)
    (tmp_path / "g.json").write_text(json.dumps({"pos": t.pos.tolist(), "edges": edges.tolist(), "root": 0}))
    np.savez(tmp_path / "h.npz", pos=t.pos, edges=edges)
    for f in ("g.json", "h.npz"):
        (u,) = read_tree_file(tmp_path / f, max_nodes=1000)
        assert u.num_nodes == t.num_nodes and np.allclose(u.pos[0], t.pos[0])
        assert _edges_by_position(u) == _edges_by_position(t)  # a tree's spanning tree is itself
    (tmp_path / "bad.json").write_text('{"pos": [[0, 0], [1, 1]]}')
    with pytest.raises(DataError, match="lacks 'edges'") as e:
        read_tree_file(tmp_path / "bad.json")
    assert e.value.path == str(tmp_path / "bad.json")


@pytest.mark.parametrize(
    "csv,line,words",
    [
        ("name,label\nc0-0,a\nnope,b\n", 3, "no tree file named 'nope'"),
        ("c0-0,a\nc0-0,b\n", 2, "labelled twice"),
        ("c0-0,a,val\n", 1, "split must be train or test"),
        ("c0-0,a,train\nc1-0,b\n", 2, "every row or for none"),
        ("c0-0\n", 1, "expected name,label"),
        ("c0-0,a\nc1-0,a\nc0-1,b\n", 3, "class 'b' has 1 file"),
    ],
)
def test_label_errors_name_the_csv_line_through_the_cli(tmp_path, csv, line, words):
    d, _ = labelled_dir(tmp_path, per_class=2, max_nodes=20, pngs=0)
    (tmp_path / "bad.csv").write_text(csv)
    res = run_cli(["trees", "probe", "--trees", d, "--labels", tmp_path / "bad.csv", "--encoder", tmp_path / "x.pt"])
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"bad.csv:{line}:" in out and words in out, out


# ------------------------------------------------------------------------------ import layering


def test_probe_and_train_do_not_import_each_other_for_data():
    pkg = Path(__file__).resolve().parents[2] / "tracegraph" / "trees"

    def imports(mod):
        tree = ast.parse((pkg / f"{mod}.py").read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "tracegraph.trees.probe" not in imports("train")
    assert not {"tracegraph.trees.probe", "tracegraph.trees.train"} & imports("inputs")


# ------------------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_cli_pretrain_finetune_probe_on_a_labelled_directory(tmp_path):
    d, labels = labelled_dir(tmp_path)
    small = ["--max-nodes", 60, "--batch-size", 8]
    res = run_cli(
        [
            "trees",
            "pretrain",
            "--trees",
            d,
            *small,
            "--epochs",
            2,
            "--hidden-channels",
            16,
            "--num-interactions",
            2,
            "--num-rbf",
            8,
            "-o",
            tmp_path / "pre",
        ]
    )
    assert res.exit_code == 0, res.output
    enc = tmp_path / "pre" / "encoder.pt"
    res = run_cli(
        [
            "trees",
            "finetune",
            "--trees",
            d,
            "--labels",
            labels,
            "--encoder",
            enc,
            *small,
            "--epochs",
            2,
            "--compare-random",
            "-o",
            tmp_path / "ft",
        ]
    )
    assert res.exit_code == 0, res.output
    ft = json.loads((tmp_path / "ft" / "metrics.json").read_text())
    assert set(ft["arms"]) == {"pretrained", "random"} and ft["files"] == 26 and ft["trees"] == 26
    assert (tmp_path / "ft" / "random" / "last.pt").exists()
    res = run_cli(
        [
            "trees",
            "probe",
            "--trees",
            d,
            "--labels",
            labels,
            "--encoder",
            enc,
            "--max-nodes",
            60,
            "-o",
            tmp_path / "probe",
        ]
    )
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "probe" / "metrics.json").read_text())
    pre = m["arms"]["pretrained"]
    split = [line.split(",") for line in (tmp_path / "probe" / "split.csv").read_text().splitlines()[1:]]
    held_out = {n for n, _, side in split if side == "test"}
    assert len(split) == 26 and 0 < len(held_out) < 26
    assert pre["n"] == len(held_out)  # one tree per file here: the metrics count held-out trees only
    assert pre["accuracy"] >= 0.75 and pre["balanced_accuracy"] >= 0.75  # chance is 0.5
    assert np.array(pre["confusion_matrix"]).sum() == pre["n"]
    for png in ("confusion.png", "confusion-random.png"):
        assert (tmp_path / "probe" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = run_cli(
        [
            "trees",
            "probe",
            "--trees",
            d,
            "--labels",
            labels,
            "--encoder",
            enc,
            "--max-nodes",
            60,
            "--folds",
            3,
            "--no-compare-random",
        ]
    )
    assert res.exit_code == 0, res.output
    folds = json.loads(res.stdout.strip().splitlines()[-1])
    assert folds["split"] == "3 folds" and folds["pretrained"]["accuracy"] >= 0.75


def test_tree_cache_returns_the_same_trees_and_keys_on_content_and_options(tmp_path, monkeypatch):
    import tracegraph.trees.files as files

    rng = np.random.default_rng(2)
    write_png(_two_tree_image(rng), tmp_path / "eye.png")
    opts = dict(max_nodes=40, node_spacing=3.0, trees_per_image=2, image_root="widest")
    first = files.cached_tree_file(tmp_path / "eye.png", tmp_path / "c", **opts)
    assert len(list((tmp_path / "c").glob("trees-eye-*.npz"))) == 1

    def must_not_read(*a, **k):
        raise AssertionError("read the image although it is cached")

    monkeypatch.setattr(files, "read_tree_file", must_not_read)
    again = files.cached_tree_file(tmp_path / "eye.png", tmp_path / "c", **opts)
    assert len(again) == len(first) == 2
    for a, b in zip(first, again):
        assert np.array_equal(a.pos, b.pos) and np.array_equal(a.parent, b.parent) and a.meta == b.meta
    monkeypatch.undo()
    files.cached_tree_file(tmp_path / "eye.png", tmp_path / "c", **{**opts, "max_nodes": 30})
    write_png(_two_tree_image(rng), tmp_path / "eye.png")  # new content, same name
    files.cached_tree_file(tmp_path / "eye.png", tmp_path / "c", **opts)
    assert len(list((tmp_path / "c").glob("trees-eye-*.npz"))) == 3


def test_missing_directory_labels_file_or_label_option_are_one_line_errors(tmp_path):
    d, labels = labelled_dir(tmp_path, per_class=2, max_nodes=20, pngs=0)
    cases = [
        (["--trees", tmp_path / "nowhere", "--labels", labels], "nowhere: trees directory not found"),
        (["--trees", d, "--labels", tmp_path / "none.csv"], "none.csv: labels file not found"),
        (["--trees", d], "give both --trees DIR and --labels FILE"),
        (["--trees", d, "--labels", labels, "--folds", 1], "folds must be 0 (one split) or at least 2"),
    ]
    for args, words in cases:
        res = run_cli(["trees", "finetune", *args, "-o", tmp_path / "o"])
        assert res.exit_code == 2 and words in " ".join(res.output.split()), res.output
        assert not (tmp_path / "o" / "config.json").exists()  # nothing half-written


def test_finetune_folds_resume_after_an_interrupted_fold_gives_the_same_metrics(tmp_path):
    import shutil

    from tracegraph.trees.inputs import DataConfig
    from tracegraph.trees.labelled_runs import finetune_on_labels
    from tracegraph.trees.train import TrainConfig

    d, labels = labelled_dir(tmp_path, per_class=4, max_nodes=25, pngs=0)
    ds = load_dataset(d, labels, max_nodes=25)

    def cfg():
        return TrainConfig(
            data=DataConfig(None, 0, 25, seed=3),
            epochs=1,
            batch_size=4,
            seed=0,
            encoder=dict(hidden_channels=8, num_interactions=1, num_rbf=4, cutoff=None),
        )

    full = finetune_on_labels(cfg(), None, tmp_path / "a", folds=2, data=ds)
    assert set(full["arms"]) == {"fresh"} and full["arms"]["fresh"]["n"] == 8
    assert len(full["arms"]["fresh"]["folds"]) == 2
    finetune_on_labels(cfg(), None, tmp_path / "b", folds=2, data=ds)
    shutil.rmtree(tmp_path / "b" / "fold-1")  # as if interrupted before the second fold
    again = finetune_on_labels(cfg(), None, tmp_path / "b", folds=2, resume=True, data=ds)
    assert again["arms"] == full["arms"]
    assert (tmp_path / "b" / "split.csv").read_text() == (tmp_path / "a" / "split.csv").read_text()
