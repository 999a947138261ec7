"""trees/labelled.py's ``load_dataset`` by hand: a folder of small SWC chains and a labels CSV written
here give the labelled files in name order with their class indices (numeric labels in numeric order),
each item named by its file, files the CSV leaves out skipped with the warning's wording (the first
five names, then an ellipsis), a CSV name without a file refused with its line, unlabelled folders
with ``y = -1``, several trees of one file kept together, and every reading option reaching the reader.
Also the CSV details and split defaults ``test_labels_and_splits_by_hand.py`` leaves out: line breaks
inside a quoted label kept as written (and the rows after it named by their line in the file), the
byte-order-mark note naming the file, a malformed CSV named,
selections keeping the CSV rows, ``splits()``'s defaults (0.3, seed 0) and its refusals word for word.

References: the folder and CSV written out here; expected classes, names and messages by hand.
"""

import logging

import numpy as np
import pytest

import tracegraph.trees.labelled as lab
from tests.conftest import log_lines
from tracegraph.errors import DataError
from tracegraph.trees.data import Tree
from tracegraph.trees.labelled import LabelRow, TreeDataset, load_dataset


def chain(folder, stem, n=4, step=1.0):
    rows = [f"{i + 1} 3 {i * step} 0 0 1 {i if i else -1}" for i in range(n)]
    (folder / f"{stem}.swc").write_text("\n".join(rows) + "\n")


def csv(folder, text):
    p = folder / "labels.csv"
    p.write_text(text)
    return p


def test_labelled_files_in_name_order_with_numeric_classes(tmp_path):
    d = tmp_path / "trees"
    d.mkdir()
    for stem, n in (("c", 3), ("a", 4), ("b", 5)):
        chain(d, stem, n)
    labels = csv(tmp_path, "name,label,split\nc,2,train\na,2,test\nb,10,train\n")
    with log_lines(level=logging.WARNING) as warned:
        ds = load_dataset(d, labels)
    assert warned == []
    assert isinstance(ds, TreeDataset) and ds.names == ["a", "b", "c"] and [x.name for x in ds] == ["a", "b", "c"]
    assert ds.classes == ["2", "10"] and [int(x.y) for x in ds] == [0, 1, 0]
    assert [x.num_nodes for x in ds] == [4, 5, 3]
    assert ds.rows == {
        "c": LabelRow("c", "2", "train", 2),
        "a": LabelRow("a", "2", "test", 3),
        "b": LabelRow("b", "10", "train", 4),
    }
    assert ds.labels_path == str(labels) and ds.splits() == [(["b", "c"], ["a"])]
    assert ds[0].paths.shape == (4, 2)  # a chain of 4: i→j→k→p both ways


def test_files_without_a_label_are_left_out_with_a_warning(tmp_path):
    for stem in ["a", "s1", "s2", "s3", "s4", "s5", "s6"]:
        chain(tmp_path, stem)
    labels = csv(tmp_path / "..", "a,x\n")
    with log_lines(level=logging.WARNING) as warned:
        ds = load_dataset(tmp_path, labels)
    assert ds.names == ["a"] and ds.classes == ["x"]
    assert warned == ["6 tree file(s) have no label and are left out: s1, s2, s3, s4, s5 …"]
    (tmp_path / "s6.swc").unlink()
    with log_lines(level=logging.WARNING) as warned:
        load_dataset(tmp_path, labels)
    assert warned == ["5 tree file(s) have no label and are left out: s1, s2, s3, s4, s5"]


def test_a_label_without_a_file_is_refused_with_its_line(tmp_path):
    d = tmp_path / "trees"
    d.mkdir()
    chain(d, "a")
    labels = csv(tmp_path, "# names\na,x\nzz,y\n")
    with pytest.raises(DataError) as e:
        load_dataset(d, labels)
    assert str(e.value) == f"{labels}:3: no tree file named 'zz' in {d}"


def test_an_unlabelled_folder_gives_every_file_with_y_minus_one(tmp_path):
    for stem in ("b", "a"):
        chain(tmp_path, stem)
    ds = load_dataset(tmp_path)
    assert ds.names == ["a", "b"] and [int(x.y) for x in ds] == [-1, -1]
    assert (ds.classes, ds.rows, ds.labels_path) == ([], {}, None)
    empty = TreeDataset([], [])
    assert (empty.classes, empty.rows, empty.labels_path, empty.names) == ([], {}, None, [])


