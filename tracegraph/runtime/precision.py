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
    """'auto' (or None) picks CUDA when available; an unavailable CUDA device is a clear error."""
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise TracegraphError(f"--device {name!r} is not a device name ({e})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise TracegraphError(f"--device {name} requested but CUDA is not available on this machine")
    return dev
