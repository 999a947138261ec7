"""runtime/progress.py by hand: the training loss meter (the mean of the finite losses, the
non-finite ones counted and the first remembered), the log line a long task writes when no bar is
drawn, when bars are drawn, ``quiet()`` (bars off on a terminal too; an unset variable left unset
whatever the block did), and the logging set-up.

References: numbers and lines written out here.
"""

import logging
import math
from types import SimpleNamespace

import pytest
import torch

from tests.conftest import log_lines
from tracegraph.runtime import progress as P


def test_the_meter_averages_finite_losses_and_remembers_the_first_bad_one():
    m = P.DeviceMeter("cpu")
    for v in (1.0, 2.0, float("nan"), 4.0, float("inf")):
        m.add(torch.tensor(v, dtype=torch.float32))
    got = m.read()
    assert (got["mean"], got["count"], got["bad"], got["first_bad_step"]) == (7 / 3, 3, 2, 2)
    assert math.isnan(got["first_bad_value"])
    m.reset()
    assert m.read() == {"mean": 0.0, "count": 0, "bad": 0, "first_bad_step": -1, "first_bad_value": 0.0}
    m.add(torch.tensor(0.1, dtype=torch.bfloat16))  # summed in float64: the bf16 value exactly
    m.add(torch.tensor(-float("inf")))
    got = m.read()
    assert got["mean"] == float(torch.tensor(0.1, dtype=torch.bfloat16).double()) and got["first_bad_step"] == 1
    assert got["first_bad_value"] == -math.inf


def task(**kw):
    base = dict(
        description="epoch 3",
        completed=120,
        total=1165,
        fields={"info": "loss 0.0123"},
        elapsed=45.2,
        time_remaining=390.4,
    )
    return SimpleNamespace(**{**base, **kw})


def test_a_task_is_described_in_one_line():
    assert P.describe_task(task()) == "epoch 3: 120/1165 (10%), loss 0.0123, 45 s, eta 390 s"
    assert P.describe_task(task(total=None, fields={}, elapsed=None, time_remaining=None)) == "epoch 3: 120"
    assert (
        P.describe_task(task(completed=2.5, total=4, fields={"info": ""}, time_remaining=None))
        == "epoch 3: 2.5/4 (62%), 45 s"
    )


def test_the_heartbeat_interval_reads_the_variable(monkeypatch):
    monkeypatch.delenv("TRACEGRAPH_LOG_EVERY", raising=False)
    assert P.heartbeat_seconds() == 30.0
    monkeypatch.setenv("TRACEGRAPH_LOG_EVERY", "2.5")
    assert P.heartbeat_seconds() == 2.5
    monkeypatch.setenv("TRACEGRAPH_LOG_EVERY", "often")
    assert P.heartbeat_seconds() == 30.0


def test_bars_are_drawn_on_a_terminal_or_when_forced(monkeypatch):
    monkeypatch.setattr(type(P.console), "is_terminal", property(lambda self: False))
    monkeypatch.delenv("TRACEGRAPH_PROGRESS", raising=False)
    assert not P.progress_enabled()
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "1")
    assert P.progress_enabled()
    monkeypatch.setattr(type(P.console), "is_terminal", property(lambda self: True))
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "0")
    assert not P.progress_enabled()
    monkeypatch.delenv("TRACEGRAPH_PROGRESS")
    assert P.progress_enabled()


@pytest.fixture
def lines():
    with log_lines(P.log) as got:
        yield got


@pytest.mark.parametrize("every,forced,logged", [("1e-9", "0", 2), ("0", "0", 0), ("1e-9", "1", 0), ("3600", "0", 0)])
def test_without_bars_a_task_logs_its_progress_every_interval(monkeypatch, lines, every, forced, logged):
    monkeypatch.setenv("TRACEGRAPH_LOG_EVERY", every)
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", forced)
    with P.make_progress() as progress:
        step = P.step_callback(progress, "epoch 1", 3)
        for i in range(3):  # the first update starts the clock; each later one is a beat apart
            step(f"loss {i}")
        assert progress.tasks[0].completed == 3 and progress.tasks[0].fields["info"] == "loss 2"
    assert len(lines) == logged
    if logged:
        assert lines[-1].startswith("epoch 1: 3/3 (100%), loss 2")


