"""runtime/distributed.py's collectives and global-batch BatchNorm by hand, in one process.

A stand-in for ``torch.distributed`` plays a world of two *identical* ranks: every rank holds this
rank's tensor, so an all-reduce(SUM) doubles it (forward and backward) and a gather returns two
copies. Against that: the collectives' one-process and many-process branches; CPUSyncBatchNorm
against plain float64 batch normalisation of the global batch (this batch twice) — output, the
gradient of both ranks' losses, and the running statistics with the global count; the layer
swap keeping parameters and buffers; the other ranks' log filter; what counts as a failed
collective. The real multi-process runs are in ``tests/kg/test_distributed.py`` (torchrun).
"""

import logging
import threading

import pytest
import torch
from torch import nn

from tracegraph.runtime import devices as DV
from tracegraph.runtime import distributed as D
from tracegraph.runtime import sync_batchnorm as SB


class TwoIdenticalRanks:
    """``torch.distributed`` as seen from ``rank`` in a world of two ranks holding the same data."""

    ReduceOp = torch.distributed.ReduceOp
    DistError = torch.distributed.DistError

    def __init__(self, rank=0, world=2):
        self.rank, self.world, self.calls = rank, world, []

    def is_initialized(self):
        return True

    def get_world_size(self):
        return self.world

    def get_rank(self):
        return self.rank

    def all_reduce(self, t, op):
        assert op == self.ReduceOp.SUM
        self.calls.append("all_reduce")
        t.mul_(self.world)

    def barrier(self):
        self.calls.append("barrier")

    def all_gather_object(self, out, obj):
        out[:] = [obj] * self.world

    def gather_object(self, obj, out, dst):
        assert dst == 0 and (out is None) == (self.rank != 0)
        if out is not None:
            out[:] = [obj] * self.world

    def broadcast_object_list(self, box, src):
        assert src == 0
        self.calls.append(("broadcast_object_list", box[0]))

    def broadcast(self, t, src):
        assert src == 0
        self.calls.append(("broadcast", tuple(t.shape)))


class NotStarted(TwoIdenticalRanks):
    def is_initialized(self):
        return False


def test_collectives_with_one_process_do_nothing(monkeypatch):
    for fake in (NotStarted(), TwoIdenticalRanks(world=1)):
        monkeypatch.setattr(D, "dist", fake)
        t = torch.tensor([1.0, 2.0])
        assert D.all_reduce_sum(t) is t and t.tolist() == [1.0, 2.0]
        assert D.all_gather("x") == ["x"] and D.gather_to_main("x") == ["x"] and D.broadcast_object("x") == "x"
        D.barrier()
        D.broadcast_module_state(nn.Linear(2, 1))
        assert fake.calls == []


def test_collectives_with_two_ranks_call_torch(monkeypatch):
    fake = TwoIdenticalRanks()
    monkeypatch.setattr(D, "dist", fake)
    t = torch.tensor([1.0, 2.0])
    assert D.all_reduce_sum(t) is t and t.tolist() == [2.0, 4.0]
    assert D.all_gather({"a": 1}) == [{"a": 1}, {"a": 1}] and D.gather_to_main(3) == [3, 3]
    assert D.broadcast_object("from rank 0") == "from rank 0"
    D.barrier()
    D.broadcast_module_state(nn.Linear(2, 1))  # weight [1, 2] and bias [1]
    assert fake.calls == [
        "all_reduce",
        ("broadcast_object_list", "from rank 0"),
        "barrier",
        ("broadcast", (1, 2)),
        ("broadcast", (1,)),
    ]
    monkeypatch.setattr(D, "dist", TwoIdenticalRanks(rank=1))
    assert D.gather_to_main(3) is None  # only rank 0 receives


