"""RunStore (kg/model/store.py) on a 3-epoch run of the 10-triple graph: checkpoints in epoch order
with the learning rate each epoch used, the history over the file, each file read once and the
least recently used dropped past the budget, label triples in every accepted form, the filter;
a run without config.json or history (empty config, label smoothing 0, rates from the checkpoints),
the recorded label smoothing, and readable names from label files recorded by hand in config.json."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tests.kg.tiny_graph import ENT, REL, TEST, TRIPLES, cfg, ids
from tracegraph.errors import TracegraphError
from tracegraph.kg.model.store import RunStore, label_columns
from tracegraph.kg.model.train import train
from tracegraph.runtime.checkpoints import load_checkpoint


@pytest.fixture(scope="module")
def run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("store") / "run"
    train(cfg(data, out, epochs=3, lr_decay=0.5, valid=str(data / "valid.txt"), test=str(data / "test.txt")))
    return out


def test_checkpoints_in_epoch_order_with_each_epochs_learning_rate(run):
    s = RunStore(run)
    assert [(c.path.name, c.epoch) for c in s.checkpoints] == [(f"epoch_000{e}.pt", e) for e in (1, 2, 3)]
    # lr 0.01 halved after every epoch: the rate each epoch trained with
    assert [c.lr for c in s.checkpoints] == pytest.approx([0.01, 0.005, 0.0025])


def test_the_history_gives_the_rate_without_reading_the_checkpoint(run, monkeypatch):
    s = RunStore(run)
    monkeypatch.setattr(s, "read_checkpoint", lambda *a, **k: pytest.fail("read a checkpoint for its rate"))
    assert s.checkpoint_info(run / "checkpoints" / "epoch_0002.pt").lr == pytest.approx(0.005)


def test_without_a_history_the_rate_comes_from_the_checkpoint(run, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    history = json.loads((copy / "training_history.json").read_text())
    (copy / "training_history.json").write_text(
        json.dumps([{k: v for k, v in h.items() if k != "lr"} for h in history])
    )
    s = RunStore(copy)
    want = [float(load_checkpoint(p)["lr"]) for p in sorted((copy / "checkpoints").glob("epoch_*.pt"))]
    assert [c.lr for c in s.checkpoints] == want == pytest.approx([0.01, 0.005, 0.0025])


def test_each_checkpoint_is_read_once_and_the_least_recently_used_is_dropped(run, monkeypatch):
    import tracegraph.kg.model.store as store_module

    reads = []
    real = store_module.load_checkpoint
    monkeypatch.setattr(store_module, "load_checkpoint", lambda p, **k: reads.append(p.name) or real(p, **k))
    paths = sorted((run / "checkpoints").glob("epoch_*.pt"))
    one = sum(t.numel() * t.element_size() for t in real(paths[0])["model"].values())
    s = RunStore(run, cache_bytes=2 * one)  # room for two checkpoints' weights
    a = s.read_checkpoint(paths[0])
    assert s.read_checkpoint(paths[0]) is a and reads == ["epoch_0001.pt"]
    assert set(a) <= {"model", "model_config", "epoch", "lr"}  # no optimizer state kept
    s.read_checkpoint(paths[1])
    s.read_checkpoint(paths[0])  # 1 is now the most recently used
    s.read_checkpoint(paths[2])  # over budget: 2, the least recently used, goes
    reads.clear()
    s.read_checkpoint(paths[0])
    s.read_checkpoint(paths[2])
    assert reads == []
    s.read_checkpoint(paths[1])
    assert reads == ["epoch_0002.pt"]


def test_a_model_is_built_once_per_device_in_eval_mode(run):
    s = RunStore(run)
    path = run / "checkpoints" / "epoch_0002.pt"
    m, info = s.load(path)
    assert not m.training and info.epoch == 2 and s.load(path)[0] is m
    assert s.load(path, "meta")[0] is not m and next(s.load(path, "meta")[0].parameters()).device.type == "meta"


def test_encode_accepts_files_frames_and_tuples(run, data):
    s = RunStore(run)
    want = np.array(ids(TEST))
    assert np.array_equal(s.encode(data / "test.txt"), want)
    assert np.array_equal(s.encode(TEST), want)
    frame = pd.DataFrame(TEST, columns=["head", "relation", "tail"])[["tail", "head", "relation"]]
    assert np.array_equal(s.encode(frame), want)  # named columns win over their order
    assert np.array_equal(s.encode(pd.DataFrame(TEST, columns=["a", "b", "c"])), want)  # else the first three
    assert s.encode([]).shape == (0, 3)
    with pytest.raises(TracegraphError, match=r"expected \(head, relation, tail\) triples, got \('e0', 'r0'\)"):
        s.encode([("e0", "r0", "e1"), ("e0", "r0")])
    for labels in (["e0", "r0", "e1"], ["abc", "def", "ghi"]):  # not split into letters, even three of them
        with pytest.raises(TracegraphError) as e:
            s.encode(labels)
        assert str(e.value) == (
            f"expected (head, relation, tail) triples, got the label {labels[0]!r}: "
            "give one triple as a tuple, several as a list of tuples"
        )


def test_label_columns_turn_every_label_into_text():
    assert label_columns([(1, "r", 2.5)], 3) == [["1"], ["r"], ["2.5"]]
    assert label_columns(pd.DataFrame({"x": [1], "y": ["a"]}), 2) == [["1"], ["a"]]


def test_known_tails_are_the_files_triples_and_their_reciprocals(run, data):
    s = RunStore(run)
    known = s.known_tails([data / "train.txt", TEST])
    R = len(REL)
    truth = ids(TRIPLES) + ids(TEST)
    for h in range(len(ENT)):
        for r in range(2 * R):
            want = sorted(
                {t for hh, rr, t in truth if (hh, rr) == (h, r)} | {hh for hh, rr, t in truth if (t, rr + R) == (h, r)}
            )
            assert known.tails_of(h, r).tolist() == want, (h, r)


def test_known_tails_leave_out_every_copy_of_the_triples_named_and_their_reciprocals(run, data, tmp_path):
    s = RunStore(run)
    f = tmp_path / "extra.txt"
    f.write_text("e0\tr0\te1\nnew\tr0\te1\n")  # a second copy of a training triple; an unseen entity
    gone = ids([("e0", "r0", "e1"), ("e5", "r1", "e1")])
    known = s.known_tails([data / "train.txt", f], leave_out=np.array(gone))
    R = len(REL)
    truth = [t for t in ids(TRIPLES) if t not in gone]
    for h in range(len(ENT)):
        for r in range(2 * R):
            want = sorted(
                {t for hh, rr, t in truth if (hh, rr) == (h, r)} | {hh for hh, rr, t in truth if (t, rr + R) == (h, r)}
            )
            assert known.tails_of(h, r).tolist() == want, (h, r)


def test_opening_reads_no_weights_and_a_checkpoint_file_means_that_checkpoint(run, monkeypatch):
    import tracegraph.kg.model.store as store_module

    monkeypatch.setattr(store_module, "load_checkpoint", lambda *a, **k: pytest.fail("read weights at open"))
    s = RunStore(run)
    assert (
        s.checkpoint == run / "best_model.pt" and s.path == run and repr(s) == f"RunStore({str(run)!r}, device='cpu')"
    )
    one = RunStore(run / "checkpoints" / "epoch_0002.pt")
    assert one.checkpoint.name == "epoch_0002.pt" and one.path == run  # the run it belongs to


def test_opening_a_missing_run_names_it(tmp_path):
    from tracegraph.errors import DataError

    with pytest.raises(DataError, match="not-here: model checkpoint not found"):
        RunStore(tmp_path / "not-here")


@pytest.fixture
def run_copy(run, tmp_path):
    import shutil

    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def test_the_device_is_resolved_from_a_name_or_taken_as_given(run, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "meta")
    assert RunStore(run, device="auto").device == torch.device("meta")
    assert RunStore(run, device=torch.device("meta")).device == torch.device("meta")
    assert RunStore(run).device == torch.device("cpu")
    ckpt = run / "checkpoints" / "epoch_0001.pt"
    assert RunStore(ckpt).opened_with == ckpt and RunStore(run).opened_with == run


def test_only_epoch_files_take_their_rate_from_the_history(run_copy):
    import shutil

    ck = run_copy / "checkpoints"
    shutil.copy(ck / "epoch_0002.pt", run_copy / "other_0003.pt")  # "0003" after 6 characters, not an epoch name
    info = RunStore(run_copy).checkpoint_info(run_copy / "other_0003.pt")
    assert (info.path, info.epoch, info.lr) == (run_copy / "other_0003.pt", 2, pytest.approx(0.005))  # the file's own
    shutil.copy(ck / "epoch_0002.pt", ck / "epoch_x3.pt")  # "epoch_" and then not only digits
    info = RunStore(run_copy).checkpoint_info(ck / "epoch_x3.pt")
    assert (info.epoch, info.lr) == (2, pytest.approx(0.005))
    shutil.copy(ck / "epoch_0001.pt", ck / "epoch_1234.pt")
    history = json.loads((run_copy / "training_history.json").read_text())
    (run_copy / "training_history.json").write_text(json.dumps(history + [{"epoch": 1234, "lr": 0.5}]))
    info = RunStore(run_copy).checkpoint_info(ck / "epoch_1234.pt")
    assert (info.epoch, info.lr) == (1234, 0.5)


def test_a_checkpoint_without_a_rate_has_none(run_copy):
    p = run_copy / "checkpoints" / "epoch_0001.pt"
    payload = load_checkpoint(p)
    del payload["lr"]
    torch.save(payload, p)
    (run_copy / "training_history.json").write_text("[]")
    assert RunStore(run_copy).checkpoint_info(p).lr is None


def test_a_checkpoint_of_another_graph_is_refused_naming_it(run_copy):
    from tracegraph.errors import DataError

    p = run_copy / "checkpoints" / "epoch_0001.pt"
    payload = load_checkpoint(p)
    payload["model_config"]["num_entities"] = 99
    torch.save(payload, p)
    with pytest.raises(
        DataError, match=r"epoch_0001\.pt: id maps \(6 entities, 2 relations\) do not match the model \(99, 2\)"
    ):
        RunStore(run_copy).read_checkpoint(p)


def test_the_cache_keeps_the_newest_checkpoint_whatever_the_budget(run, monkeypatch):
    import tracegraph.kg.model.store as store_module

    reads = []
    real = store_module.load_checkpoint
    monkeypatch.setattr(store_module, "load_checkpoint", lambda p, **k: reads.append(p.name) or real(p, **k))
    p1, p2, _ = sorted((run / "checkpoints").glob("epoch_*.pt"))
    s = RunStore(run, cache_bytes=0)
    s.read_checkpoint(p1)
    s.read_checkpoint(p1)
    assert reads == ["epoch_0001.pt"]
    one = sum(t.numel() * t.element_size() for t in real(p1)["model"].values())
    s = RunStore(run, cache_bytes=one)  # room for one: reading a second drops the first
    reads.clear()
    for p in (p1, p2, p1):
        s.read_checkpoint(p)
    assert reads == ["epoch_0001.pt", "epoch_0002.pt", "epoch_0001.pt"]


def test_each_checkpoint_file_is_its_own_model(run):
    s = RunStore(run)
    (m1, i1), (m2, i2) = (s.load(run / "checkpoints" / f"epoch_000{e}.pt") for e in (1, 3))
    assert m1 is not m2 and (i1.path.name, i2.path.name) == ("epoch_0001.pt", "epoch_0003.pt")
    assert not torch.equal(m1.entity.weight, m2.entity.weight)


def test_unknown_labels_say_whether_an_entity_or_a_relation_is_missing(run):
    s = RunStore(run)
    with pytest.raises(TracegraphError, match="^entity 'nope' is not in the id map"):
        s.encode([("nope", "r0", "e1")])
    with pytest.raises(TracegraphError, match="^relation 'r9' is not in the id map"):
        s.encode([("e0", "r9", "e1")])
    with pytest.raises(TracegraphError, match="^entity 'e77' is not in the id map"):
        s.encode([("e0", "r0", "e77")])


def test_a_filter_files_unknown_labels_filter_nothing_and_no_source_is_an_empty_filter(run, tmp_path):
    s = RunStore(run)
    f = tmp_path / "extra.txt"
    f.write_text("e0\tr1\te5\nnew\tr0\te1\n")  # an entity the run has no id for
    known = s.known_tails([f])
    assert known.tails_of(ENT["e0"], REL["r1"]).tolist() == [ENT["e5"]]
    assert known.tails_of(ENT["e5"], REL["r1"] + 2).tolist() == [ENT["e0"]]
    empty = s.known_tails([])
    assert all(len(empty.tails_of(h, r)) == 0 for h in range(len(ENT)) for r in range(4))


def test_a_model_without_reciprocal_relations_filters_without_them(data, tmp_path):
    from tests.kg.tiny_graph import TINY

    out = tmp_path / "plain"
    train(cfg(data, out, model=dict(TINY, reciprocal=False)))
    known = RunStore(out).known_tails([data / "train.txt"])
    assert known.tails_of(ENT["e0"], REL["r0"]).tolist() == [ENT["e1"], ENT["e2"]]
    assert len(known.tails_of(ENT["e1"], REL["r0"])) == 2 and known.num_relations == 2
    for e in ENT.values():  # every query against the file read by hand: no reversed triple anywhere
        for r in REL.values():
            want = sorted({ENT[t] for h, rr, t in TRIPLES if ENT[h] == e and REL[rr] == r})
            assert known.tails_of(e, r).tolist() == want, (e, r)


def test_run_files_and_filter_index_read_the_runs_recorded_files(run, data):
    from types import SimpleNamespace

    from tracegraph.kg.model.store import filter_index, run_files

    want = [str(data / f"{n}.txt") for n in ("train", "valid", "test")]
    assert sorted(map(str, run_files(RunStore(run)))) == sorted(want)
    assert sorted(map(str, run_files(SimpleNamespace(checkpoint=run / "best_model.pt")))) == sorted(want)
    a, b = filter_index(RunStore(run), [TEST]), RunStore(run).known_tails([TEST])
    assert all(a.tails_of(h, r).tolist() == b.tails_of(h, r).tolist() for h in range(6) for r in range(4))
    assert a.tails_of(ENT["e1"], REL["r1"]).tolist() == [ENT["e4"]]


def test_weights_that_do_not_fit_the_config_are_refused_naming_the_file(run_copy):
    from tracegraph.errors import DataError

    p = run_copy / "checkpoints" / "epoch_0001.pt"
    payload = load_checkpoint(p)
    payload["model"]["fc.weight"] = torch.zeros(1)
    torch.save(payload, p)
    with pytest.raises(DataError, match=r"epoch_0001\.pt: weights do not match the model config"):
        RunStore(run_copy).load(p)


def test_a_file_without_weights_is_refused_as_not_a_checkpoint_even_beside_cached_ones(run_copy):
    from tracegraph.errors import DataError

    p = run_copy / "checkpoints" / "epoch_0002.pt"
    torch.save({"model_config": load_checkpoint(p)["model_config"], "epoch": 2}, p)
    s = RunStore(run_copy, cache_bytes=0)
    s.read_checkpoint(run_copy / "checkpoints" / "epoch_0001.pt")  # the cache holds a model already
    with pytest.raises(DataError, match=r"epoch_0002\.pt: not a tracegraph checkpoint"):
        s.load(p)


def test_a_run_without_config_or_history_has_an_empty_config_no_smoothing_and_the_checkpoints_rates(run_copy):
    (run_copy / "config.json").unlink()
    (run_copy / "training_history.json").unlink()
    s = RunStore(run_copy)
    assert s.config == {}
    assert s.label_smoothing == 0.0
    # lr 0.01 halved after every epoch, as the run trained; read from each checkpoint itself
    assert [(c.epoch, c.lr) for c in s.checkpoints] == [
        (1, pytest.approx(0.01)),
        (2, pytest.approx(0.005)),
        (3, pytest.approx(0.0025)),
    ]
    assert s.labels.entity_names == {} and s.labels.relation_names == {}


def test_the_label_smoothing_is_the_one_config_json_records(run_copy):
    config = json.loads((run_copy / "config.json").read_text())
    config["train"]["label_smoothing"] = 0.25
    (run_copy / "config.json").write_text(json.dumps(config))
    assert RunStore(run_copy).label_smoothing == 0.25


def test_readable_names_come_from_the_label_files_config_json_records(run_copy, tmp_path):
    import hashlib

    labels = tmp_path / "labels"
    labels.mkdir()
    # names by entity index; without a node_dict file the index is the run's entity map (e0..e5)
    (labels / "node_name_dict.txt").write_text("Zero\t0\nFive\t5\n")
    (labels / "edge_map.json").write_text(json.dumps({'{"predicate": "biolink:treats"}': "r1"}))
    config = json.loads((run_copy / "config.json").read_text())
    config["label_files"] = {
        key: {
            "path": str(labels / name),
            "relative": str(Path("..") / "labels" / name),
            "sha256": hashlib.sha256((labels / name).read_bytes()).hexdigest(),
        }
        for key, name in [("node_names", "node_name_dict.txt"), ("edge_map", "edge_map.json")]
    }
    (run_copy / "config.json").write_text(json.dumps(config))
    got = RunStore(run_copy).labels
    assert got.entity_names == {"e0": "Zero", "e5": "Five"}
    assert got.relation_names == {"r1": "biolink:treats"}
