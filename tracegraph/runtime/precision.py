"""Precision policy: which autocast dtype and whether a GradScaler is needed, per device.

fp16 needs loss scaling on CUDA (GradScaler); bf16 has fp32's exponent range and needs none.
On CPU, autocast supports bf16 only; fp16 on CPU is refused with a clear message.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from tracegraph.errors import TracegraphError

CHOICES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class Precision:
    name: str  # fp32 | bf16 | fp16
    device_type: str  # cpu | cuda

    @property
    def dtype(self) -> torch.dtype | None:
        return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[self.name]

    @property
    def needs_scaler(self) -> bool:
        return self.name == "fp16" and self.device_type == "cuda"

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def grad_scaler(self):
        """A GradScaler for fp16 on CUDA; a disabled one otherwise (its calls are no-ops)."""
        return torch.amp.GradScaler(self.device_type, enabled=self.needs_scaler)


def best_half_precision(device: torch.device) -> str:
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16"


def resolve_precision(name: str, device: torch.device, mixed_alias: bool = False) -> Precision:
    """Turn the user's --precision (and the --use-mixed-precision alias) into a policy."""
    if mixed_alias:
        name = best_half_precision(device)
    if name not in CHOICES:
        raise TracegraphError(f"--precision must be one of {', '.join(CHOICES)}, not {name!r}")
    if name == "fp16" and device.type != "cuda":
        raise TracegraphError("--precision fp16 needs a CUDA device; on CPU use bf16 or fp32")
    return Precision(name, device.type)


def resolve_device(name: str | None) -> torch.device:
    """'auto' (or None) picks CUDA when available — or what ``TRACEGRAPH_DEVICE`` names (the test
    suite sets it to ``cpu`` so that only tests marked ``gpu`` touch a GPU); an unavailable CUDA
    device is a clear error."""
    if name in (None, "auto"):
        import os

        name = os.environ.get("TRACEGRAPH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise TracegraphError(f"--device {name!r} is not a device name ({e})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise TracegraphError(f"--device {name} requested but CUDA is not available on this machine")
    return dev


# ---------------------------------------------------------------------------------------------
# Device math policy (docs/gpu.md): training may use TF32 (Ampere and newer GPUs round fp32
# matmul inputs to 10 mantissa bits — faster, and harmless to SGD); anything that claims
# exactness (TracIn, loss equivalence) runs with TF32 off; bit-exact reruns on CUDA need
# deterministic kernels, an opt-in that costs speed.


def set_tf32(enabled: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


@contextlib.contextmanager
def exact_fp32():
    """TF32 off inside (restored after): for computations whose exactness we claim."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    set_tf32(False)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@contextlib.contextmanager
def math_mode(tf32: bool, deterministic: bool):
    """A training run's math policy, restored afterwards (tests and notebooks run several things
    in one process; what one run chose must not leak into the next)."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
             torch.backends.cudnn.benchmark)
    set_tf32(tf32)
    if deterministic:
        set_deterministic(True)
    else:  # let cuDNN time its convolution algorithms once for ConvE's fixed shapes
        torch.backends.cudnn.benchmark = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.use_deterministic_algorithms(saved[2])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[3:]


def set_deterministic(enabled: bool) -> None:
    """Deterministic kernels everywhere (CUDA scatter/index_add, cuDNN, cuBLAS). cuBLAS reads its
    workspace setting when its handle is created, so call this before the first CUDA matmul."""
    import os

    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(enabled)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = False