def test_a_step_callback_without_a_display_does_nothing():
    assert P.step_callback(None, "x", 3)("info") is None


def test_quiet_silences_bars_and_info_and_restores_both(monkeypatch, lines):
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "1")
    with P.quiet():
        assert not P.progress_enabled() and P.log.level == logging.WARNING
        P.log.info("hidden")
        P.log.warning("shown")
    assert P.progress_enabled() and P.log.level == logging.INFO and lines == ["shown"]
    monkeypatch.delenv("TRACEGRAPH_PROGRESS")
    with pytest.raises(RuntimeError), P.quiet():
        raise RuntimeError
    assert "TRACEGRAPH_PROGRESS" not in __import__("os").environ and P.log.level == logging.INFO
    P.log.setLevel(logging.ERROR)
    with P.quiet():  # never lowers a stricter level
        assert P.log.level == logging.ERROR


def test_a_note_shows_inside_quiet_blocks_as_the_level_outside_them_allows(lines):
    with P.quiet():
        P.note("epoch 1 of 2")
        P.log.info("hidden")
        with P.quiet():
            P.note("nested")
    P.log.setLevel(logging.WARNING)  # a caller that asked for warnings only gets no note either
    with P.quiet():
        P.note("not shown")
    P.note("not shown either")
    P.log.setLevel(logging.INFO)
    P.note("outside")
    with pytest.raises(RuntimeError), P.quiet():
        raise RuntimeError
    assert lines == ["epoch 1 of 2", "nested", "outside"] and P._OUTER_LEVELS == []


def test_quiet_turns_bars_off_on_a_terminal_too(monkeypatch):
    monkeypatch.setattr(type(P.console), "is_terminal", property(lambda self: True))
    monkeypatch.delenv("TRACEGRAPH_PROGRESS", raising=False)
    assert P.progress_enabled()
    with P.quiet():
        assert not P.progress_enabled()
        with P.make_progress() as progress:
            assert progress.disable
    assert P.progress_enabled()


def test_quiet_restores_an_unset_variable_even_when_the_block_removed_it(monkeypatch):
    import os

    monkeypatch.delenv("TRACEGRAPH_PROGRESS", raising=False)
    with P.quiet():
        del os.environ["TRACEGRAPH_PROGRESS"]
    assert "TRACEGRAPH_PROGRESS" not in os.environ


def test_logging_off_a_terminal_is_one_timestamped_line_and_set_up_once(monkeypatch, capsys):
    monkeypatch.setattr(P.log, "handlers", [])
    monkeypatch.setattr(type(P.console), "is_terminal", property(lambda self: False))
    level, propagate = P.log.level, P.log.propagate
    try:
        P.setup_logging()
        P.setup_logging(verbose=True)  # only the level changes
        assert len(P.log.handlers) == 1 and P.log.level == logging.DEBUG and not P.log.propagate
        P.log.debug(" ".join(["x"] * 60))  # longer than 80 columns: still one line
        err = capsys.readouterr().err
        date, clock, level_name, *words = err.rstrip("\n").split(" ")
        assert len(err.splitlines()) == 1 and level_name == "DEBUG" and words == ["x"] * 60
        assert len(date) == 10 and date[4] == date[7] == "-" and len(clock) == 8 and clock[2] == clock[5] == ":"
    finally:
        P.log.setLevel(level)
        P.log.propagate = propagate


