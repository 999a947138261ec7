"""Options shared by several commands, defined once."""

from __future__ import annotations

import typer

DEVICE_HELP = "cpu, cuda, cuda:N, or auto (CUDA when available)."
DeviceOpt = typer.Option("auto", "--device", help=DEVICE_HELP)
PrecisionOpt = typer.Option("fp32", "--precision", help="fp32 | bf16 | fp16 (fp16 only on CUDA, with GradScaler).")
ThreadsOpt = typer.Option(0, "--num-threads", min=0, help="CPU intra-op threads (0: torch's default). On a busy "
                         "shared machine 1 can be several times faster than 2.")


def set_threads(n: int) -> None:
    """Apply --num-threads (0 leaves torch's default)."""
    if n > 0:
        import torch

        torch.set_num_threads(n)
