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


UNSEEN_HELP = ("Valid/test entities never seen in train: include (default; an embedding never trained as a positive, ranked among all "
               "entities, as LibKGE and the ConvE code do), drop (leave those triples out, counted), error (stop).")
UnseenOpt = typer.Option("include", "--unseen", help=UNSEEN_HELP)

DatasetOpt = typer.Option(None, "--dataset", help="A dataset by name (`tracegraph data list`): its splits fill whichever of --train/--valid/--test are not given; downloaded sets come from the cache (fill it with `tracegraph data get NAME --from MIRROR` offline).")


def dataset_splits(dataset: str | None, required: tuple[str, ...], **given):
    """Fill the split files (train=…, valid=…, test=…) not given explicitly from ``--dataset``;
    a ``required`` one still missing is an error naming both options."""
    from pathlib import Path

    from tracegraph.errors import TracegraphError

    if dataset is not None:
        from tracegraph.kg.data.datasets import split_paths

        paths = split_paths(dataset)
        given = {k: v if v is not None else Path(paths[k]) for k, v in given.items()}
    for name in required:
        if given[name] is None:
            raise TracegraphError(f"give --{name} FILE or --dataset NAME")
    return given


def table_console():
    """A stdout console for tables: the terminal's width on a terminal; when piped (batch jobs, files)
    wide enough that no column is ever cut or folded at rich's 80-column default."""
    import sys

    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=1000)