def _reference_bn(g, weight, bias, eps):
    """Training-mode batch normalisation of the global batch ``g`` in float64, written here."""
    dims = [0] + list(range(2, g.dim()))
    shape = [1, g.shape[1]] + [1] * (g.dim() - 2)
    mean = g.mean(dims)
    var = ((g - mean.view(shape)) ** 2).mean(dims)  # biased, as BatchNorm normalises
    y = (g - mean.view(shape)) / torch.sqrt(var.view(shape) + eps) * weight.double().view(shape)
    return y + bias.double().view(shape), mean, var


@pytest.mark.parametrize("shape", [(3, 2), (2, 3, 2, 2)])
def test_sync_batchnorm_normalises_with_the_global_batch(monkeypatch, shape):
    monkeypatch.setattr(SB, "dist", TwoIdenticalRanks())
    torch.manual_seed(0)
    x, w = torch.randn(*shape), torch.randn(*shape)
    bn = SB.CPUSyncBatchNorm(shape[1], eps=1e-3, momentum=0.25)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.5, -0.5, 2.0][: shape[1]]))
        bn.bias.copy_(torch.tensor([0.1, 0.2, -0.3][: shape[1]]))
    xa = x.clone().requires_grad_(True)
    y = bn(xa)
    (y * w).sum().backward()
    g = torch.cat([x, x]).double().requires_grad_(True)  # the global batch: this rank's, twice
    ref, mean, var = _reference_bn(g, bn.weight.detach(), bn.bias.detach(), 1e-3)
    (ref * torch.cat([w, w]).double()).sum().backward()  # both ranks' losses
    assert y.dtype == x.dtype
    torch.testing.assert_close(y.double(), ref[: shape[0]].detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(xa.grad.double(), g.grad[: shape[0]], rtol=1e-4, atol=1e-6)
    # running statistics: momentum 0.25 from (0, 1), the unbiased variance with the global count
    n = 2 * x.numel() // shape[1]
    torch.testing.assert_close(bn.running_mean.double(), 0.25 * mean.detach(), rtol=1e-5, atol=1e-7)
    want_var = 0.75 + 0.25 * var.detach() * n / (n - 1)
    torch.testing.assert_close(bn.running_var.double(), want_var, rtol=1e-5, atol=1e-7)
    assert int(bn.num_batches_tracked) == 1


def test_sync_batchnorm_cumulative_average_without_momentum(monkeypatch):
    monkeypatch.setattr(SB, "dist", TwoIdenticalRanks())
    x1, x2 = torch.tensor([[0.0], [2.0]]), torch.tensor([[4.0], [8.0]])
    bn = SB.CPUSyncBatchNorm(1, momentum=None, affine=False)
    bn(x1)
    bn(x2)
    # global batches [0,2,0,2] and [4,8,4,8]: means 1 and 6, unbiased variances 4/3 and 16/3
    # with no momentum the running values are the plain average over the batches so far
    assert bn.running_mean.tolist() == pytest.approx([(1 + 6) / 2])
    assert bn.running_var.tolist() == pytest.approx([(4 / 3 + 16 / 3) / 2])
    assert int(bn.num_batches_tracked) == 2


def test_sync_batchnorm_is_plain_batchnorm_in_eval_with_one_rank_and_refuses_one_value(monkeypatch):
    torch.manual_seed(1)
    x = torch.randn(4, 2)
    plain = nn.BatchNorm1d(2)
    for fake in (NotStarted(), TwoIdenticalRanks(world=1)):
        monkeypatch.setattr(SB, "dist", fake)
        sync = SB.CPUSyncBatchNorm(2)
        torch.testing.assert_close(sync(x), plain.train()(x))
        assert fake.calls == []
    monkeypatch.setattr(SB, "dist", TwoIdenticalRanks())
    sync = SB.CPUSyncBatchNorm(2).eval()
    torch.testing.assert_close(sync(x), nn.BatchNorm1d(2).eval()(x))
    with pytest.raises(ValueError) as e:  # world of 1 value per channel: 1 row, 1 rank
        monkeypatch.setattr(SB, "dist", TwoIdenticalRanks(world=1))
        SB.CPUSyncBatchNorm(2)(torch.randn(1, 2))
    monkeypatch.setattr(SB, "dist", TwoIdenticalRanks())
    SB.CPUSyncBatchNorm(2)(torch.randn(1, 2))  # one row on each of two ranks: two values, allowed
    with pytest.raises(ValueError) as e:
        SB.CPUSyncBatchNorm(2)(torch.randn(2))
    assert str(e.value) == "expected at least 2D input (got 1D input)"


def test_too_few_values_over_all_ranks_is_refused_with_the_count(monkeypatch):
    class OneRankOfTwoHasData(TwoIdenticalRanks):
        def all_reduce(self, t, op):  # the other rank holds no rows: sums unchanged
            pass

    monkeypatch.setattr(SB, "dist", OneRankOfTwoHasData())
    with pytest.raises(ValueError) as e:
        SB.CPUSyncBatchNorm(3)(torch.randn(1, 3))
    assert str(e.value) == "Expected more than 1 value per channel when training, got 1 over all ranks"


def test_converting_keeps_the_parameters_and_buffers(monkeypatch):
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Sequential(nn.BatchNorm2d(3, eps=0.01)))
    model[2][0].eval()
    bn1, bn2 = model[1], model[2][0]
    out = SB.convert_sync_batchnorm(model, torch.device("cpu"))
    assert out is model and isinstance(out[1], SB.CPUSyncBatchNorm) and isinstance(out[2][0], SB.CPUSyncBatchNorm)
    for old, new in ((bn1, out[1]), (bn2, out[2][0])):
        assert new.weight is old.weight and new.bias is old.bias
        assert new.running_mean is old.running_mean and new.running_var is old.running_var
        assert new.num_batches_tracked is old.num_batches_tracked
        assert (new.num_features, new.eps, new.momentum, new.training) == (
            old.num_features,
            old.eps,
            old.momentum,
            old.training,
        )
    assert out[2][0].eps == 0.01 and not out[2][0].training and out[1].training
    bare = SB.convert_sync_batchnorm(nn.BatchNorm1d(4, affine=False, track_running_stats=False), torch.device("cpu"))
    assert isinstance(bare, SB.CPUSyncBatchNorm) and bare.weight is None and bare.running_mean is None
    assert SB.convert_sync_batchnorm(out[1], torch.device("cpu")) is out[1]  # already converted
    gpu = SB.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(2)), torch.device("cuda"))
    assert type(gpu[0]) is nn.SyncBatchNorm  # PyTorch's own on CUDA (built, not run)


