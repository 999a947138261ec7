"""Options shared by several commands, defined once."""

from __future__ import annotations

import typer

DEVICE_HELP = "cpu, cuda, cuda:N, or auto (CUDA when available)."
DeviceOpt = typer.Option("auto", "--device", help=DEVICE_HELP)
PrecisionOpt = typer.Option("fp32", "--precision", help="fp32 | bf16 | fp16 (fp16 only on CUDA, with GradScaler).")
