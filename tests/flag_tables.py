"""Checking that each CLI option reaches the setting it names, from a table written by hand.

A table row is ``(option as typed, value typed or None for a switch, where the setting lands, the
value expected there)``. Each option is given alone on top of a base call; the settings the
command hands on are compared with the base call's: exactly the row's own setting must change,
and to the expected value. So an option that reaches nothing, reaches another setting as well, or
is cross-wired with another (two switches swapped) fails, and no row can pass by expecting the
default.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable


def stand_in(monkeypatch, module, name: str, got: dict, key: str | None = None, returns=None, like=None):
    """Replace ``module.name`` by a stand-in that records its arguments in ``got[key or name]``.

    The arguments are bound by the real function's parameter names (or by ``like``'s, for a
    function that hands its keywords on to it), defaults applied (a setting not passed holds the
    function's default), so a table names where a setting lands by the parameter's name. The
    stand-in returns ``returns`` (called with the bound arguments when callable). Installed again
    over itself, it still binds by the real function.
    """
    real = inspect.unwrap(getattr(module, name))
    signature = inspect.signature(like or real)

    def fake(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        got[key or name] = bound.arguments
        return returns(bound.arguments) if callable(returns) else returns

    fake.__wrapped__ = real
    monkeypatch.setattr(module, name, fake)


def plain(value):
    """Paths as strings and sequences as lists, so a setting compares with a table's value."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value


class FakeRun:
    """The run a command opens (``tracegraph.kg.run.Run``): what it was opened with, and the filter options asked of it."""

    opened: list = []

    def __init__(self, model_dir, device="auto", data_files=None, stand_in=None):
        self.path, self.device, self.data_files, self.stand_in = model_dir, device, dict(data_files or {}), stand_in
        self.subsets_asked = []
        FakeRun.opened.append(self)

    def training_subsets(self, train, opts):
        self.subsets_asked.append((train, opts))
        return {}


def options_of(*path: str) -> set[str]:
    """The first spelling of every option of the command at ``path`` (``("fidelity", "compare")``)."""
    import typer.main

    from tracegraph.cli import app

    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]
    return {p.opts[0] for p in cmd.params}


def tabled(table) -> set[str]:
    """The options a table covers, a ``--no-x`` switch counted as its ``--x`` option."""
    return {o.replace("--no-", "--", 1) for o, *_ in table}


def arguments(option: str, value) -> list[str]:
    """The option as typed: a switch alone, a value after it, a tuple of values as the option repeated."""
    if value is None:
        return [option]
    return [a for v in (value if isinstance(value, tuple) else (value,)) for a in (option, str(v))]


def misrouted(table, invoke: Callable[[list[str]], object], landed: Callable[[object, str], object], fixed=()) -> dict:
    """Options that, given alone, do not change exactly their own settings to the expected values.

    An option may set several settings: one row each, same option and value.

    Args:
        table: The rows.
        invoke: Runs the command with these extra arguments; returns what it handed on.
        landed: ``(what was handed on, where) -> the setting's value``.
        fixed: Options the base call already gives (required ones): given again they change
            nothing, and the base call must already hold the rows' values.

    Returns:
        ``{option: (settings that changed, {where: value found}, {where: value expected})}``; empty
        when all is well.
    """
    wheres = list(dict.fromkeys(w for _, _, w, _ in table))
    base = invoke([])
    before = {w: landed(base, w) for w in wheres}
    rows: dict[str, tuple] = {}
    for option, value, where, want in table:
        rows.setdefault(option, (value, {}))[1][where] = want
    out = {}
    for option, (value, wants) in rows.items():
        got = invoke(arguments(option, value))
        after = {w: landed(got, w) for w in wheres}
        changed = {w for w in wheres if after[w] != before[w]}
        found = {w: after[w] for w in wants}
        if changed != (set() if option in fixed else set(wants)) or found != wants:
            out[option] = (changed, found, wants)
    return out
