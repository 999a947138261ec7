"""The `tracegraph` command: a thin Typer skin over the Python API.

Each command group lives in its own module and registers itself here. Heavy imports (torch)
happen inside the commands, so `tracegraph --help` stays fast. A :class:`TracegraphError`
becomes one red line on stderr and exit code 2 — never a traceback.
"""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from tracegraph.errors import TracegraphError


# typer >= 0.20 vendors click (typer._click); its BadParameter's UsageError is the one raised, whichever it is
_UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


class _Group(TyperGroup):
    """The top-level group: every user error, from a bad file to a bad option value, ends as one
    ``error: …`` line on stderr and exit code 2 (option errors name the command's --help)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TracegraphError as e:
            _fail(as_flags(str(e)))
        except _UsageError as e:
            _usage_error(e)

    def parse_args(self, ctx, args):
        try:  # errors before any subcommand runs: an unknown command, a bad global option
            return super().parse_args(ctx, args)
        except _UsageError as e:
            _usage_error(e)


# the library names its Python parameters (top_k=…); the CLI says its flags (--top-k)
_FLAGS = {
    name: "--" + name.replace("_", "-")
    for name in (
        "top_k",
        "side",
        "method",
        "engine",
        "loss",
        "layers",
        "devices",
        "overwrite",
        "skip_existing",
        "output_dir",
        "skip_unresolved",
    )
}


def as_flags(message: str) -> str:
    """A library error's leading parameter name (at the start, or after a ``path: ``) as the flag."""
    import re

    names = "|".join(_FLAGS)
    message = re.sub(r"\b(" + names + r")=True\b", lambda m: _FLAGS[m.group(1)], message)  # a switch to turn on
    return re.sub(r"(^|: )(" + names + r")\b", lambda m: m.group(1) + _FLAGS[m.group(2)], message)


def _usage_error(e):
    if type(e).__name__ == "NoArgsIsHelpError":  # `tracegraph data` alone: the help, as asked
        raise e
    from tracegraph.cli.common import tidy_unknown_option

    tidy_unknown_option(e)  # an old script flag says what replaces it; no unrelated "did you mean"
    where = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
    _fail(e.format_message().replace("\n", " ") + where)


def _fail(message: str):
    from rich.markup import escape

    from tracegraph.runtime.progress import console

    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)  # one line, never wrapped
    raise typer.Exit(2) from None


app = typer.Typer(
    cls=_Group,
    name="tracegraph",
    help="ConvE link prediction with exact TracIn explanations, and GT-SSL on geometric trees.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain click help: wraps at any width, never truncates option names (rich tables cut them)
)


def _print_version(value: bool) -> None:
    if value:
        from tracegraph import __version__

        typer.echo(f"tracegraph {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    pass


def _register() -> None:
    import importlib

    # each module defines register(app); the order is the order of --help
    for mod in ("data", "kg", "tune", "explain", "filter", "report", "demo", "trees", "importers"):
        importlib.import_module(f"tracegraph.cli.{mod}").register(app)  # a broken module is an error, not a gap


_register()


def main() -> None:
    app()
