"""Options shared by several commands, defined once."""

from __future__ import annotations

import typer

DEVICE_HELP = "cpu, cuda, cuda:N, or auto (CUDA when available)."
DeviceOpt = typer.Option("auto", "--device", help=DEVICE_HELP)
PrecisionOpt = typer.Option("fp32", "--precision", help="fp32 | bf16 | fp16 (fp16 only on CUDA, with GradScaler).")
ThreadsOpt = typer.Option(
    0,
    "--num-threads",
    min=0,
    help="CPU intra-op threads (0: torch's default). On a busy shared machine 1 can be several times faster than 2.",
)
# the necessity tests' shared options (fidelity necessity, fidelity compare)
BootstrapOpt = typer.Option(
    1000, "--bootstrap", min=10, help="Bootstrap resamples of the facts for the 95 % intervals."
)
LocalCandidatesOpt = typer.Option(
    8, "--local-candidates", min=1, help="local-retrain: top candidates of the TracIn pre-ranking searched."
)
LocalStepsOpt = typer.Option(60, "--local-steps", min=1, help="local-retrain: Adam steps per mimic embedding.")
MethodLossOpt = typer.Option(
    "logit",
    "--loss",
    help="TracIn loss convention for tracin* / relatif / local-retrain's pre-ranking: logit (-s, what a KvsAll retrain "
    "without the triple changes), score (softplus(-s)) or train-loss (1-N BCE).",
)
MethodLayersOpt = typer.Option("all", "--layers", help="The methods' parameters: all, last:N, or parameter names.")


def set_threads(n: int) -> None:
    """Apply --num-threads (0 leaves torch's default)."""
    if n > 0:
        import torch

        torch.set_num_threads(n)


UNSEEN_HELP = (
    "Valid/test entities never seen in train: include (default; an embedding never trained as a positive, ranked among all "
    "entities, as LibKGE and the ConvE code do), drop (leave those triples out, counted), error (stop)."
)
UnseenOpt = typer.Option("include", "--unseen", help=UNSEEN_HELP)

DatasetOpt = typer.Option(
    None,
    "--dataset",
    help="A dataset by name (`tracegraph data list`): its splits fill whichever of --train/--valid/--test are not given; downloaded sets come from the cache (fill it with `tracegraph data get NAME --from MIRROR` offline).",
)


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


def recorded_split(run, name: str, given):
    """A split file given on the command line (or by --dataset), else the one the run recorded.

    Raises:
        TracegraphError: neither is there (the error names both options).
    """
    if given is not None:
        return given
    recorded = run.data_files.get(name)
    if recorded is None:
        from tracegraph.errors import TracegraphError

        raise TracegraphError(f"give --{name} FILE or --dataset NAME: the run in {run.path} records no {name} file")
    return recorded


def table_console():
    """A stdout console for tables: the terminal's width on a terminal; when piped (batch jobs, files)
    wide enough that no column is ever cut or folded at rich's 80-column default."""
    import sys

    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=1000)


# ---------------------------------------------------------------- the original research scripts' flags
# train_pytorch.py, run_tracin.py and batch_tracin_with_filtering.py (docs/coming-from-scripts.md):
# a flag whose meaning we keep is rewritten to ours before parsing (hidden: never in --help); a flag
# whose meaning is gone is refused with what to do instead, never "corrected" to an unrelated option.


class Renamed:
    """An old flag with our meaning: replaced by ``tokens`` (``{}``: the old flag's value)."""

    def __init__(self, *tokens: str):
        self.tokens = tokens

    @property
    def takes_value(self) -> bool:
        return "{}" in self.tokens


class Gone:
    """An old flag whose meaning tracegraph does not have: refused, saying why and what instead."""

    def __init__(self, why: str):
        self.why = why