def test_reading_options_reach_the_reader_and_a_files_trees_stay_together(tmp_path, monkeypatch):
    chain(tmp_path, "a", 5)
    # 0-1-2-3-4 at unit spacing: every 2 units keeps 0, 2, 4
    assert load_dataset(tmp_path, node_spacing=2.0)[0].pos[:, 0].tolist() == [0, 2, 4]
    assert load_dataset(tmp_path, max_nodes=3)[0].num_nodes <= 3
    cache = tmp_path / "cache"
    load_dataset(tmp_path, cache_dir=cache)
    assert len(list(cache.glob("trees-a-*.npz"))) == 1 and len(list(cache.glob("paths-*.npz"))) == 1
    seen = []

    def two_trees(path, cache_dir, **options):
        seen.append((path.name, cache_dir, options))
        return [Tree(np.zeros((1, 3)), np.array([0])), Tree(np.ones((2, 3)), np.array([0, 0]))]

    monkeypatch.setattr(lab, "cached_tree_file", two_trees)
    chain(tmp_path, "b")
    ds = load_dataset(
        tmp_path,
        csv(tmp_path / "..", "a,x\nb,y\n"),
        max_nodes=7,
        node_spacing=0.5,
        trees_per_image=3,
        image_root="disc",
        cache_dir=None,
    )
    options = dict(max_nodes=7, node_spacing=0.5, trees_per_image=3, image_root="disc")
    assert seen == [("a.swc", None, options), ("b.swc", None, options)]
    assert ds.names == ["a", "a", "b", "b"] and [int(x.y) for x in ds] == [0, 0, 1, 1]
    assert [x.num_nodes for x in ds] == [1, 2, 1, 2] and ds.file_labels() == {"a": 0, "b": 1}
    seen.clear()
    load_dataset(tmp_path)
    assert seen[0][2] == dict(max_nodes=300, node_spacing=0.0, trees_per_image=1, image_root="widest")


# ------------------------------------------------------------------------- the CSV and the splits


def test_a_quoted_label_keeps_its_line_break_and_the_bom_note_names_the_file(tmp_path):
    p = tmp_path / "labels.csv"
    p.write_bytes(b'\xef\xbb\xbfa1,"two\r\nlines"\r\na2,y\r\n')
    with log_lines() as lines:
        rows = lab.read_labels(p)
    # the second row starts on the file's third line: the first row took two
    assert rows == [LabelRow("a1", "two\r\nlines", None, 1), LabelRow("a2", "y", None, 3)]
    p.write_text('a1,"x\ny"\n\n# note\na1,z\n')
    with pytest.raises(DataError) as e:
        lab.read_labels(p)
    assert str(e.value) == f"{p}:5: 'a1' is labelled twice (first on line 1)"
    assert lines == [f"{p}:1: removed a UTF-8 byte-order mark"]


def test_a_malformed_csv_is_named(tmp_path):
    p = tmp_path / "labels.csv"
    p.write_text("a1," + "x" * 200_000 + "\n")  # longer than the csv module's field limit
    with pytest.raises(DataError) as e:
        lab.read_labels(p)
    assert str(e.value) == f"{p}: malformed CSV: field larger than field limit (131072)"


def files(n_per_class, split=None):
    """Placeholder items, one per file: class a has n_per_class[0] files, class b n_per_class[1]."""
    from types import SimpleNamespace

    items, names, rows = [], [], {}
    for y, n in enumerate(n_per_class):
        for k in range(n):
            stem = f"{'ab'[y]}{k}"
            items.append(SimpleNamespace(y=y))
            names.append(stem)
            rows[stem] = LabelRow(stem, "ab"[y], split, len(rows) + 2)
    return TreeDataset(items, names, ["a", "b"], rows, "labels.csv")


def test_a_selection_keeps_the_csv_rows():
    d = files([3, 3])
    s = d.select(["a0", "a2", "b1", "b2"])
    assert s.rows == d.rows and s.splits(folds=0, test_fraction=0.5, seed=0)  # a selection can be split again


def test_splits_default_to_three_tenths_and_seed_zero():
    d = files([10, 10])
    ((train, test),) = d.splits()
    assert len(test) == 6 and d.splits() == d.splits(0, 0.3, 0)  # 3 of each class's 10
    assert any(d.splits(seed=s) != d.splits() for s in (1, 2, 3))


def test_split_refusals_through_splits_word_for_word():
    files([2, 2]).splits()  # two files per class are enough for one split
    with pytest.raises(DataError) as e:
        files([2, 1]).splits()
    assert str(e.value) == "labels.csv:4: class 'b' has 1 file(s); a train/test split needs at least 2"
    with pytest.raises(DataError) as e:
        files([3, 2]).splits(folds=3)
    assert str(e.value) == "labels.csv:5: class 'b' has 2 file(s); 3-fold cross-validation needs at least 3"
