"""Checking that each CLI option reaches the setting it names, from a table written by hand.

A table row is ``(option as typed, value typed or None for a switch, where the setting lands, the
value expected there)``. Each option is given alone on top of a base call; the settings the
command hands on are compared with the base call's: exactly the row's own setting must change,
and to the expected value. So an option that reaches nothing, reaches another setting as well, or
is cross-wired with another (two switches swapped) fails, and no row can pass by expecting the
default.
"""

from __future__ import annotations

from typing import Callable


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
