"""HTML building blocks of the report: escaped tables with flagged cells, images as base64."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f2f2f2}td.text{text-align:left}
td.flag{background:#ffd9d9;font-weight:bold}
.note{color:#a00}img{max-width:100%;border:1px solid #ddd}
"""

Column = tuple[str, str, str]  # (key, heading, format)
Flag = Callable[[Mapping[str, Any], str], bool]


def cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, fmt) if fmt else str(value)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column],
          flag: Flag | None = None) -> str:
    """A table of ``rows``; a cell where ``flag(row, key)`` holds is marked and gets a ``!``."""
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title, _ in columns)
    body = []
    for row in rows:
        cells = []
        for key, _, fmt in columns:
            text = html.escape(cell(row.get(key), fmt))
            flagged = flag is not None and flag(row, key)
            kind = "flag" if flagged else ("text" if isinstance(row.get(key), str) else "")
            cells.append(f'<td class="{kind}">{text}{"!" if flagged else ""}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def image(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def page(title: str, sections: Sequence[str]) -> str:
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>")


def notes(lines: Sequence[str]) -> str:
    if not lines:
        return "<p>No warnings: every self-check passed.</p>"
    return "<ul>" + "".join(f'<li class="note">{html.escape(n)}</li>' for n in lines) + "</ul>"
