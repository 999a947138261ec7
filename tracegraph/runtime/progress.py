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
    """Send the ``tracegraph`` logger to stderr: rich output on a terminal, timestamped lines otherwise.

    Calling it again only changes the level.

    Args:
        verbose: Log DEBUG messages too (INFO and above otherwise).
    """
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


_OUTER_LEVELS: list[int] = []  # the logging level outside each open quiet() block, outermost first


@contextlib.contextmanager
def quiet():
    """Silence inner progress bars and INFO logging for the block (warnings still show).

    For work nested in an outer progress bar (rich live displays clash), such as the retrains of a
    necessity test.

    Yields:
        Nothing; the previous settings are restored on exit.
    """
    old_env, old_level = os.environ.get("TRACEGRAPH_PROGRESS"), log.level
    _OUTER_LEVELS.append(log.getEffectiveLevel())
    os.environ["TRACEGRAPH_PROGRESS"] = "0"
    log.setLevel(max(old_level, logging.WARNING))
    try:
        yield
    finally:
        _OUTER_LEVELS.pop()
        if old_env is None:
            os.environ.pop("TRACEGRAPH_PROGRESS", None)
        else:
            os.environ["TRACEGRAPH_PROGRESS"] = old_env
        log.setLevel(old_level)


def note(message: str) -> None:
    """Log ``message`` at INFO as if no :func:`quiet` block were open.

    For a quieted step's own progress (a retrain's epochs, hours long on a CPU): whether it shows
    is the level outside the blocks, the caller's, not the silenced one inside.

    Args:
        message: The line.
    """
    if (_OUTER_LEVELS[0] if _OUTER_LEVELS else log.getEffectiveLevel()) <= logging.INFO:
        log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, message, None, None))


def progress_enabled() -> bool:
    """Whether to draw progress bars: on a terminal, or when ``TRACEGRAPH_PROGRESS=1`` (``0`` turns them off)."""
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
    """Seconds between progress log lines when no bar is drawn (``TRACEGRAPH_LOG_EVERY``, default 30)."""
    try:
        return float(os.environ.get("TRACEGRAPH_LOG_EVERY", "30"))
    except ValueError:
        return 30.0


class _Progress(Progress):
    """A rich Progress that logs its tasks when it cannot draw.

    When output is not a terminal, each running task is logged every :func:`heartbeat_seconds`: a
    batch job sees an epoch advance, not minutes of silence.
    """

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
    """Describe a progress task for a log line, e.g. ``"epoch 3: 120/1165 (10%), loss 0.0123, 45 s, eta 390 s"``.

    Args:
        task: A rich progress task.

    Returns:
        The description.
    """
    done = f"{task.completed:g}" + (f"/{task.total:g} ({100 * task.completed / task.total:.0f}%)" if task.total else "")
    info = task.fields.get("info")
    parts = [f"{task.description}: {done}"] + ([str(info)] if info else [])
    if task.elapsed is not None:
        parts.append(f"{task.elapsed:.0f} s")
    if task.time_remaining is not None:
        parts.append(f"eta {task.time_remaining:.0f} s")
    return ", ".join(parts)


def make_progress(transient: bool = False) -> Progress:
    """Create a progress display with an ETA; when output is not a terminal, periodic log lines instead.

    Args:
        transient: Remove the bars from the terminal when the display stops.

    Returns:
        The progress display (use it as a context manager).
    """
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
    """Add a bar to ``progress`` and return a callback that advances it by one.

    Args:
        progress: The display, or None for no display.
        description: The bar's label.
        total: Number of steps.

    Returns:
        ``step(info)``, which advances the bar and shows ``info``; it does nothing without a display.
    """
    if progress is None:
        return lambda info: None
    task = progress.add_task(description, total=total, info="")
    return lambda info: progress.update(task, advance=1, info=info)


def eprint(*args, **kwargs) -> None:
    """Print to stderr through the shared rich console (same arguments as ``Console.print``).

    Args:
        *args: Objects to print.
        **kwargs: Options passed to ``Console.print``.
    """
    console.print(*args, **kwargs)


def is_interactive() -> bool:
    """Whether stderr is a terminal."""
    return sys.stderr.isatty()


class DeviceMeter:
    """The epoch's running loss, kept on the device.

    Adding is a few tiny kernels (graph-capturable); reading is the one host sync, done once per
    epoch or every few hundred batches for display. Non-finite losses are counted, not summed; the
    first one's step and value are remembered.

    Args:
        device: The device the losses live on.
    """

    def __init__(self, device):
        import torch

        z = lambda dtype: torch.zeros((), dtype=dtype, device=device)
        self.sum, self.count, self.bad = z(torch.float64), z(torch.int64), z(torch.int64)
        self.first_bad_step, self.first_bad_value = z(torch.int64), z(torch.float64)
        self.reset()

    def reset(self) -> None:  # in place: a captured graph holds these addresses
        """Zero the meter in place (a captured CUDA graph holds these tensors' addresses)."""
        for t in (self.sum, self.count, self.bad, self.first_bad_value):
            t.zero_()
        self.first_bad_step.fill_(-1)

    def add(self, loss) -> None:
        """Add one batch's loss (a scalar tensor) without a host sync.

        Args:
            loss: The batch loss; non-finite values are counted as bad, not summed.
        """
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
        """Read the meter (one host sync).

        Returns:
            ``mean`` (over finite losses), ``count`` (finite losses), ``bad`` (non-finite losses),
            ``first_bad_step`` (-1 if none) and ``first_bad_value``.
        """
        import torch

        parts = [self.sum, self.count.double(), self.bad.double(), self.first_bad_step.double(), self.first_bad_value]
        s, c, b, fs, fv = torch.stack(parts).tolist()  # the one host sync
        return {"mean": s / max(c, 1), "count": int(c), "bad": int(b), "first_bad_step": int(fs), "first_bad_value": fv}