def test_the_meter_sums_in_float64_and_keeps_the_very_first_bad_loss():
    m = P.DeviceMeter("cpu")
    for v in (1e8, 1.0):  # float32 would round the sum to 1e8
        m.add(torch.tensor(v, dtype=torch.float64))
    assert m.read()["mean"] == 50000000.5
    m.reset()
    for v in (float("nan"), 1.0, -float("inf")):  # a bad loss at step 0 stays the first one
        m.add(torch.tensor(v))
    got = m.read()
    assert got["first_bad_step"] == 0 and math.isnan(got["first_bad_value"]) and got["bad"] == 2


@pytest.fixture
def terminal(monkeypatch):
    """The module's console as a 200-column terminal writing into a buffer."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    monkeypatch.setattr(P, "console", Console(file=buf, force_terminal=True, width=200, color_system=None))
    return buf


def test_on_a_terminal_logging_is_rich_with_markup_a_clock_and_no_paths(monkeypatch, terminal):
    import re

    monkeypatch.setattr(P.log, "handlers", [])
    level, propagate = P.log.level, P.log.propagate
    try:
        P.setup_logging(verbose=True)
        assert P.log.level == logging.DEBUG
        P.log.handlers.clear()
        P.setup_logging()
        assert P.log.level == logging.INFO  # quiet unless asked
        P.log.info("[bold]done[/bold] at step 3")
        try:
            raise ValueError("boom")
        except ValueError:
            P.log.exception("failed")
        out = terminal.getvalue()
        first = out.splitlines()[0]
        assert re.match(r"^\[\d\d:\d\d:\d\d\] +INFO +done at step 3\s*$", first), first  # markup rendered, no path
        assert ".py:" not in out and "[bold]" not in out
        assert "Traceback (most recent call last):" in out and "╭" not in out  # a plain traceback
        P.setup_logging(verbose=True)
        assert P.log.level == logging.DEBUG and len(P.log.handlers) == 1
        P.setup_logging()
        assert P.log.level == logging.INFO
    finally:
        P.log.setLevel(level)
        P.log.propagate = propagate


def test_a_bar_shows_its_task_count_info_and_times(monkeypatch, terminal):
    import re

    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "1")
    progress = P.make_progress()
    assert progress.live.transient is False and P.make_progress(transient=True).live.transient is True
    with progress:
        step = P.step_callback(progress, "epoch 1", 5)
        assert progress.tasks[0].fields["info"] == ""  # nothing shown before the first step
        step("loss 0.5")
        step("loss 0.25")
        step("loss 0.125")
        progress.refresh()
        line = [ln for ln in terminal.getvalue().splitlines() if "epoch 1" in ln][-1]
    # spinner, name, bar, done/total, info, elapsed, "eta", remaining
    pattern = r"^(\x1b\[2K)?\S epoch 1 ━+ +3/5 loss 0\.125 \d+:\d\d:\d\d eta (\d+:\d\d:\d\d|-:--:--)$"
    assert re.match(pattern, line.rstrip()), line


def test_the_heartbeat_logs_when_its_interval_has_passed_per_task(monkeypatch, lines):
    clock = iter([0.0, 30.0, 40.0, 60.0, 100.0])
    monkeypatch.setattr(P.time, "monotonic", lambda: next(clock))
    monkeypatch.setenv("TRACEGRAPH_LOG_EVERY", "30")
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "0")
    with P.make_progress() as progress:
        a = progress.add_task("a", total=9, info="")
        b = progress.add_task("b", total=9, info="")
        progress.update(a, advance=1)  # t=0: a's clock starts
        progress.update(a, advance=1)  # t=30: exactly one interval: a beat
        progress.update(b, advance=1)  # t=40: b's clock starts, a's beat does not count for it
        progress.update(a, advance=1)  # t=60: 30 since a's last beat
        progress.update(b, advance=1)  # t=100: 60 since b started
    assert [ln.split(":")[0] for ln in lines] == ["a", "a", "b"]


def test_eprint_prints_through_the_console(terminal):
    P.eprint("hello", "world", end="!")
    assert terminal.getvalue() == "hello world!"
