"""The Typer app as a plain click command, for sphinx-click's CLI reference.

``command`` is ``typer.main.get_command(tracegraph.cli.app)``. Typer >= 0.20 ships its own
trimmed copy of click whose classes sphinx-click does not recognise, so the command tree is
mirrored once into real click objects with the same names, help texts and option
declarations: the reference is generated from the app, never copied by hand.
"""

from __future__ import annotations

import re

import click
import typer

import tracegraph.cli

typer_command = typer.main.get_command(tracegraph.cli.app)


def _rst(text: str | None) -> str | None:
    """Help text is plain prose; sphinx-click reads it as reStructuredText, where * and | are markup."""
    return None if text is None else text.replace("*", r"\*").replace("|", r"\|")


def _default(param):
    value = param.default
    if callable(value) or type(value).__name__.endswith("Sentinel") or value is ...:
        return None
    return value


def _metavar(param, ctx) -> str | None:
    """The metavar Typer's own help shows (``--model-dir <path>`` -> ``<path>``)."""
    record = param.get_help_record(ctx)
    found = re.search(r" <(.+)>(?:\.\.\.)?$", record[0]) if record else None
    if not found:
        return None
    listed = re.fullmatch(r"list\[(\w+)\]", found.group(1))  # a repeatable option: name the item type
    return listed.group(1) if listed else found.group(1)


def _param(param, ctx) -> click.Parameter:
    if type(param).__name__.endswith("Argument"):
        return click.Argument([param.name], required=param.required, nargs=param.nargs, metavar=param.metavar)
    decls = list(param.opts)
    if param.secondary_opts:  # a --flag/--no-flag pair
        decls = [f"{'/'.join(param.opts)}/{'/'.join(param.secondary_opts)}"]
    default = _default(param)
    return click.Option(
        [*decls, param.name],
        help=_rst(param.help),
        metavar=_metavar(param, ctx),
        required=param.required,
        is_flag=bool(param.is_flag),
        multiple=bool(param.multiple),
        default=default if not param.is_flag or isinstance(default, bool) else None,
        show_default=bool(param.show_default) and default is not None and not param.is_flag,
        hidden=bool(param.hidden),
    )


def _mirror(cmd) -> click.Command:
    ctx = typer._click.core.Context(cmd)
    if hasattr(cmd, "fill_help"):  # option help that lists the registered methods (tracegraph/cli/common.py)
        cmd.fill_help()
    params = [_param(p, ctx) for p in cmd.params if p.name != "help"]
    if hasattr(cmd, "commands"):
        group = click.Group(cmd.name, help=_rst(cmd.help), short_help=_rst(cmd.short_help), params=params)
        for sub in cmd.commands.values():
            group.add_command(_mirror(sub))
        return group
    return click.Command(
        cmd.name,
        help=_rst(cmd.help),
        short_help=_rst(cmd.short_help),
        params=params,
        hidden=bool(getattr(cmd, "hidden", False)),
    )


command = _mirror(typer_command)