_MODEL_PATH = Renamed("--model-dir", "{}")
TRAIN_OLD_FLAGS = {
    "--checkpoint-frequency": Renamed("--checkpoint-every", "{}"),
    "--disable-memory-cleanup": Renamed("--no-memory-cleanup"),
    "--use-gradient-checkpointing": Renamed("--gradient-checkpointing"),
}
RUN_OLD_FLAGS = {"--model-path": _MODEL_PATH}  # evaluate, predict: the run directory or one checkpoint file
FILTER_OLD_FLAGS = {"--output-dir": Renamed("--output", "{}")}
EXPLAIN_OLD_FLAGS = {
    "--model-path": _MODEL_PATH,
    "--test": Renamed("--test-triples", "{}"),
    "--use-mixed-precision": Renamed("--precision", "bf16"),
    "--disable-memory-cleanup": Renamed(),  # explain never empties caches between batches: nothing to disable
    "--enable-multi-gpu": Renamed("--devices", "{cuda}"),
    "--use-last-layers-only": Renamed(),  # with --num-last-layers N: --layers last:N (see translate_old_flags)
    "--num-last-layers": Renamed(),
    "--entity-to-id": Gone("the run directory carries its own id maps (node_dict.txt, rel_dict.txt); drop the flag"),
    "--relation-to-id": Gone("the run directory carries its own id maps (node_dict.txt, rel_dict.txt); drop the flag"),
    "--output": Gone("explain writes a directory of per-triple CSV and JSON files: give -o DIR"),
    "--use-gradient-checkpointing": Gone(
        "exact TracIn keeps no per-example graphs to checkpoint; lower --batch-size to use less memory"
    ),
}
#: every old flag, for the message when a command that does not take it is given one
OLD_FLAG_HINTS = {
    "--checkpoint-frequency": "tracegraph train --checkpoint-every N",
    "--disable-memory-cleanup": "the default (train: --no-memory-cleanup)",
    "--use-gradient-checkpointing": "tracegraph train --gradient-checkpointing",
    "--model-path": "--model-dir (a run directory or one checkpoint file)",
    "--use-last-layers-only": "tracegraph explain --layers last:N",
    "--num-last-layers": "tracegraph explain --layers last:N",
    "--enable-multi-gpu": "tracegraph explain --devices cuda:0,cuda:1 (or torchrun, docs/scaling.md)",
    "--entity-to-id": "tracegraph train --entity-to-id (other commands read the run's own maps)",
    "--relation-to-id": "tracegraph train --relation-to-id (other commands read the run's own maps)",
}


def translate_old_flags(args: list[str], table: dict) -> list[str]:
    """``args`` with the original scripts' flags of ``table`` rewritten to ours.

    Args:
        args: the command's arguments, as click would parse them.
        table: old flag -> :class:`Renamed` or :class:`Gone` (e.g. :data:`EXPLAIN_OLD_FLAGS`).

    Returns:
        The arguments click parses instead.

    Raises:
        TracegraphError: a :class:`Gone` flag, ``--use-last-layers-only`` without ``--num-last-layers``
            (or the reverse), or ``--enable-multi-gpu`` without a CUDA device.
    """
    from tracegraph.errors import TracegraphError

    out: list[str] = []
    last_layers = {"on": False, "n": None}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        name, eq, inline = arg.partition("=")
        rule = table.get(name) if name.startswith("--") else None
        if rule is None:
            out.append(arg)
            i += 1
            continue
        if isinstance(rule, Gone):
            raise TracegraphError(f"{name} (a flag of the original research scripts) is not an option here: {rule.why}")
        value = None
        if rule.takes_value or name == "--num-last-layers":
            if eq:
                value = inline
            elif i + 1 < len(args):
                value, i = args[i + 1], i + 1
            else:
                raise TracegraphError(f"{name} needs a value")
        i += 1
        if name == "--use-last-layers-only":
            last_layers["on"] = True
        elif name == "--num-last-layers":
            last_layers["n"] = value
        else:
            out.extend(_cuda_devices() if t == "{cuda}" else (value if t == "{}" else t) for t in rule.tokens)
    if last_layers["on"] != (last_layers["n"] is not None):
        raise TracegraphError("--use-last-layers-only and --num-last-layers N go together (today: --layers last:N)")
    if last_layers["on"]:
        out += ["--layers", f"last:{last_layers['n']}"]
    return out