def test_other_ranks_log_warnings_only_prefixed_once(monkeypatch):
    f = D._OtherRank(3)
    info = logging.LogRecord("tracegraph", logging.INFO, "", 0, "hello", None, None)
    warn = logging.LogRecord("tracegraph", logging.WARNING, "", 0, "careful", None, None)
    assert not f.filter(info)
    assert f.filter(warn) and warn.msg == "[rank 3] careful"
    assert f.filter(warn) and warn.msg == "[rank 3] careful"  # a second handler: no second prefix
    log = logging.getLogger("tracegraph")
    monkeypatch.setattr(log, "filters", [])
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "1")
    D._quiet_other_ranks(0)
    assert log.filters == [] and D.os.environ["TRACEGRAPH_PROGRESS"] == "1"
    D._quiet_other_ranks(2)
    assert [type(x) for x in log.filters] == [D._OtherRank] and log.filters[0].rank == 2
    assert D.os.environ["TRACEGRAPH_PROGRESS"] == "0"


@pytest.mark.parametrize(
    "error,failed",
    [
        (RuntimeError("[../gloo/transport] Connection closed by peer [127.0.0.1]"), True),
        (RuntimeError("Timed out waiting 5000ms"), True),
        (RuntimeError("operation timed out"), True),
        (RuntimeError("NCCL error: unhandled system error"), True),
        (RuntimeError("[c10d] store get failed"), True),
        (RuntimeError("something in gloo"), True),
        (torch.distributed.DistError("anything"), True),
        (RuntimeError("shape mismatch"), False),
        (ValueError("boom"), False),
    ],
)
def test_what_counts_as_a_failed_collective(error, failed):
    assert D._collective_failure(error) is failed


