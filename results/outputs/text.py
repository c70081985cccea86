"""The one plain-text table renderer behind every table the command line prints."""

from __future__ import annotations

from collections.abc import Sequence


def grid(columns: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A header, a line of dashes and the rows, columns two spaces apart; the first ``left``
    columns left-aligned, the others right-aligned, trailing spaces stripped."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(columns), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])