def _cuda_devices() -> str:
    from tracegraph.errors import TracegraphError

    import torch

    n = torch.cuda.device_count()
    if n == 0:
        raise TracegraphError("--enable-multi-gpu: no CUDA device is visible")
    return ",".join(f"cuda:{k}" for k in range(n))


# placeholders in an option's help, filled from the methods registry (kg/explain/methods.py) when the help
# is shown: every registered method, or those graded beside the degree / path / random baselines
METHODS_PLACEHOLDER = "{methods}"
GRADED_METHODS_PLACEHOLDER = "{graded_methods}"


def method_list_command():
    """A Typer command class whose options' help lists the registered explanation methods.

    ``{methods}`` and ``{graded_methods}`` in a help text are replaced when the help is shown
    (``fill_help``), so a newly registered method appears without editing the CLI, and the
    registry (numpy, torch) is imported only for ``--help``, not for every command line.

    Returns:
        The command class (``app.command(..., cls=method_list_command())``).
    """
    from typer.core import TyperCommand

    class MethodListCommand(TyperCommand):
        def fill_help(self) -> None:
            """Replace the method-list placeholders in every option's help (idempotent)."""
            keys = (METHODS_PLACEHOLDER, GRADED_METHODS_PLACEHOLDER)
            if not any(k in (getattr(p, "help", None) or "") for p in self.params for k in keys):
                return
            from tracegraph.kg.explain.methods import BASELINE_METHODS, METHODS

            lists = {
                METHODS_PLACEHOLDER: ", ".join(METHODS),
                GRADED_METHODS_PLACEHOLDER: ", ".join(m for m in METHODS if m not in BASELINE_METHODS),
            }
            for p in self.params:
                for key, text in lists.items():
                    if getattr(p, "help", None) and key in p.help:
                        p.help = p.help.replace(key, text)

        def format_help(self, ctx, formatter):
            self.fill_help()
            return super().format_help(ctx, formatter)

    return MethodListCommand


def old_flags_command(table: dict):
    """A Typer command class that accepts the original scripts' flags of ``table`` (hidden aliases):
    ``app.command("explain", cls=old_flags_command(EXPLAIN_OLD_FLAGS))(explain_cmd)``; its help
    lists the registered methods as :func:`method_list_command`'s does."""

    class OldFlagsCommand(method_list_command()):
        def parse_args(self, ctx, args):
            return super().parse_args(ctx, translate_old_flags(list(args), table))

    return OldFlagsCommand


def explain_old_flags_command():
    """The command class for ``tracegraph explain`` (its module registers it): the run_tracin.py and
    batch_tracin_with_filtering.py flags (--model-path, --test, --use-last-layers-only --num-last-layers N,
    --use-mixed-precision, --enable-multi-gpu, --disable-memory-cleanup) as hidden aliases."""
    return old_flags_command(EXPLAIN_OLD_FLAGS)


def tidy_unknown_option(error) -> None:
    """An unknown option's error, made honest: an old script flag says what replaces it, and click's
    "Did you mean" keeps only options spelled nearly the same (never an unrelated one)."""
    import difflib

    name = getattr(error, "option_name", None)
    if type(error).__name__ != "NoSuchOption" or not name:
        return
    if name in OLD_FLAG_HINTS:
        error.possibilities = []
        error.message = (
            f"No such option: {name} (a flag of the original research scripts; today: "
            f"{OLD_FLAG_HINTS[name]}; docs/coming-from-scripts.md)"
        )
        return
    error.possibilities = [
        p for p in (error.possibilities or []) if difflib.SequenceMatcher(None, name, p).ratio() >= 0.8
    ]
