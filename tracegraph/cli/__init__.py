"""The `tracegraph` command: a thin Typer skin over the Python API.

Each command group lives in its own module and registers itself here. Heavy imports (torch)
happen inside the commands, so `tracegraph --help` stays fast. A :class:`TracegraphError`
becomes one red line on stderr and exit code 2 — never a traceback.
"""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from tracegraph.errors import TracegraphError


class _Group(TyperGroup):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TracegraphError as e:
            from rich.markup import escape

            from tracegraph.runtime.progress import console

            console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)  # one line, never wrapped
            raise typer.Exit(2) from None


app = typer.Typer(
    cls=_Group,
    name="tracegraph",
    help="ConvE link prediction with exact TracIn explanations, and GT-SSL on geometric trees.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)


def _register() -> None:
    import importlib

    # each module defines register(app); the order is the order of --help
    for mod in ("data", "kg", "tune", "explain", "filter", "demo", "trees", "importers"):
        try:
            module = importlib.import_module(f"tracegraph.cli.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"tracegraph.cli.{mod}":
                raise
            continue
        module.register(app)


_register()


def main() -> None:
    app()
