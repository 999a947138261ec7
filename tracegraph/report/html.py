"""The page itself: CSS, escaping, tables, cards, embedded images, and the one writer of a report.

Every piece of text that comes from data goes through :func:`e` (``html.escape``); numbers go
through :func:`num`. Images are PNG bytes embedded as base64, so the page needs no network.
"""

from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass
from pathlib import Path

from tracegraph.runtime.checkpoints import atomic_write_text

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1080px;margin:2em auto;padding:0 1em;
color:#1e293b;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.1em}h2{border-bottom:2px solid #e2e8f0;padding-bottom:.2em;margin-top:1.8em}
h3{margin-bottom:.3em}h4{margin:.9em 0 .2em}.sub{color:#64748b;margin-top:0}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.88em}
th,td{border-bottom:1px solid #e2e8f0;padding:.28em .6em;text-align:left;vertical-align:top}
th{background:#f8fafc}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.mark td{background:#fef3c7}tr.best td{font-weight:600}tr.default td{background:#ecfdf5}
.cards{display:flex;gap:1em;flex-wrap:wrap;margin:1em 0}.card{background:#f8fafc;border:1px solid #e2e8f0;
border-radius:8px;padding:.7em 1em;min-width:180px;max-width:330px}.card b{font-size:1.4em;display:block}
.card b .note{display:block;font-size:.6em;font-weight:normal;margin-top:.2em}
.headline{background:#f1f5f9;border-left:4px solid #334155;padding:.6em 1em;margin:1em 0;font-size:1.05em}
.pred{border:1px solid #e2e8f0;border-radius:10px;padding:.4em 1.2em 1em;margin:1.2em 0}
.tag{display:inline-block;background:#fef3c7;border:1px solid #d97706;border-radius:4px;padding:0 .35em;font-size:.8em}
.ok{color:#15803d}.bad{color:#b91c1c}.note{color:#475569;font-size:.9em}code{background:#f1f5f9;padding:0 .2em}
img{max-width:100%}.two{display:grid;grid-template-columns:1fr 1fr;gap:1em}
.settings{columns:3 260px;column-gap:1.5em;font-size:.85em}.settings div{break-inside:avoid;padding:.1em 0;
border-bottom:1px solid #f1f5f9}.settings div>span:first-child{color:#64748b}
.long{overflow-wrap:anywhere;word-break:break-all}p code{overflow-wrap:anywhere}
.hub{display:inline-block;background:#e0f2fe;border:1px solid #0369a1;border-radius:4px;padding:0 .35em;font-size:.8em}
tr.group td{border-top:2px solid #94a3b8}.legend{background:#f8fafc;border:1px solid #e2e8f0;border-radius:8px;
padding:.3em 1em .6em;font-size:.88em}.legend dl{display:grid;grid-template-columns:minmax(9em,max-content) 1fr;
gap:.25em 1em;margin:.3em 0}.legend dt{font-weight:600}.legend dd{margin:0}
.swatch{display:inline-block;width:2.2em;height:0;vertical-align:middle;margin-right:.4em}
.dot{display:inline-block;width:.8em;height:.8em;border-radius:50%;vertical-align:middle;margin-right:.4em}
.keys{columns:2 320px;font-size:.82em;color:#475569;margin:.2em 0;padding-left:1.2em}.keys li{break-inside:avoid}.popular{border-left:4px solid #0369a1;background:#f0f9ff;
padding:.4em .8em}
"""


def e(text) -> str:
    """Escape text from data for HTML (quotes too: it may sit in an attribute).

    Args:
        text: Any value; it is converted with ``str``.

    Returns:
        The escaped text.
    """
    return html.escape(str(text), quote=True)


LONG_TOKEN = 24  # characters: a word this long without a space may break anywhere (hashes, paths, ids)


def breakable(text) -> str:
    """Escape text, letting each long unbroken token wrap anywhere (class ``long``).

    A sha256, a path or a long identifier would otherwise push the page past its right edge.

    Args:
        text: Any value; it is converted with ``str``.

    Returns:
        The escaped HTML.
    """
    parts = re.split(r"(\S{%d,})" % LONG_TOKEN, str(text))
    return "".join(f'<span class="long">{e(p)}</span>' if i % 2 else e(p) for i, p in enumerate(parts))


def clip(text, n: int) -> str:
    """Text of at most ``n`` characters, cut in the middle (``"hepatic fib…type 2"``), as HTML.

    A cut text keeps its full value in a ``title`` (shown on hover).

    Args:
        text: Any value; it is converted with ``str``.
        n: The most characters shown (at least 3).

    Returns:
        The HTML: the text made :func:`breakable`, in a titled span when cut.
    """
    s = str(text)
    if len(s) <= n:
        return breakable(s)
    head = n // 2  # the rest of the n, less the ellipsis, from the end
    return f'<span title="{e(s)}">{breakable(s[:head] + "…" + s[len(s) - (n - 1 - head) :])}</span>'


def num(x, nd: int = 3) -> str:
    """Format a number for a table cell: ``nd`` decimals, "—" when missing, "∞" when infinite.

    Args:
        x: A number, a string (escaped as is), or None.
        nd: Decimals.

    Returns:
        The cell text.
    """
    if x is None or (isinstance(x, str) and not x):
        return "—"
    if isinstance(x, str):
        return e(x)
    x = float(x)
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.{nd}f}"


def sig(x, digits: int = 4) -> str:
    """Format a score with ``digits`` significant digits (influence scores span many magnitudes).

    Args:
        x: The score, or None.
        digits: Significant digits.

    Returns:
        The text; "—" when missing.
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{float(x):.{digits}g}"


def img(png: bytes, alt: str) -> str:
    """An inline ``<img>`` of a PNG (base64 data URL).

    Args:
        png: The PNG bytes.
        alt: The alternative text.

    Returns:
        The HTML.
    """
    return f'<img alt="{e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def table(header: list[str], rows: list[list[str]], classes: list[str] | None = None, num_from: int = 1) -> str:
    """An HTML table.

    Args:
        header: Column titles (text; escaped here).
        rows: Cells that are already HTML (escape data with :func:`e`).
        classes: A CSS class per row (empty for none), or None.
        num_from: Columns from this index on are right-aligned numbers.

    Returns:
        The HTML.
    """
    th = "".join(f"<th>{e(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        tds = "".join(f'<td class="num">{c}</td>' if j >= num_from else f"<td>{c}</td>" for j, c in enumerate(row))
        body.append(f"<tr{cls}>{tds}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def cards(items: list[tuple[str, str]]) -> str:
    """Headline cards.

    Args:
        items: ``(title as text, value as HTML)`` pairs.

    Returns:
        The HTML.
    """
    return "<div class='cards'>" + "".join(f'<div class="card">{e(k)}<b>{v}</b></div>' for k, v in items) + "</div>"


@dataclass
class Section:
    """One part of a page: ``key`` names it (so callers can place their own sections beside it)."""

    key: str
    html: str


def insert_after(sections: list[Section], key: str, new: list[Section]) -> list[Section]:
    """``sections`` with ``new`` placed after the one named ``key`` (at the end when there is none).

    Args:
        sections: The page's sections.
        key: The key of the section to insert after.
        new: The sections to insert.

    Returns:
        A new list.
    """
    keys = [s.key for s in sections]
    at = keys.index(key) + 1 if key in keys else len(sections)
    return [*sections[:at], *new, *sections[at:]]


def write_page(path: str | Path, sections: list[Section], *, title: str, subtitle: str = "") -> Path:
    """Write one self-contained HTML page atomically (a failure leaves no half-written file).

    Args:
        path: the ``.html`` file to write.
        sections: the page's parts in order.
        title: the page's heading and ``<title>`` (text, escaped here).
        subtitle: a line under the heading (text, escaped here).

    Returns:
        The path written.
    """
    sub = f"<p class='sub'>{e(subtitle)}</p>" if subtitle else ""
    body = f"<h1>{e(title)}</h1>{sub}" + "".join(s.html for s in sections)
    page = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>\n"
    )
    atomic_write_text(path, page)
    return Path(path)


__all__ = [
    "CSS",
    "Section",
    "breakable",
    "cards",
    "clip",
    "e",
    "img",
    "insert_after",
    "num",
    "sig",
    "table",
    "write_page",
]
