"""Files the facade writes: predictions (``tracegraph predict``) and explanations (``tracegraph explain``).

Writers take records; nothing here opens a run (``Run`` imports this module).

The layers below return records (DataFrames, :class:`~tracegraph.kg.explain.tracin.records.Explanation`);
the CLI, the demo and ``Run`` write them with these functions.
"""

from __future__ import annotations

import csv
from pathlib import Path

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.questions import UNRESOLVED_FILE, UNRESOLVED_HEADER, describe
from tracegraph.kg.explain.tracin.explain import ExplainConfig, run_explain
from tracegraph.kg.explain.tracin.rows import ROLE_COLUMN, ExplainResult
from tracegraph.kg.model.run_evaluation import evaluate_files
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_json, atomic_write_text, read_json
from tracegraph.runtime.distributed import is_main_process

UNRESOLVED = UNRESOLVED_FILE  # the questions explain set aside (--skip-unresolved); the report reads it
N_TEXT = 12  # the label columns of an explanation CSV; then floats, written exactly, and the Role
# what a --skip-existing run must share with the run that wrote the folder, or the folder would mix two listings
SETTINGS_KEPT = ("method", "engine", "loss", "side", "top_k")


# ---------------------------------------------------------------------------------------------- explanations


def write_csv(path, rows, header) -> None:
    """Write one explanation CSV atomically: labels as text, scores as exact float reprs, the role as text.

    Args:
        path: The destination file.
        rows: The rows, label columns first.
        header: The column names.
    """
    with atomic_path(Path(path)) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            row = list(row)
            w.writerow(
                [str(x) for x in row[:N_TEXT]] + [x if isinstance(x, str) else repr(float(x)) for x in row[N_TEXT:]]
            )


def write_explanations(result: ExplainResult, output_dir) -> list[str]:
    """``triple_NNN_<head>_<tail>_tracin.csv`` and ``.json`` per explanation, then ``summary.json``.

    The questions set aside because they name nothing of the run go to ``unresolved.tsv``
    (:func:`write_unresolved`); a folder without such questions this time keeps no earlier one.

    Args:
        result: what :func:`~tracegraph.kg.explain.tracin.explain.run_explain` returned.
        output_dir: the folder (made with its parents).

    Returns:
        The names of the files written, summary.json last.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for e in result.explanations:
        header = list(e.rows.columns)
        rows = [[x if isinstance(x, str) else float(x) for x in r] for r in e.rows.itertuples(index=False)]
        write_csv(out / f"{e.name}_tracin.csv", rows, header)
        atomic_write_json(out / f"{e.name}_tracin.json", dict(e.meta, rows=[dict(zip(header, r)) for r in rows]))
        written += [f"{e.name}_tracin.csv", f"{e.name}_tracin.json"]
    unresolved = result.summary.get("unresolved") or []
    if unresolved:
        write_unresolved(out / UNRESOLVED, unresolved)
        written.append(UNRESOLVED)
    else:
        (out / UNRESOLVED).unlink(missing_ok=True)  # an earlier run's, which summary.json no longer lists
    atomic_write_json(out / "summary.json", result.summary)
    return written + ["summary.json"]


def write_unresolved(path, unresolved: list[dict]) -> None:
    """Write ``unresolved.tsv``: the header ``line<TAB>question<TAB>reason``, then one row per question.

    ``question`` is the question as given, its fields joined by `` | ``; tabs and line ends inside
    a field become spaces, so every row is one line of three fields.

    Args:
        path: The destination file (written atomically).
        unresolved: ``summary.json``'s ``unresolved`` entries (``line``, ``question``, ``reason``).
    """

    def clean(text: str) -> str:
        return " ".join(str(text).replace("\r", " ").replace("\n", " ").split("\t"))

    lines = ["\t".join(UNRESOLVED_HEADER)]
    lines += [f"{u['line']}\t{clean(describe(u['question']))}\t{clean(u['reason'])}" for u in unresolved]
    atomic_write_text(path, "\n".join(lines) + "\n")


def prepare_output_dir(output_dir, cfg: ExplainConfig, overwrite: bool = False) -> None:
    """Refuse an explanation folder already in use, so one folder never mixes two runs' files.

    An empty or missing folder is fine. ``overwrite`` deletes the earlier explanation files
    (``triple_*_tracin.*``, ``summary.json``, ``unresolved.tsv``) first. ``cfg.skip_existing`` keeps them only when the
    folder's summary.json was written with the same method and settings.

    Args:
        output_dir: The explanation folder.
        cfg: The explanation settings.
        overwrite: Delete earlier explanation files.

    Raises:
        TracegraphError: If the folder holds files and neither option allows it, or the settings differ.
    """
    out = Path(output_dir)
    if not out.is_dir() or not any(out.iterdir()):
        return
    if overwrite:
        for p in [
            *out.glob("triple_*_tracin.csv"),
            *out.glob("triple_*_tracin.json"),
            out / "summary.json",
            out / UNRESOLVED,
        ]:
            p.unlink(missing_ok=True)
        return
    if not cfg.skip_existing:
        raise TracegraphError(
            f"{out}: the output folder is not empty; use overwrite=True to replace its explanations "
            f"or skip_existing=True to add to them"
        )
    summary = out / "summary.json"
    if summary.is_file():
        before = read_json(summary)
        now = _settings(cfg)
        differ = [k for k in SETTINGS_KEPT if k in before and before.get(k) != now.get(k)]
        if differ:
            k = differ[0]
            raise TracegraphError(
                f"{out}: skip_existing would mix two explanation runs: the folder's {k} is "
                f"{before[k]!r}, this run's {now[k]!r} (use overwrite, or another folder)"
            )


def _settings(cfg: ExplainConfig) -> dict:
    """The settings of ``cfg`` as summary.json records them."""
    from tracegraph.kg.explain.methods import default_method

    return {
        "method": cfg.method or default_method(cfg.loss),
        "engine": cfg.engine,
        "loss": cfg.loss,
        "side": cfg.side,
        "top_k": cfg.top_k,
    }


def explain_files(cfg: ExplainConfig, train_subsets=None, run=None, questions=None) -> dict:
    """Explain and write the files (rank 0 writes under torchrun).

    Args:
        cfg: The explanation settings.
        train_subsets: ``(head_id, tail_id) -> rows`` of candidate training triples; None for the
            filter that ``cfg`` describes.
        run: An open run to reuse; None opens ``cfg``'s.
        questions: ``cfg``'s questions, resolved already (:func:`~tracegraph.kg.explain.tracin.explain.explain_questions`).

    Returns:
        The summary (as in ``summary.json``).
    """
    result = run_explain(cfg, train_subsets, run=run, questions=questions)
    if is_main_process():
        write_explanations(result, cfg.output_dir)
    return result.summary


__all__ = [
    "evaluate_files",
    "write_csv",
    "write_explanations",
    "write_unresolved",
    "prepare_output_dir",
    "explain_files",
    "ROLE_COLUMN",
    "UNRESOLVED",
]
