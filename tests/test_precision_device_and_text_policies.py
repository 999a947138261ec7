"""runtime/precision.py and runtime/textfiles.py by hand: which precision each device gets, which
device a name means, the math flags a block sets and restores, and the byte-order-mark rule."""

import logging

import pytest
import torch

from tracegraph.errors import TracegraphError
from tracegraph.runtime import precision as P
from tracegraph.runtime.textfiles import strip_bom

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.mark.parametrize(
    "name,device,dtype,scaler",
    [
        ("fp32", "cpu", None, False),
        ("bf16", "cpu", torch.bfloat16, False),
        ("fp32", "cuda", None, False),
        ("bf16", "cuda", torch.bfloat16, False),
        ("fp16", "cuda", torch.float16, True),  # only fp16 on CUDA needs loss scaling
    ],
)
def test_each_precision_has_its_dtype_and_scaler(name, device, dtype, scaler):
    p = P.Precision(name, device)
    assert p.dtype is dtype and p.needs_scaler is scaler


def test_autocast_runs_the_block_in_the_half_dtype_and_fp32_is_no_autocast():
    w = torch.randn(4, 4)
    with P.Precision("bf16", "cpu").autocast():
        assert torch.is_autocast_enabled("cpu") and (w @ w).dtype == torch.bfloat16
    with P.Precision("fp32", "cpu").autocast():
        assert not torch.is_autocast_enabled("cpu") and (w @ w).dtype == torch.float32
    assert not P.Precision("bf16", "cpu").grad_scaler().is_enabled()


def test_resolve_precision_choices_alias_and_refusals():
    assert P.resolve_precision("bf16", CPU) == P.Precision("bf16", "cpu")
    assert P.resolve_precision("fp32", CPU, mixed_alias=True).name == "bf16"  # the alias picks bf16 on a CPU
    assert P.best_half_precision(CPU) == "bf16"
    with pytest.raises(TracegraphError) as e:
        P.resolve_precision("fp64", CPU)
    assert str(e.value) == "--precision must be one of fp32, bf16, fp16, not 'fp64'"
    with pytest.raises(TracegraphError) as e:
        P.resolve_precision("fp16", CPU)
    assert str(e.value) == "--precision fp16 needs a CUDA device; on CPU use bf16 or fp32"


def test_resolve_device_auto_reads_the_environment_then_the_machine(monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "cpu")
    assert P.resolve_device("auto") == CPU and P.resolve_device(None) == CPU
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "meta")
    assert P.resolve_device("auto") == torch.device("meta")
    assert P.resolve_device("cpu") == CPU  # an explicit name wins over the variable
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "")
    assert P.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("bf16_supported", [True, False])
def test_on_a_cuda_machine_the_half_precision_is_bf16_where_supported_else_fp16(monkeypatch, bf16_supported):
    # a CUDA machine as these functions see it (they ask torch; nothing runs on the device)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16_supported)
    half = "bf16" if bf16_supported else "fp16"
    assert P.best_half_precision(CUDA) == half and P.best_half_precision(CPU) == "bf16"
    assert P.resolve_precision("fp32", CUDA, mixed_alias=True) == P.Precision(half, "cuda")
    assert P.resolve_precision("fp16", CUDA) == P.Precision("fp16", "cuda")  # fp16 is refused only off CUDA
    monkeypatch.setenv("TRACEGRAPH_DEVICE", "")
    assert P.resolve_device("auto") == CUDA and P.resolve_device(None) == CUDA
    assert P.resolve_device("cuda:1") == torch.device("cuda", 1)


def test_resolve_device_refuses_what_is_not_a_device_or_not_here(monkeypatch):
    with pytest.raises(TracegraphError, match=r"^--device 'gpu0' is not a device name \("):
        P.resolve_device("gpu0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(TracegraphError) as e:
        P.resolve_device("cuda:1")
    assert str(e.value) == "--device cuda:1 requested but CUDA is not available on this machine"


def _flags():
    return (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )


@pytest.fixture
def flags_restored():
    before = _flags()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    yield before
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[:2]
    torch.use_deterministic_algorithms(before[2], warn_only=warn_only)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[3:]


def test_exact_fp32_turns_tf32_off_inside_and_restores_it_even_on_an_error(flags_restored):
    P.set_tf32(True)
    with pytest.raises(ValueError):
        with P.exact_fp32():
            assert _flags()[:2] == (False, False)
            raise ValueError
    assert _flags()[:2] == (True, True)


@pytest.mark.parametrize("tf32,deterministic", [(True, False), (False, True)])
def test_math_mode_sets_the_runs_policy_and_restores_the_old_one(flags_restored, monkeypatch, tf32, deterministic):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    P.set_tf32(not tf32)
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = False, False
    before = _flags()
    with P.math_mode(tf32, deterministic):
        # deterministic: deterministic kernels, no cuDNN benchmarking; else cuDNN times its algorithms
        assert _flags() == (tf32, tf32, deterministic, deterministic, not deterministic)
    assert _flags() == before


@pytest.mark.parametrize("algorithms,cudnn_deterministic", [(True, False), (False, True)])
@pytest.mark.parametrize("deterministic", [False, True])
def test_math_mode_restores_each_deterministic_flag_on_its_own(
    flags_restored, monkeypatch, algorithms, cudnn_deterministic, deterministic
):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.use_deterministic_algorithms(algorithms)
    torch.backends.cudnn.deterministic = cudnn_deterministic
    before = _flags()
    assert before[2:4] == (algorithms, cudnn_deterministic)
    with P.math_mode(True, deterministic):
        pass
    assert _flags() == before


@pytest.mark.parametrize("deterministic", [False, True])
def test_math_mode_keeps_deterministic_algorithms_that_only_warn(flags_restored, monkeypatch, deterministic):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.use_deterministic_algorithms(True, warn_only=True)
    with P.math_mode(False, deterministic):
        pass
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.is_deterministic_algorithms_warn_only_enabled()


def test_deterministic_sets_a_cublas_workspace_unless_one_is_set(flags_restored, monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    P.set_deterministic(True)
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    P.set_deterministic(True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    P.set_deterministic(False)
    assert _flags()[2:] == (False, False, False)


def test_a_leading_byte_order_mark_is_removed_with_a_note_and_nothing_else():
    from tracegraph.runtime.progress import log

    notes = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: notes.append(record.getMessage())
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        assert strip_bom("\ufeffa\tb\tc\n", "f.txt") == "a\tb\tc\n"
        assert notes == ["f.txt:1: removed a UTF-8 byte-order mark"]
        assert strip_bom("a\ufeff\tb\n", "g.txt") == "a\ufeff\tb\n"  # only a leading one
        assert strip_bom("\ufeff\ufeffx", "h.txt") == "\ufeffx"  # one mark, once
        assert notes[1:] == ["h.txt:1: removed a UTF-8 byte-order mark"]
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