def test_outside_torchrun_the_context_is_one_process_on_the_device_asked(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    ctx = D.init_distributed("cpu")
    assert (ctx.rank, ctx.world_size, ctx.device, ctx.active, ctx.is_main) == (0, 1, torch.device("cpu"), False, True)


class Starting(TwoIdenticalRanks):
    """``torch.distributed`` before and after ``init_process_group`` (recorded, nothing started)."""

    def __init__(self, rank=0, world=2):
        super().__init__(rank, world)
        self.started = False

    def is_initialized(self):
        return self.started

    def init_process_group(self, **kw):
        self.calls.append(("init_process_group", kw))
        self.started = True

    def get_backend(self):
        return "gloo"


@pytest.mark.parametrize("rank", [0, 1])
def test_under_torchrun_a_cpu_rank_starts_gloo_once_with_the_timeout(monkeypatch, rank):
    import datetime

    from tests.conftest import log_lines

    fake = Starting(rank)
    monkeypatch.setattr(D, "dist", fake)
    exits = []
    monkeypatch.setattr(D.atexit, "register", exits.append)
    log = logging.getLogger("tracegraph")
    monkeypatch.setattr(log, "filters", [])
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("TRACEGRAPH_DIST_TIMEOUT", "7.5")
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "1")
    with log_lines() as lines:
        ctx = D.init_distributed("cpu")
        again = D.init_distributed("auto")  # harmless: the group exists
    assert ctx == again == D.DistContext(rank, 2, rank, torch.device("cpu"), "gloo")
    assert fake.calls == [
        ("init_process_group", dict(backend="gloo", timeout=datetime.timedelta(seconds=7.5), device_id=None))
    ]
    assert exits == [D._destroy]
    if rank == 0:
        assert lines == [
            "torch.distributed: 2 processes, backend gloo, collective timeout 7.5s (TRACEGRAPH_DIST_TIMEOUT)"
        ]
        assert log.filters == []
    else:
        assert lines == [] and [f.rank for f in log.filters] == [1]  # other ranks: warnings only
        assert D.os.environ["TRACEGRAPH_PROGRESS"] == "0"


def test_each_device_gets_its_own_device_and_range_and_a_named_thread():

    cpu, meta = torch.device("cpu"), torch.device("meta")
    seen = DV.run_on_devices([cpu, meta], 5, lambda d, lo, hi: (d, lo, hi, threading.current_thread().name))
    assert seen == [(cpu, 0, 2, "tracegraph-cpu"), (meta, 2, 5, "tracegraph-meta")]


def test_a_fraction_of_a_second_is_a_valid_timeout(monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_DIST_TIMEOUT", "0.5")
    assert D.timeout_seconds() == 0.5


def test_rank_0_is_the_main_process_once_the_group_exists(monkeypatch):
    class Started(TwoIdenticalRanks):
        def is_available(self):
            return True

    for rank, main in ((0, True), (1, False)):
        monkeypatch.setattr(D, "dist", Started(rank))
        monkeypatch.setenv("RANK", "0")  # the group's rank wins over the environment
        assert D.is_main_process() is main


def test_a_peer_closing_the_connection_is_a_failed_collective():
    assert D._collective_failure(RuntimeError("Connection closed by peer [127.0.0.1]:29500"))


def test_under_torchrun_defaults_local_rank_0_and_nccl_error_handling(monkeypatch):
    fake = Starting(1)
    monkeypatch.setattr(D, "dist", fake)
    monkeypatch.setattr(D.atexit, "register", lambda f: None)
    monkeypatch.setattr(logging.getLogger("tracegraph"), "filters", [])
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", raising=False)
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "1")
    assert D.init_distributed("cpu").local_rank == 0
    assert D.os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"  # so NCCL honours the timeout
    for var in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var)
    assert D.init_distributed().device == torch.device("cpu")  # "auto" outside torchrun: the suite's CPU


