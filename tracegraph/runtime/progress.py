"""Rich progress bars and logging, shared by every long-running command.

Progress goes to stderr so that stdout stays clean for results; it is disabled automatically
when stderr is not a terminal (CI logs) unless forced.
"""

from __future__ import annotations

import logging
import os
import sys

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)
log = logging.getLogger("tracegraph")


def setup_logging(verbose: bool = False) -> None:
    if log.handlers:
        log.setLevel(logging.DEBUG if verbose else logging.INFO)
        return
    handler = RichHandler(console=console, show_path=False, rich_tracebacks=False, markup=True)
    handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False


def progress_enabled() -> bool:
    if os.environ.get("TRACEGRAPH_PROGRESS") == "0":
        return False
    return console.is_terminal or os.environ.get("TRACEGRAPH_PROGRESS") == "1"


def make_progress(transient: bool = False) -> Progress:
    """A progress display with ETA; a no-op renderer when output is not a terminal."""
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        transient=transient,
        disable=not progress_enabled(),
    )


def eprint(*args, **kwargs) -> None:
    console.print(*args, **kwargs)


def is_interactive() -> bool:
    return sys.stderr.isatty()
