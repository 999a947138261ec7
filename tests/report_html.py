"""What the report tests share: the report's HTML written out independently, and a plotting stand-in."""

import base64

PNG = b"\x89PNG\r\n\x1a\nstand-in"


def img(png: bytes, alt: str) -> str:
    return f'<img alt="{alt}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def tbl(header, rows, classes=None, num_from=1):
    """The report's table layout, written independently: header cells, then numbers right-aligned."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = ""
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        cells = "".join(f'<td class="num">{c}</td>' if j >= num_from else f"<td>{c}</td>" for j, c in enumerate(row))
        body += f"<tr{cls}>{cells}</tr>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Recorder:
    """Stands in for a plotting or drawing function: records each call, returns fixed PNG bytes."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return PNG
