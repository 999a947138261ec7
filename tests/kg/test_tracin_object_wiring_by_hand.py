"""The ``TracIn`` object's wiring (kg/explain/tracin/influence.py) on a 3-epoch run of the 10-triple
graph: what it takes by default, that its per-checkpoint parts sum to the whole, that a subset of rows
is the same columns, that an ids-only object reads the same checkpoints from disk, and its refusals;
where it computes: the device given over the store's (a store on the meta device standing in for a
GPU), names resolved and devices taken as given, and the automatic batch size for a device, by hand.

References: the run's own files read here (its training file, label smoothing, epoch checkpoints),
the whole result (checked against a float64 first-principles computation in
``test_tracin_first_principles.py``) for the parts, and messages written out.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.kg.tiny_graph import TEST, TRIPLES, cfg, ids
from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.tracin.engine import InfluenceOptions
from tracegraph.kg.explain.tracin.influence import TracIn
from tracegraph.kg.model.store import RunStore
from tracegraph.kg.model.train import train


@pytest.fixture(scope="module")
def run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("tracin_object") / "run"
    train(cfg(data, out, epochs=3, lr_decay=0.5, label_smoothing=0.2))
    return out


def test_defaults_are_the_runs_training_file_smoothing_and_epochs(run):
    t = TracIn(run, progress=False)
    assert t.train_ids.tolist() == [list(x) for x in ids(TRIPLES)]
    assert [p.name for p in t.checkpoints] == ["epoch_0001.pt", "epoch_0002.pt", "epoch_0003.pt"]
    o = t.options
    assert (o.loss, o.layers, o.engine, o.precision, o.label_smoothing) == ("logit", "all", "exact", "fp32", 0.2)
    assert o.batch_size == 512 and t.device == torch.device("cpu") and t.run.path == run  # 512 on a CPU
    assert repr(t) == (
        f"TracIn(RunStore({str(run)!r}, device='cpu'), 10 training triples, 3 checkpoints, loss='logit', "
        "layers='all', engine='exact')"
    )
    t = TracIn(
        run,
        train=TRIPLES[:4],
        checkpoints=["final"],
        loss="score",
        layers="last:2",
        engine="autograd",
        label_smoothing=0.0,
        batch_size=3,
        device="cpu",
        progress=False,
    )
    assert len(t.train_ids) == 4 and [p.name for p in t.checkpoints] == ["final_model.pt"]
    o = t.options
    assert (o.loss, o.layers, o.engine, o.label_smoothing, o.batch_size) == ("score", "last:2", "autograd", 0.0, 3)


def test_per_checkpoint_parts_sum_to_the_whole_and_rows_are_its_columns(run):
    t = TracIn(run, progress=False)
    test = np.array(ids(TEST))
    whole = t.result(test)
    parts = list(t.per_checkpoint(test))
    assert [(Path(p.checkpoints[0].path).name, p.checkpoints[0].lr) for p in parts] == [
        ("epoch_0001.pt", pytest.approx(0.01)),
        ("epoch_0002.pt", pytest.approx(0.005)),
        ("epoch_0003.pt", pytest.approx(0.0025)),
    ]
    np.testing.assert_allclose(sum(np.asarray(p.scores, np.float64) for p in parts), whole.scores, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(sum(p.train_self for p in parts), whole.train_self, rtol=1e-5)
    rows = np.array([7, 2, 5])
    sub = t.result(test, rows)
    np.testing.assert_allclose(sub.scores, np.asarray(whole.scores)[:, rows], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(t.influence(TEST), whole.scores, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(t.self_influence(), whole.train_self, rtol=1e-6)
    assert t.influence(TEST[0]).shape == (1, 10)  # one label triple


def test_an_ids_only_object_reads_the_checkpoints_from_disk_with_its_own_options(run):
    store = RunStore(run)
    t = TracIn(store, progress=False)
    opts = InfluenceOptions(engine="exact", loss="logit", label_smoothing=0.2, batch_size=4)
    bare = TracIn.from_parts(None, np.array(ids(TRIPLES)), t.checkpoints, opts, progress=False)
    opts.batch_size = 1  # the object keeps its own copy
    assert bare.options.batch_size == 4 and bare.device == torch.device("cpu") and bare.run is None
    test = np.array(ids(TEST))
    np.testing.assert_allclose(bare.result(test).scores, t.result(test).scores, rtol=1e-5, atol=1e-9)
    auto = TracIn.from_parts(store, np.array(ids(TRIPLES)), t.checkpoints, InfluenceOptions(batch_size=0))
    assert auto.options.batch_size == 512  # fixed up front when the store is known
    with pytest.raises(TracegraphError) as e:
        bare.influence(TEST)
    assert str(e.value) == "this TracIn holds ids only (built without a run): pass test ids to result()"
    with pytest.raises(TracegraphError) as e:
        bare.self_influence() if bare._train_self is None else bare.top_k(TEST[0])
    assert "ids only" in str(e.value)


def test_top_k_refusals(run):
    t = TracIn(run, progress=False)
    with pytest.raises(TracegraphError) as e:
        t.top_k(TEST)
    assert str(e.value) == "top_k explains one test triple, got 2"
    with pytest.raises(TracegraphError) as e:
        t.top_k(TEST[0], k=0)
    assert str(e.value) == "k must be at least 1, not 0"
    top = t.top_k(TEST[0], k=2)
    assert list(top.columns) == ["head", "relation", "tail", "influence", "self_influence", "role"]
    assert top["role"].tolist() == sorted(top["role"].tolist(), key=lambda r: r != "proponent")


def test_a_run_without_a_training_file_needs_train(run, tmp_path):
    import shutil

    moved = tmp_path / "moved"
    shutil.copytree(run, moved)
    store = RunStore(moved)
    store.data_files = {}
    with pytest.raises(TracegraphError) as e:
        TracIn(store, progress=False)
    assert str(e.value) == f"{moved}: the run records no training file that still exists; pass train="
    assert len(TracIn(store, train=TRIPLES[:3], progress=False).train_ids) == 3


@pytest.fixture
def engine_calls(monkeypatch):
    """compute_influence as TracIn calls it, recorded (progress display and checkpoint reader), then run."""
    from tracegraph.kg.explain.tracin import influence as inf

    calls, real = [], inf.compute_influence
    shown = []

    class Display:  # a progress display that accepts every call
        def __getattr__(self, name):
            return lambda *a, **k: 0

    def display():
        shown.append(Display())
        return __import__("contextlib").nullcontext(shown[-1])

    def recorded(paths, train, test, options, device, progress, read=None):
        calls.append(dict(progress=progress, read=read, n_train=len(train), options=options))
        return real(paths, train, test, options, device, progress, read=read)

    monkeypatch.setattr(inf, "compute_influence", recorded)
    monkeypatch.setattr(inf, "make_progress", display)
    return calls, shown


def test_progress_is_shown_by_default_and_reaches_the_engine(run, engine_calls):
    calls, shown = engine_calls
    TracIn(run).influence(TEST)
    TracIn.from_parts(
        RunStore(run), np.array(ids(TRIPLES)), TracIn(run, progress=False).checkpoints, InfluenceOptions()
    ).influence(TEST)
    assert len(shown) == 2 and [c["progress"] for c in calls] == shown  # the display the object opened
    TracIn(run, progress=False).influence(TEST)
    assert len(shown) == 2 and calls[-1]["progress"] is None
    outer = type("Outer", (), {"__getattr__": lambda self, name: lambda *a, **k: 0})()  # a caller's display
    list(TracIn(run, progress=False).per_checkpoint(np.array(ids(TEST)), progress=outer))
    assert [c["progress"] for c in calls[-3:]] == [outer] * 3


def test_the_checkpoint_reader_is_the_stores_or_the_one_given(run, engine_calls):
    calls, _ = engine_calls
    store = RunStore(run)
    t = TracIn(store, progress=False)
    t.result(np.array(ids(TEST)))
    assert calls[-1]["read"] == store.read_checkpoint
    seen = []

    def read(path, map_location):
        seen.append(Path(path).name)
        return store.read_checkpoint(path, map_location)

    bare = TracIn.from_parts(None, t.train_ids, t.checkpoints, t.options, read=read, progress=False)
    list(bare.per_checkpoint(np.array(ids(TEST)), np.array([1, 4])))
    assert seen == ["epoch_0001.pt", "epoch_0002.pt", "epoch_0003.pt"] and calls[-1]["read"] is read
    assert [c["n_train"] for c in calls[-3:]] == [2, 2, 2]  # the rows asked, per checkpoint


def test_options_given_reach_the_engine_and_the_checkpoint_note_is_logged(run, tmp_path):
    from tests.conftest import log_lines

    with log_lines() as lines:
        t = TracIn(run, precision="bf16", scratch_dir=str(tmp_path), progress=False)
    assert (t.options.precision, t.options.scratch_dir) == ("bf16", str(tmp_path))
    assert len(lines) == 1 and "3" in lines[0] and "checkpoint" in lines[0]


def test_self_influence_first_and_triples_given_as_a_tuple(run):
    t = TracIn(run, progress=False)
    first = t.self_influence()  # before any influence call: computed then
    assert first.dtype == np.float64 and first.shape == (10,)
    np.testing.assert_allclose(first, TracIn(run, progress=False).result(np.array(ids(TEST))).train_self, rtol=1e-6)
    two = t.influence(tuple(TEST))  # a tuple of two triples is two triples, not one
    assert two.shape == (2, 10)
    top1, top = t.top_k(TEST[0], k=1), t.top_k(TEST[0])  # k = 10 by default: all 10 rows fit in 10 + 10
    assert 1 <= len(top1) <= 2 and len(top) == 10
    with pytest.raises(TracegraphError, match="got the label"):  # a list of three labels is not one triple
        t.influence(list(TEST[0]))


def test_top_k_lists_ten_of_each_sign_by_default(run):
    """Each training triple three times (30 rows): one sign has at least 15, so the default lists
    exactly 10 of it and every row of the other sign up to 10."""
    t = TracIn(run, train=TRIPLES * 3, progress=False)
    scores = t.influence(TEST[0])[0]
    top = t.top_k(TEST[0])
    pos, neg = int((scores > 0).sum()), int((scores < 0).sum())
    assert max(pos, neg) >= 15
    counts = top["role"].value_counts()
    assert counts.get("proponent", 0) == min(pos, 10) and counts.get("opponent", 0) == min(neg, 10)


def test_the_device_given_overrides_the_store_s_and_a_call_s_overrides_the_object_s(run):
    """A store opened on another device (the meta device stands in for a GPU on a machine without
    one: a tensor left on it has no data, so computing there fails): the object defaults to the
    store's device, and a device given to the object, to ``from_parts`` or to one ``result`` call is
    where the gradients are computed, per checkpoint too; the reference is the whole result of an
    object on a CPU store."""
    cpu = TracIn(run, progress=False)
    test = np.array(ids(TEST))
    whole = cpu.result(test)
    meta = RunStore(run, device="meta")
    assert TracIn(meta, progress=False).device == torch.device("meta")  # the store's by default
    given = TracIn(meta, device="cpu", progress=False)
    parts = TracIn.from_parts(meta, np.array(ids(TRIPLES)), cpu.checkpoints, cpu.options, device="cpu", progress=False)
    for t in (given, parts):
        assert t.device == torch.device("cpu")
        np.testing.assert_allclose(t.result(test).scores, whole.scores, rtol=1e-6, atol=1e-9)
        per = [np.asarray(p.scores, np.float64) for p in t.per_checkpoint(test)]
        np.testing.assert_allclose(sum(per), whole.scores, rtol=1e-5, atol=1e-9)
    on_meta = TracIn(meta, progress=False)
    np.testing.assert_allclose(on_meta.result(test, device="cpu").scores, whole.scores, rtol=1e-6, atol=1e-9)
    assert on_meta.device == torch.device("meta")  # one call's device, not the object's


def test_device_names_are_resolved_and_device_objects_taken_as_given(run, monkeypatch):
    """A name goes through the device resolution ("auto": ``TRACEGRAPH_DEVICE``, here the meta
    device); a ``torch.device`` is taken as given (a GPU's plan can be made on a machine without
    one); the store's device is not consulted when one is given."""
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "meta")
    ckpts = TracIn(run, progress=False).checkpoints
    train_ids = np.array(ids(TRIPLES))

    def device_of(device):
        return TracIn.from_parts(None, train_ids, ckpts, InfluenceOptions(), device=device, progress=False).device

    assert device_of("auto") == torch.device("meta")
    assert device_of("cpu") == torch.device("cpu")
    assert device_of(torch.device("cuda")) == torch.device("cuda")  # no CUDA needed to name it
    assert device_of(None) == torch.device("cpu")  # no store: the CPU


def test_the_automatic_batch_size_is_planned_for_the_run_s_entities_on_the_device():
    """The batch size fixed up front (batch_size 0) is the engine's rule for the store's entity count
    on the object's device, worked by hand: 512 on a CPU; on a GPU 2**29 // (8 N) between 256 and
    4096. A stand-in store (its entities, device and reader) is all ``from_parts`` reads."""
    from types import SimpleNamespace

    def batch(n_entities, device):
        store = SimpleNamespace(entities=range(n_entities), device=torch.device("cpu"), read_checkpoint=None)
        opts = InfluenceOptions(batch_size=0)
        return TracIn.from_parts(store, np.zeros((1, 3), np.int64), [], opts, device=device).options.batch_size

    gpu = torch.device("cuda")  # named only: nothing is computed
    assert batch(100_000, "cpu") == 512
    assert batch(100_000, gpu) == 671  # 536 870 912 // 800 000
    assert batch(10, gpu) == 4096 and batch(10_000_000, gpu) == 256  # the cap and the floor
