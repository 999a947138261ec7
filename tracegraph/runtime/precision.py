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
    """A mixed-precision policy: the arithmetic precision and the device type it runs on.

    Attributes:
        name: ``"fp32"``, ``"bf16"`` or ``"fp16"``.
        device_type: ``"cpu"`` or ``"cuda"``.
    """

    name: str  # fp32 | bf16 | fp16
    device_type: str  # cpu | cuda

    @property
    def dtype(self) -> torch.dtype | None:
        """The autocast dtype, or None for full fp32."""
        return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[self.name]

    @property
    def needs_scaler(self) -> bool:
        """Whether gradients need loss scaling (fp16 on CUDA)."""
        return self.name == "fp16" and self.device_type == "cuda"

    def autocast(self):
        """A context manager that runs its block under autocast (a no-op for fp32)."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def grad_scaler(self):
        """A GradScaler for fp16 on CUDA; a disabled one otherwise (its calls are no-ops)."""
        return torch.amp.GradScaler(self.device_type, enabled=self.needs_scaler)


def best_half_precision(device: torch.device) -> str:
    """The half precision to use on ``device``: bf16 where supported, else fp16 (CUDA only).

    Args:
        device: The training device.

    Returns:
        ``"bf16"`` or ``"fp16"``.
    """
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16"


def resolve_precision(name: str, device: torch.device, mixed_alias: bool = False) -> Precision:
    """Turn the user's ``--precision`` (and the ``--use-mixed-precision`` alias) into a policy.

    Args:
        name: ``"fp32"``, ``"bf16"`` or ``"fp16"``.
        device: The training device.
        mixed_alias: If true, ``name`` is replaced by :func:`best_half_precision` for ``device``.

    Returns:
        The policy.

    Raises:
        TracegraphError: If the name is unknown, or fp16 is asked for off CUDA.
    """
    if mixed_alias:
        name = best_half_precision(device)
    if name not in CHOICES:
        raise TracegraphError(f"--precision must be one of {', '.join(CHOICES)}, not {name!r}")
    if name == "fp16" and device.type != "cuda":
        raise TracegraphError("--precision fp16 needs a CUDA device; on CPU use bf16 or fp32")
    return Precision(name, device.type)


def resolve_device(name: str | None) -> torch.device:
    """Turn a device name into a device, checking that it is available.

    ``"auto"`` (or None) picks what ``TRACEGRAPH_DEVICE`` names, else CUDA when available, else CPU
    (the test suite sets the variable to ``cpu`` so that only tests marked ``gpu`` touch a GPU).

    Args:
        name: A torch device name such as ``"cpu"``, ``"cuda:1"``, or ``"auto"``/None.

    Returns:
        The device.

    Raises:
        TracegraphError: If the name is not a device or asks for CUDA on a machine without it.
    """
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
    """Allow or forbid TF32 matrix multiplications and convolutions on CUDA.

    Args:
        enabled: Whether TF32 is allowed.
    """
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
    """Apply a training run's math policy for the duration of the block, then restore the old one.

    Tests and notebooks run several things in one process; what one run chose must not leak into
    the next. Without ``deterministic``, cuDNN benchmarks its convolution algorithms.

    Args:
        tf32: Whether TF32 is allowed.
        deterministic: Whether to use deterministic kernels (see :func:`set_deterministic`).

    Yields:
        Nothing; the policy holds inside the block.
    """
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    set_tf32(tf32)
    if deterministic:
        set_deterministic(True)
    else:  # let cuDNN time its convolution algorithms once for ConvE's fixed shapes
        torch.backends.cudnn.benchmark = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.use_deterministic_algorithms(saved[2], warn_only=warn_only)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[3:]


def set_deterministic(enabled: bool) -> None:
    """Use deterministic kernels everywhere (CUDA scatter/index_add, cuDNN, cuBLAS), or stop.

    cuBLAS reads its workspace setting when its handle is created, so call this before the first
    CUDA matrix multiplication.

    Args:
        enabled: Whether deterministic algorithms are required.
    """
    import os

    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(enabled)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = False
