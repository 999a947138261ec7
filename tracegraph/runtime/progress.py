"""Rich progress bars and logging, shared by every long-running command.

Progress goes to stderr so that stdout stays clean for results; it is disabled automatically
when stderr is not a terminal (CI logs, batch jobs) unless forced. Then a long task still reports:
one log line every ``$TRACEGRAPH_LOG_EVERY`` seconds (default 30) with its count, rate and ETA, and
log lines are plain ``time level message`` lines, never wrapped at 80 columns.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time

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
    if console.is_terminal:
        handler = RichHandler(console=console, show_path=False, rich_tracebacks=False, markup=True)
        handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
    else:  # a file or a pipe: one unwrapped line per message, greppable
        handler = _CurrentStderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", datefmt="%Y-%m-%d %H:%M:%S"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False


@contextlib.contextmanager
def quiet():
    """Silence inner progress bars and INFO logging (warnings still show): for work nested in an
    outer progress bar — rich live displays clash — such as the retrains of a necessity test."""
    old_env, old_level = os.environ.get("TRACEGRAPH_PROGRESS"), log.level
    os.environ["TRACEGRAPH_PROGRESS"] = "0"
    log.setLevel(max(old_level, logging.WARNING))
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop("TRACEGRAPH_PROGRESS", None)
        else:
            os.environ["TRACEGRAPH_PROGRESS"] = old_env
        log.setLevel(old_level)


def progress_enabled() -> bool:
    if os.environ.get("TRACEGRAPH_PROGRESS") == "0":
        return False
    return console.is_terminal or os.environ.get("TRACEGRAPH_PROGRESS") == "1"


class _CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (test runners swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


def heartbeat_seconds() -> float:
    try:
        return float(os.environ.get("TRACEGRAPH_LOG_EVERY", "30"))
    except ValueError:
        return 30.0


class _Progress(Progress):
    """A rich Progress that, when it cannot draw (not a terminal), logs each running task every
    :func:`heartbeat_seconds` instead: a batch job sees an epoch advance, not minutes of silence."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._heartbeat = heartbeat_seconds() if self.disable and heartbeat_seconds() > 0 else None
        self._last_beat: dict = {}

    def update(self, task_id, **kwargs) -> None:
        super().update(task_id, **kwargs)
        if self._heartbeat is None:
            return
        now = time.monotonic()
        last = self._last_beat.setdefault(task_id, now)
        if now - last >= self._heartbeat:
            self._last_beat[task_id] = now
            log.info(describe_task(self._tasks[task_id]))


def describe_task(task) -> str:
    """'epoch 3: 120/1165 (10%), loss 0.0123, 45 s, eta 390 s' for a log line."""
    done = f"{task.completed:g}" + (f"/{task.total:g} ({100 * task.completed / task.total:.0f}%)" if task.total else "")
    info = task.fields.get("info")
    parts = [f"{task.description}: {done}"] + ([str(info)] if info else [])
    if task.elapsed is not None:
        parts.append(f"{task.elapsed:.0f} s")
    if task.time_remaining is not None:
        parts.append(f"eta {task.time_remaining:.0f} s")
    return ", ".join(parts)


def make_progress(transient: bool = False) -> Progress:
    """A progress display with ETA; when output is not a terminal, periodic log lines instead."""
    return _Progress(
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


def step_callback(progress: Progress | None, description: str, total: int):
    """A new bar on ``progress`` and a callback ``step(info)`` that advances it by one and shows
    ``info``; without a progress display, a callback that does nothing."""
    if progress is None:
        return lambda info: None
    task = progress.add_task(description, total=total, info="")
    return lambda info: progress.update(task, advance=1, info=info)


def eprint(*args, **kwargs) -> None:
    console.print(*args, **kwargs)


def is_interactive() -> bool:
    return sys.stderr.isatty()


class DeviceMeter:
    """The epoch's running loss, kept on the device: adding is a few tiny kernels (graph-capturable),
    reading is the one host sync, done once per epoch or every few hundred batches for display.
    Non-finite losses are counted, not summed; the first one's step and value are remembered."""

    def __init__(self, device):
        import torch

        z = lambda dtype: torch.zeros((), dtype=dtype, device=device)
        self.sum, self.count, self.bad = z(torch.float64), z(torch.int64), z(torch.int64)
        self.first_bad_step, self.first_bad_value = z(torch.int64), z(torch.float64)
        self.reset()

    def reset(self) -> None:  # in place: a captured graph holds these addresses
        for t in (self.sum, self.count, self.bad, self.first_bad_value):
            t.zero_()
        self.first_bad_step.fill_(-1)

    def add(self, loss) -> None:
        import torch

        loss = loss.detach().double()
        finite = torch.isfinite(loss)
        first = (self.first_bad_step < 0) & ~finite
        self.first_bad_step.copy_(torch.where(first, self.count + self.bad, self.first_bad_step))
        self.first_bad_value.copy_(torch.where(first, loss, self.first_bad_value))
        self.sum.add_(torch.where(finite, loss, torch.zeros_like(loss)))
        self.count.add_(finite.long())
        self.bad.add_((~finite).long())

    def read(self) -> dict:
        import torch

        parts = [self.sum, self.count.double(), self.bad.double(), self.first_bad_step.double(), self.first_bad_value]
        s, c, b, fs, fv = torch.stack(parts).tolist()  # the one host sync
        return {"mean": s / max(c, 1), "count": int(c), "bad": int(b), "first_bad_step": int(fs), "first_bad_value": fv}
