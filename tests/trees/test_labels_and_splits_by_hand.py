"""trees/labelled.py by hand: the labels CSV (header, comments, blanks, spaces, case of the split,
byte-order mark, line numbers, every refusal with its line), the order of classes, and what a
dataset's files, selections and splits promise.

References: CSV files and datasets written out here, and the rules as the docstrings state them.
"""

from types import SimpleNamespace

import pytest

from tracegraph.errors import DataError, TracegraphError
from tracegraph.trees.labelled import LabelRow, TreeDataset, _class_order, read_labels


def labels(tmp_path, text, encoding="utf-8"):
    p = tmp_path / "labels.csv"
    p.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return p


def test_rows_skip_header_comments_and_blanks_and_keep_their_lines(tmp_path):
    p = labels(tmp_path, "\ufeffName , LABEL,split\n# a comment\n\n a1 , pyramidal , TEST\na2,basket,train\n,,\n")
    assert read_labels(p) == [LabelRow("a1", "pyramidal", "test", 4), LabelRow("a2", "basket", "train", 5)]
    p = labels(tmp_path, "a1,x\nname,label\n")  # a header only counts before the first row
    assert read_labels(p) == [LabelRow("a1", "x", None, 1), LabelRow("name", "label", None, 2)]
    assert read_labels(labels(tmp_path, "a1,x,\na2,y,\n")) == [
        LabelRow("a1", "x", None, 1),
        LabelRow("a2", "y", None, 2),
    ]


@pytest.mark.parametrize(
    "text,where,message",
    [
        ("a1,x\na2\n", 2, "expected name,label[,split], got 1 fields"),
        ("a1,x,train,extra\n", 1, "expected name,label[,split], got 4 fields"),
        ("a1,x\n ,y\n", 2, "empty name or label"),
        ("a1, \n", 1, "empty name or label"),
        ("a1,x,valid\n", 1, "split must be train or test, not 'valid'"),
        ("# header\na1,x\na2,y\na1,z\n", 4, "'a1' is labelled twice (first on line 2)"),
        ("a1,x,train\na2,y\na3,z,test\n", 2, "give a split for every row or for none"),
        ("a1,x\na2,y,test\n", 2, "give a split for every row or for none"),
        ("name,label\n# nothing\n", None, "no labelled rows"),
    ],
)
def test_each_refusal_names_the_line(tmp_path, text, where, message):
    p = labels(tmp_path, text)
    with pytest.raises(DataError) as e:
        read_labels(p)
    assert str(e.value) == (f"{p}:{where}: {message}" if where else f"{p}: {message}")


def test_a_file_that_is_not_utf8_or_not_there_is_refused(tmp_path):
    p = labels(tmp_path, "a1,caf\xe9\n", encoding="latin-1")
    with pytest.raises(DataError, match=r"labels\.csv: not UTF-8 text: "):
        read_labels(p)
    with pytest.raises(DataError) as e:
        read_labels(tmp_path / "none.csv")
    assert str(e.value) == f"{tmp_path / 'none.csv'}: labels file not found"


def test_numeric_classes_sort_by_value_others_alphabetically():
    assert _class_order({"10", "2", "1.5"}) == ["1.5", "2", "10"]
    assert _class_order({"b", "a", "10"}) == ["10", "a", "b"]


def dataset(files, path="labels.csv"):
    """files: (stem, class index, trees in the file, split or None); CSV lines in this order from 2."""
    items, names, rows = [], [], {}
    for line, (stem, y, n, split) in enumerate(files, start=2):
        items += [SimpleNamespace(y=y, tag=f"{stem}#{i}") for i in range(n)]
        names += [stem] * n
        rows[stem] = LabelRow(stem, ["a", "b", "c"][y], split, line)
    return TreeDataset(items, names, ["a", "b", "c"], rows, path)


def test_files_keep_their_trees_together_when_selected():
    d = dataset([("f1", 0, 2, None), ("f2", 1, 1, None), ("f3", 0, 3, None)])
    assert d.file_labels() == {"f1": 0, "f2": 1, "f3": 0}
    s = d.select(["f3", "f1"])
    assert [x.tag for x in s] == ["f1#0", "f1#1", "f3#0", "f3#1", "f3#2"]  # the dataset's order, whole files
    assert s.names == ["f1", "f1", "f3", "f3", "f3"] and s.classes == d.classes and s.labels_path == d.labels_path
    assert d.select([]) == [] and d.select(["nope"]).names == []


def test_a_class_with_too_few_files_is_named_with_its_first_line():
    d = dataset([("f1", 0, 1, None), ("f2", 1, 4, None), ("f3", 0, 1, None), ("f4", 2, 1, None), ("f5", 2, 1, None)])
    d.require_per_class(1, "anything")
    with pytest.raises(DataError) as e:
        d.require_per_class(2, "a train/test split")
    assert str(e.value) == "labels.csv:3: class 'b' has 1 file(s); a train/test split needs at least 2"
    with pytest.raises(DataError) as e:
        d.require_per_class(3, "3-fold cross-validation")
    assert str(e.value) == "labels.csv:2: class 'a' has 2 file(s); 3-fold cross-validation needs at least 3"


def test_the_csvs_split_is_used_as_given_and_refused_with_folds():
    files = [("f1", 0, 1, "train"), ("f2", 0, 2, "test"), ("f3", 1, 1, "train"), ("f4", 1, 1, "train")]
    d = dataset(files)
    assert d.splits() == [(["f1", "f3", "f4"], ["f2"])]  # even with one test file for two classes
    assert d.splits(test_fraction=0.9, seed=5) == d.splits()  # nothing is drawn
    with pytest.raises(DataError) as e:
        d.splits(folds=2)
    assert str(e.value) == "labels.csv: the labels give a split column; --folds would ignore it (drop one of the two)"
    d = dataset([("f1", 0, 1, "train"), ("f2", 1, 1, "train")])
    with pytest.raises(DataError) as e:
        d.splits()
    assert str(e.value) == "labels.csv: the split leaves no test files"
    d = dataset([("f1", 0, 1, "test")])
    with pytest.raises(DataError, match="the split leaves no training files"):
        d.splits()


@pytest.mark.parametrize("folds", [1, -2])
def test_folds_are_zero_or_at_least_two(folds):
    with pytest.raises(TracegraphError) as e:
        dataset([("f1", 0, 1, None)]).splits(folds=folds)
    assert str(e.value) == f"folds must be 0 (one split) or at least 2, not {folds}"


def test_drawn_splits_and_folds_hold_every_file_once():
    files = [(f"f{i}", i % 3, 1 + i % 2, None) for i in range(12)]
    d = dataset(files)
    ((train, test),) = d.splits(test_fraction=0.25, seed=1)
    assert sorted(train + test) == sorted(f for f, *_ in files) and not set(train) & set(test)
    for y in range(3):  # stratified: every class on both sides
        members = {f for f, c, *_ in files if c == y}
        assert members & set(train) and members & set(test)
    folds = d.splits(folds=4, seed=2)
    assert len(folds) == 4
    held = [f for _, te in folds for f in te]
    assert sorted(held) == sorted(f for f, *_ in files)  # each file held out exactly once
    for tr, te in folds:
        assert sorted(tr + te) == sorted(f for f, *_ in files) and not set(tr) & set(te)
    shuffled = dataset(files[::-1])
    assert {frozenset(te) for _, te in shuffled.splits(folds=4, seed=2)} == {frozenset(te) for _, te in folds}
    assert set(shuffled.splits(test_fraction=0.25, seed=1)[0][1]) == set(test)  # any listing order