def test_sync_batchnorm_returns_the_input_dtype_and_keeps_the_layer_options(monkeypatch):
    monkeypatch.setattr(SB, "dist", TwoIdenticalRanks())
    x = torch.randn(4, 2, dtype=torch.float64)
    assert SB.CPUSyncBatchNorm(2).double()(x).dtype == torch.float64
    half = SB.CPUSyncBatchNorm(2).to(torch.bfloat16)  # computed in float32, returned as given
    assert half(x.to(torch.bfloat16)).dtype == torch.bfloat16
    for affine, track in ((True, True), (False, True), (True, False)):
        new = SB.convert_sync_batchnorm(
            nn.BatchNorm1d(2, affine=affine, track_running_stats=track), torch.device("cpu")
        )
        assert (new.affine, new.track_running_stats) == (affine, track)


class StartingNccl(Starting):
    """As :class:`Starting`, reporting the backend it was started with."""

    def get_backend(self):
        return self.calls[-1][1]["backend"]


@pytest.mark.parametrize(
    "spec, warned",
    [("auto", False), ("cuda", False), ("cuda:1", False), ("cuda:3", True)],
)
def test_under_torchrun_a_gpu_rank_takes_its_local_gpu_and_starts_nccl(monkeypatch, spec, warned):
    """With CUDA (torch.cuda replaced by a recorder), rank 1 of 2 on LOCAL_RANK 1 uses cuda:1 whatever
    CUDA device was asked, says so when another index was named, makes it current, and starts NCCL
    bound to it."""
    import datetime

    from tests.conftest import log_lines

    fake = StartingNccl(1)
    current = []
    monkeypatch.setattr(D, "dist", fake)
    monkeypatch.setattr(D.atexit, "register", lambda f: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", current.append)
    log = logging.getLogger("tracegraph")
    monkeypatch.setattr(log, "filters", [])
    monkeypatch.delenv("TRACEGRAPH_DEVICE", raising=False)
    for var, value in (("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1"), ("TRACEGRAPH_DIST_TIMEOUT", "30")):
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "1")
    with log_lines() as lines:
        ctx = D.init_distributed(spec)
    gpu = torch.device("cuda", 1)
    assert ctx == D.DistContext(1, 2, 1, gpu, "nccl")
    assert current == [gpu]
    assert fake.calls == [
        ("init_process_group", dict(backend="nccl", timeout=datetime.timedelta(seconds=30), device_id=gpu))
    ]
    want = [f"--device {spec} ignored under torchrun: rank 1 uses cuda:1 (LOCAL_RANK)"] if warned else []
    assert lines == want


def test_each_gpu_shard_runs_with_its_gpu_current(monkeypatch):
    """On CUDA devices each shard's thread makes its device current before it runs (torch.cuda
    replaced by a recorder keyed by thread); CPU shards leave it alone."""
    current = {}
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: current.__setitem__(threading.current_thread().name, d))
    devices = [torch.device("cuda", 0), torch.device("cuda", 1)]
    seen = DV.run_on_devices(devices, 4, lambda d, lo, hi: (threading.current_thread().name, lo, hi))
    assert current == {"tracegraph-cuda:0": devices[0], "tracegraph-cuda:1": devices[1]}
    assert seen == [("tracegraph-cuda:0", 0, 2), ("tracegraph-cuda:1", 2, 4)]
    current.clear()
    assert DV.run_on_devices([torch.device("cuda", 1)], 3, lambda d, lo, hi: (lo, hi)) == [(0, 3)]
    assert current == {threading.current_thread().name: torch.device("cuda", 1)}
    current.clear()
    DV.run_on_devices([torch.device("cpu"), torch.device("cpu")], 2, lambda d, lo, hi: None)
    assert current == {}
