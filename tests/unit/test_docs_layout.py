"""The docs and the tree agree: every relative link and #anchor in README.md and docs/ resolves,
every repository path the prose names exists, and the README's architecture tree names exactly the
modules and rooms of each package it opens (read from the files on disk)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs_text import anchors, docs, read
from tests.helpers import ROOT

TOP = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
_PATH_SPAN = re.compile(r"[\w.-]+(?:/[\w.-]+)*/?")
_TREE_ITEM = re.compile(r"[\w-]+(?:\.py|/)")
BUILT = {"deploy/wheels/"}  # made by `make wheels`, absent from a fresh clone


def test_every_relative_link_and_anchor_resolves() -> None:
    wrong = []
    for doc in docs():
        for number, target in doc.links():
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (doc.path.parent / path).resolve() if path else doc.path
            if not file.exists():
                wrong.append(f"{doc.where(number)}: {target}: {path} does not exist")
            elif anchor and file.suffix == ".md" and anchor not in anchors(read(file)):
                wrong.append(f"{doc.where(number)}: {target}: no heading of {file.name} has the "
                             f"anchor #{anchor} (its anchors: {', '.join(sorted(anchors(read(file))))})")
    assert not wrong, "\n".join(wrong)


def test_every_repository_path_the_prose_names_exists() -> None:
    wrong = []
    for doc in docs():
        for number, span in doc.spans():
            if not _PATH_SPAN.fullmatch(span) or "/" not in span or span in BUILT:
                continue
            if span.split("/")[0] in TOP and not (ROOT / span).exists():
                wrong.append(f"{doc.where(number)}: `{span}` does not exist: rename it in the doc")
    assert not wrong, "\n".join(wrong)


def _block_after(heading: str) -> list[tuple[int, str]]:
    """The README's first fenced block after ``heading``: its (line, text) pairs."""
    doc = read(ROOT / "README.md")
    at = next(n for n, text in doc.prose() if text == heading)
    block: list[tuple[int, str]] = []
    for number, text in doc.code():
        if number > at and (not block or number == block[-1][0] + 1):
            block.append((number, text))
        elif block:
            break
    return block


def tree() -> list[tuple[int, Path]]:
    """(line, path) of each name in the README's architecture tree: the words before a line's
    description (two or more spaces) are ``dir/`` or ``module.py`` names in the folder of the
    nearest line above that is indented less."""
    entries: list[tuple[int, Path]] = []
    folders: list[tuple[int, Path]] = []  # (indent, folder) of the open folders
    for number, text in _block_after("## Architecture"):
        indent = len(text) - len(text.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        parent = folders[-1][1] if folders else ROOT
        names = re.split(r"\s{2,}", text.strip(), maxsplit=1)[0].split()
        bad = [w for w in names if not _TREE_ITEM.fullmatch(w)]
        assert not bad, f"README.md:{number}: {bad} in the architecture tree: names are dir/ or *.py"
        for word in names:
            entries.append((number, parent / word.rstrip("/")))
            if word.endswith("/"):
                folders.append((indent, parent / word.rstrip("/")))
    return entries


def _contents(folder: Path) -> set[Path]:
    """A folder's modules (dunder files aside) and the subfolders that hold Python."""
    return {p for p in folder.iterdir()
            if (p.suffix == ".py" and not p.name.startswith("__"))
            or (p.is_dir() and any(p.glob("*.py")))}


def test_the_architecture_tree_names_what_exists() -> None:
    listed = tree()
    assert len(listed) > 20, f"the architecture tree was not read: {listed}"
    wrong = [f"README.md:{n}: {p.relative_to(ROOT)} is in the architecture tree but does not "
             f"exist: rename or drop it" for n, p in listed if not p.exists()]
    assert not wrong, "\n".join(wrong)


def test_the_architecture_tree_names_every_module_of_the_packages_it_opens() -> None:
    paths = {p for _, p in tree()}
    opened = {p.parent for p in paths} | {ROOT}  # folders whose contents the tree lists
    wrong = []
    for folder in sorted(opened):
        missing = sorted(p.name + ("/" if p.is_dir() else "") for p in _contents(folder) - paths
                         if folder != ROOT or (p / "__init__.py").exists())
        if missing:
            where = f"{folder.relative_to(ROOT)}/" if folder != ROOT else "the top level"
            wrong.append(f"README.md's architecture tree lists {where} but not {', '.join(missing)}: "
                         f"add each with what it does")
    assert not wrong, "\n".join(wrong)
