"""Reading KGX node and edge files: TSV and JSON Lines, told apart by their content.

KGX TSV (``*_nodes.tsv`` / ``*_edges.tsv``, what ROBOKOP, Monarch and RTX-KG2 ship) has a header line
of column names; multivalued fields (``category``, ``xref``, ``publications``…) hold their values
separated by ``|``, and an empty field is an absent one. KGX JSON Lines holds one JSON object per
line. Either way a record comes out as a dict, with the line it came from. Any other format is
refused with its name and the ``kgx transform`` command that converts it.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from tracegraph.errors import DataError
from tracegraph.kg.data.tsv import read_text

#: TSV columns read as lists (the others stay one string, ``|`` and all)
MULTIVALUED = ("category",)
SUFFIXES = {".tsv": "tsv", ".jsonl": "jsonl"}
WHAT = {"tsv": "KGX TSV file", "jsonl": "JSON Lines file", None: "KGX file"}
CONVERT = "convert it to KGX TSV with `kgx transform --input-format {fmt} --output-format tsv --output OUT {path}`"


def _suffix_format(path: Path) -> str | None:
    name = path.name.lower().removesuffix(".gz")
    return next((fmt for suffix, fmt in SUFFIXES.items() if name.endswith(suffix)), None)


def _refuse_archives(path: Path) -> None:
    name = path.name.lower()
    if name.endswith((".tar.gz", ".tgz", ".tar", ".zip")):
        raise DataError(
            "an archive, not a KGX file: unpack it (tar -xzf, unzip) and give the *_nodes.tsv and "
            "*_edges.tsv inside, or the folder that holds them",
            path,
        )


def kgx_format(path: Path, text: str) -> str:
    """Which KGX format ``text`` is in: ``"tsv"`` or ``"jsonl"``, by its first line, else by its name.

    The content decides first, so a TSV file named ``.jsonl`` is read as TSV rather than reported as
    invalid JSON.

    Args:
        path: The file (for its suffix and the messages).
        text: Its text.

    Returns:
        ``"tsv"`` or ``"jsonl"``.

    Raises:
        DataError: If the text is KGX JSON, CSV, RDF or unrecognisable, naming what it looks like
            and how to convert it.
    """
    first = next((line.strip() for line in text.split("\n") if line.strip()), "")
    name = path.name.lower().removesuffix(".gz")
    if "\t" in first and not first.startswith("{"):
        return "tsv"
    if first.startswith("[") or first.startswith("{") and _json_document(text, first):
        raise DataError(
            'KGX JSON (one object with "nodes" and "edges" lists) is not read: '
            + CONVERT.format(fmt="json", path=path),
            path,
        )
    if first.startswith("{"):
        return "jsonl"
    if not first:  # the caller says it is empty
        return _suffix_format(path) or "jsonl"
    if name.endswith((".nt", ".ttl", ".owl", ".rdf")) or first.startswith(("<", "@prefix")):
        raise DataError("RDF (N-Triples, Turtle or OWL) is not read: " + CONVERT.format(fmt="nt", path=path), path)
    if name.endswith(".csv") or "," in first:
        raise DataError(
            "this looks like CSV (comma-separated); KGX TSV is tab-separated: " + CONVERT.format(fmt="csv", path=path),
            path,
        )
    if _suffix_format(path):  # its parser names the bad line
        return _suffix_format(path)
    raise DataError(
        "cannot tell the format: a KGX file is TSV (a first line of tab-separated column names, "
        "*_nodes.tsv / *_edges.tsv) or JSON Lines (one JSON object per line, *.jsonl)",
        path,
    )


def _json_document(text: str, first: str) -> bool:
    """Whether ``text`` is one JSON document (KGX JSON) rather than one object per line."""
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:  # the first line alone is not a value: a document spread over lines?
        try:
            json.loads(text)
        except json.JSONDecodeError:
            return False
        return True
    lists = isinstance(obj, dict) and any(isinstance(obj.get(k), list) for k in ("nodes", "edges"))
    return lists and text.strip() == first


def read_records(path: str | Path, required: tuple[str, ...] = ()) -> list[tuple[int, dict]]:
    """Every record of a KGX nodes or edges file, TSV or JSON Lines, with its line number.

    Args:
        path: The file (``.gz`` is decompressed).
        required: Columns a TSV header line must name (JSON Lines records are checked by the caller).

    Returns:
        ``(line, record)`` pairs. A TSV record holds its non-empty fields, ``category`` split on ``|``.

    Raises:
        DataError: If the file is missing, empty, in another format, or a line is malformed.
    """
    path = Path(path)
    _refuse_archives(path)
    text = read_text(path, WHAT[_suffix_format(path)])
    fmt = kgx_format(path, text)
    records = _tsv(path, text, required) if fmt == "tsv" else _jsonl(path, text)
    if not records:
        raise DataError(f"{WHAT[fmt]} is empty" + (" (a header line only)" if text.strip() else ""), path)
    return records


def _jsonl(path: Path, text: str) -> list[tuple[int, dict]]:
    out = []
    for no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON: {e.msg}", path, no) from None
        if not isinstance(obj, dict):
            raise DataError("each line must be a JSON object", path, no)
        out.append((no, obj))
    return out


def _tsv(path: Path, text: str, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    # KGX writes TSV unquoted: a quote is part of the value, one record per line
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE, strict=True)
    header: list[str] | None = None
    out = []
    old_limit = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)  # a publications field of a large export passes csv's 128 KiB default
    try:
        for row in reader:
            if not any(field.strip() for field in row):
                continue
            if header is None:
                header = _header(row, path, reader.line_num, required)
                continue
            if len(row) != len(header):
                raise DataError(
                    f"expected {len(header)} tab-separated fields (as the header line has), found {len(row)}",
                    path,
                    reader.line_num,
                )
            out.append((reader.line_num, _tsv_record(header, row)))
    except csv.Error as e:
        raise DataError(f"not readable as TSV ({e})", path, reader.line_num) from None
    finally:
        csv.field_size_limit(old_limit)
    return out


def _header(row: list[str], path: Path, no: int, required: tuple[str, ...]) -> list[str]:
    names = [name.strip() for name in row]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DataError(f"the header line names column {repeated[0]!r} twice", path, no)
    missing = [c for c in required if c not in names]
    if missing:
        shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
        raise DataError(f"the header line has no {missing[0]!r} column (it names {shown})", path, no)
    return names


def _tsv_record(header: list[str], row: list[str]) -> dict:
    rec: dict = {}
    for key, value in zip(header, row):
        if value == "":
            continue
        rec[key] = [v for v in value.split("|") if v] if key in MULTIVALUED else value
    return rec


def find_pair(folder: str | Path) -> tuple[Path, Path]:
    """The one KGX nodes file and the one edges file in ``folder``.

    Nodes files end in ``nodes.tsv`` or ``nodes.jsonl`` (``.gz`` too: ``robokop_nodes.tsv``,
    ``nodes.jsonl.gz``), edges files likewise in ``edges.…``.

    Args:
        folder: The folder.

    Returns:
        ``(nodes file, edges file)``.

    Raises:
        DataError: If the folder holds no such file, or several of one kind.
    """
    folder = Path(folder)
    found = {}
    for kind in ("nodes", "edges"):
        ends = tuple(f"{kind}{suffix}{gz}" for suffix in SUFFIXES for gz in ("", ".gz"))
        hits = sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(ends))
        if len(hits) != 1:
            listed = ", ".join(p.name for p in hits[:5]) + (f" and {len(hits) - 5} more" if len(hits) > 5 else "")
            what = f"{len(hits)} {kind} files ({listed})" if hits else f"no *_{kind}.tsv or *{kind}.jsonl file"
            raise DataError(f"holds {what}: give the nodes and edges files themselves", folder)
        found[kind] = hits[0]
    return found["nodes"], found["edges"]
