"""Which entities ``--unseen`` counts as unseen: those absent from the run's *training file* —
even when a model trained with ``--unseen include`` has ids for them — or, for a run that
recorded no training file, those absent from the model's id map. Head and tail both count."""

from types import SimpleNamespace

import numpy as np
import pytest

from tests.conftest import log_lines
from tracegraph.errors import TracegraphError
from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.data.triples import LabeledTriples
from tracegraph.kg.data.unseen import apply_policy, encode_known, evaluation_triples, unseen_mask

TRAIN = "a\tr\tb\nb\tr\tc\nc\ts\ta\nc\ts\td\n"  # d: only ever a tail
# the model (trained with --unseen include) also has ids for x and y, which train never mentions
MODEL = SimpleNamespace(entities=IdMap(["a", "b", "c", "d", "x", "y"]), relations=IdMap(["r", "s"]))
TEST = "a\tr\tc\nx\tr\ta\nb\ts\ty\nx\ts\ty\nd\tr\ta\n"  # rows 2, 3, 4 mention x or y; d is seen


@pytest.fixture
def files(tmp_path):
    (tmp_path / "train.txt").write_text(TRAIN)
    (tmp_path / "test.txt").write_text(TEST)
    return tmp_path


def test_unseen_means_absent_from_the_training_file_not_from_the_id_map(files):
    ids, rep = evaluation_triples(MODEL, files / "test.txt", "drop", [files / "train.txt"])
    assert ids.tolist() == [[0, 0, 2], [3, 0, 0]]  # a-r-c and d-r-a survive
    assert rep["entities"] == 2 and rep["entity_labels"] == ["x", "y"] and rep["triples"] == {"test": 3}
    assert rep["dropped"] is True
    ids, rep = evaluation_triples(MODEL, files / "test.txt", "include", [files / "train.txt"])
    assert ids.tolist() == [[0, 0, 2], [4, 0, 0], [1, 1, 5], [4, 1, 5], [3, 0, 0]]  # ranked, all of them
    assert rep["entity_labels"] == ["x", "y"] and rep["dropped"] is False
    with pytest.raises(TracegraphError, match=r"test.txt:2: entity 'x' never occurs in the training triples"):
        evaluation_triples(MODEL, files / "test.txt", "error", [files / "train.txt"])


def test_without_a_recorded_training_file_the_id_map_decides(files):
    ids, rep = evaluation_triples(MODEL, files / "test.txt", "drop", [])
    assert len(ids) == 5 and rep["entities"] == 0 and rep["triples"] == {"test": 0}


def test_include_refuses_an_entity_the_model_has_no_id_for(files):
    (files / "test2.txt").write_text("a\tr\tc\nb\tr\tzz\n")
    with pytest.raises(TracegraphError, match=r"test2.txt:2: entity 'zz' is not in the model's id map"):
        evaluation_triples(MODEL, files / "test2.txt", "include", [files / "train.txt"])
    ids, rep = evaluation_triples(MODEL, files / "test2.txt", "drop", [files / "train.txt"])
    assert ids.tolist() == [[0, 0, 2]] and rep["entity_labels"] == ["zz"]


def test_mask_counts_heads_and_tails_by_a_loop():
    rng = np.random.default_rng(0)
    labels = [f"e{i}" for i in range(8)]
    known = set(labels[:5])
    h = [labels[i] for i in rng.integers(0, 8, 40)]
    t = [labels[i] for i in rng.integers(0, 8, 40)]
    lt = LabeledTriples(h, ["r"] * 40, t, np.arange(1, 41), "m")
    want = [not (a in known and b in known) for a, b in zip(h, t)]
    assert unseen_mask(lt, known).tolist() == want
    assert unseen_mask(lt, IdMap(sorted(known))).tolist() == want


def test_report_counts_per_split_by_hand():
    base = IdMap(["a", "b"])
    splits = {
        "valid": LabeledTriples(["a", "n1"], ["r", "r"], ["n2", "b"], np.array([1, 2]), "v"),
        "test": LabeledTriples(["a", "b"], ["r", "r"], ["n1", "a"], np.array([1, 2]), "t"),
    }
    _, _, rep = apply_policy(base, splits, "include")
    assert rep.entities == ["n1", "n2"] and rep.per_split == {"valid": 2, "test": 1}
    assert rep.triples == {"valid": 2, "test": 1}
    assert rep.describe() == (
        "2 entities unseen in train, 2 in valid (2 triples), 1 in test (1 triple): "
        "included (never a training positive) and ranked among all entities"
    )
    # the trained set decides, not the (already extended) map
    ext = IdMap(["a", "b", "n1", "n2"])
    _, out, rep = apply_policy(ext, splits, "drop", trained={"a", "b"})
    assert rep.entities == ["n1", "n2"] and len(out["valid"]) == 0 and len(out["test"]) == 1


def test_filter_sets_keep_only_what_the_maps_know():
    lt = LabeledTriples(["a", "a", "q"], ["r", "zz", "r"], ["b", "b", "b"], np.array([1, 2, 3]), "f")
    assert encode_known(lt, IdMap(["a", "b"]), IdMap(["r"])).tolist() == [[0, 0, 1]]


def test_report_json_and_drop_wording_by_hand():
    labels = [f"n{i:03d}" for i in range(101)]  # more than the JSON lists
    splits = {"test": LabeledTriples(["a"] * 101, ["r"] * 101, labels, np.arange(1, 102), "t.txt")}
    _, out, rep = apply_policy(IdMap(["a"]), splits, "drop")
    assert rep.to_json() == {
        "policy": "drop",
        "entities": 101,
        "entity_labels": labels[:100],
        "entities_per_split": {"test": 101},
        "triples": {"test": 101},
        "dropped": True,
    }
    assert (
        rep.describe()
        == "101 entities unseen in train, 101 in test (101 triples): their triples dropped from evaluation"
    )
    assert out["test"].path == "t.txt" and len(out["test"]) == 0  # the kept part still names its file


def test_error_without_a_training_file_gives_the_id_map_message(files):
    (files / "test2.txt").write_text("a\tr\tc\nb\tr\tzz\n")
    with pytest.raises(TracegraphError, match=r"test2.txt.*2.*'zz'"):
        evaluation_triples(MODEL, files / "test2.txt", "error", [])


def test_evaluation_logs_what_the_policy_did(files):

    from tracegraph.runtime.progress import log

    with log_lines(log) as lines:
        evaluation_triples(MODEL, files / "test.txt", "drop", [files / "train.txt"])
    # x and y, both in test; rows 2, 3, 4 mention one
    assert lines == ["2 entities unseen in train, 2 in test (3 triples): their triples dropped from evaluation"]
