"""The docs (README.md, docs/*.md) read as the drift checks need them: inline code, command lines,
tables, headings and links, each with the file and line it came from (pure: reads files only)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.helpers import ROOT

GENERATED = ROOT / "docs" / "cli.md"  # written from the code: never evidence that prose is current
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_FENCE = re.compile(r"^\s*```")
_SPAN = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def doc_files(generated: bool = True) -> list[Path]:
    """README.md and every docs/*.md (docs/cli.md only when ``generated``)."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in found if generated or p != GENERATED]


@dataclass(frozen=True)
class Doc:
    """One markdown file: its prose lines (fenced code blanked) and its fenced code lines."""

    path: Path
    lines: tuple[str, ...]

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))

    def where(self, line: int) -> str:
        return f"{self.name}:{line}"

    def prose(self) -> list[tuple[int, str]]:
        """(line number, text) outside fenced code blocks."""
        return [(n, t) for n, t, fenced in self._marked() if not fenced]

    def code(self) -> list[tuple[int, str]]:
        """(line number, text) inside fenced code blocks."""
        return [(n, t) for n, t, fenced in self._marked() if fenced]

    def _marked(self) -> Iterator[tuple[int, str, bool]]:
        inside = False
        for number, text in enumerate(self.lines, 1):
            if _FENCE.match(text):
                inside = not inside
                continue
            yield number, text, inside

    def spans(self) -> list[tuple[int, str]]:
        """Inline code of the prose (a span may run over one line break), with its first line."""
        prose = self.prose()
        text = "\n".join(t for _, t in prose)
        starts = [n for n, _ in prose]
        found = []
        for match in _SPAN.finditer(text):
            if "\n\n" not in match.group(1):
                found.append((starts[text.count("\n", 0, match.start())],
                              " ".join(match.group(1).split())))
        return found

    def tables(self) -> list[Table]:
        """The prose's pipe tables: header cells and rows of cells, backticks kept."""
        tables: list[Table] = []
        rows: list[tuple[int, list[str]]] = []
        for number, text in [*self.prose(), (0, "")]:
            if text.lstrip().startswith("|"):
                rows.append((number, _cells(text)))
                continue
            if len(rows) > 2 and set("".join(rows[1][1])) <= set("-: "):
                tables.append(Table(self, [c.strip("` ").lower() for c in rows[0][1]], rows[2:]))
            rows = []
        return tables

    def headings(self) -> list[str]:
        return [t.lstrip("#").strip() for _, t in self.prose() if re.match(r"#{1,6} ", t)]

    def links(self) -> list[tuple[int, str]]:
        """(line, target) of every markdown link in the prose."""
        return [(n, m.group(1)) for n, t in self.prose() for m in _LINK.finditer(t)]

    def command_lines(self) -> list[tuple[int, str]]:
        """Command lines as a shell reads them: fenced and indented code, ``\\`` continuations
        joined, a leading ``$ `` dropped; only the lines that start with ``coordinator``."""
        indented = [(n, t) for n, t in self.prose() if t.startswith("    ")]
        joined: list[tuple[int, str, int]] = []  # first line, text, last line
        for number, text in sorted([*self.code(), *indented]):
            if joined and joined[-1][1].endswith("\\") and joined[-1][2] == number - 1:
                first, head, _ = joined.pop()
                joined.append((first, head[:-1] + text, number))
            else:
                joined.append((number, text.strip().removeprefix("$ "), number))
        return [(n, t) for n, t, _ in joined if t.startswith("coordinator ")]


@dataclass(frozen=True)
class Table:
    doc: Doc
    header: list[str]
    rows: list[tuple[int, list[str]]]

    def column(self, name: str) -> int | None:
        return self.header.index(name) if name in self.header else None


def _cells(line: str) -> list[str]:
    """A table row's cells; ``\\|`` stays inside its cell."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


@cache
def read(path: Path) -> Doc:
    return Doc(path, tuple(path.read_text().splitlines()))


def docs(generated: bool = True) -> list[Doc]:
    return [read(p) for p in doc_files(generated)]


def plain(text: str) -> str:
    """Text as a reader sees it: no backticks, no markdown escapes, whitespace collapsed."""
    return " ".join(text.replace("`", "").replace("\\|", "|").split())


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces
    to ``-`` (a repeated heading gets ``-1``, ``-2``: see ``anchors``)."""
    text = heading.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(doc: Doc) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in doc.headings():
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found
