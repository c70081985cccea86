"""The docs and the command line agree: docs/cli.md is what the click commands generate, every
option the prose names exists (on the command it is named with), every default it states is the
code's, every option of every command is described somewhere, and every preset named exists and
every list of presets is complete. The truth is read from the click commands (coordinator/cli/),
so a new option or preset needs no change here: only its documentation."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator

from coordinator.cli import reference
from coordinator.cli.workload_options import PRESETS
from tests.docs_text import GENERATED, OPTION, Doc, docs, plain

COMMANDS = reference.commands()
ROWS = {name: reference.option_rows(command) for name, command in COMMANDS.items()}
_SUBCOMMAND = re.compile(r"coordinator ([a-z][a-z-]*)(?=\s|$)")  # not `coordinator --help`
# A default stated in prose, after the option it belongs to (at most 40 characters on, no other
# option in between): "--opt V (default)", "--opt ... (default V", "--opt V, the default",
# "--opt ... (V by default)".
_NEAR = r"(?:(?!--)[^()]){0,40}?"
_PROSE_DEFAULTS = [
    re.compile(r"(--[a-z][a-z0-9-]*) ([^\s(]+)\s+\(default\)"),
    re.compile(rf"(--[a-z][a-z0-9-]*){_NEAR}\(default ([^;):]+)[;):]"),
    re.compile(r"(--[a-z][a-z0-9-]*) ([^\s,]+), the default"),
    re.compile(rf"(--[a-z][a-z0-9-]*){_NEAR}\((\w+) by default\)"),
]


def flags(command: str | None = None) -> set[str]:
    """Every spelling of every option of ``command`` (None: of any command)."""
    names = [command] if command else list(ROWS)
    return {flag for name in names for row in ROWS[name] for flag in row.flags}


def defaults_of(flag: str) -> list[str | None]:
    """The defaults ``flag`` has on the commands that take it."""
    return [row.default for rows in ROWS.values() for row in rows if flag in row.flags]


def test_the_cli_reference_is_current() -> None:
    expected, written = reference.render(), GENERATED.read_text() if GENERATED.is_file() else ""
    diff = "\n".join(list(difflib.unified_diff(written.splitlines(), expected.splitlines(),
                                               "docs/cli.md", "generated", lineterm=""))[:30])
    assert written == expected, f"docs/cli.md is not current: run `make cli-reference` and commit " \
                                f"docs/cli.md\n{diff}"


def _table_command(header: list[str]) -> str | None:
    """The command an option table is of: `option` is launch's, `simulate option` simulate's."""
    if not header or not header[0].endswith("option"):
        return None
    return header[0].removesuffix("option").strip() or "launch"


def _option_tables(doc: Doc, command: str = "launch") -> Iterator[tuple[int, list[str]]]:
    """Rows of the prose's option tables of ``command`` (first column `option`: launch's)."""
    for table in doc.tables():
        if _table_command(table.header) == command:
            yield from table.rows


def mentions() -> Iterator[tuple[str, str | None, str]]:
    """(where, command or None for any, option) for every option the prose names."""
    for doc in docs(generated=False):
        lines = [*doc.command_lines(), *[(n, s) for n, s in doc.spans() if s.startswith("coordinator ")]]
        for number, line in lines:
            command = _SUBCOMMAND.match(line)
            if command is not None:
                for flag in OPTION.findall(line.split(" #")[0]):
                    yield doc.where(number), command.group(1), flag
        for number, span in doc.spans():
            if span.startswith("--"):
                yield from ((doc.where(number), None, flag) for flag in OPTION.findall(span))
        yield from _table_mentions(doc)


def _table_mentions(doc: Doc) -> Iterator[tuple[str, str | None, str]]:
    """(where, command, option) for every option of each command's option tables."""
    for command in COMMANDS:
        for number, cells in _option_tables(doc, command):
            yield from ((doc.where(number), command, flag) for flag in OPTION.findall(cells[0]))


def test_every_command_and_option_the_docs_name_exists() -> None:
    wrong = []
    for where, command, flag in mentions():
        if command is not None and command not in COMMANDS:
            wrong.append(f"{where}: `coordinator {command}` is no command (commands: "
                         f"{', '.join(COMMANDS)})")
        elif flag not in flags(command):
            on = f"`coordinator {command}`" if command else "any coordinator command"
            wrong.append(f"{where}: `{flag}` is no option of {on}: rename it in the doc "
                         f"(the options: docs/cli.md)")
    assert not wrong, "\n".join(sorted(set(wrong)))


def _same(documented: str, code: str | None) -> bool:
    """A documented default equals the code's: numbers by value (1,000,000 = 1000000), none = no
    default, otherwise as written or as the code's first clause ("off" for "off, or ...")."""
    def norm(text: str) -> str:
        text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", plain(text).lower().rstrip("."))
        return "" if text == "none" else text
    doc, truth = norm(documented), norm(code or "")
    try:
        return float(doc) == float(truth)
    except ValueError:
        return doc in (truth, truth.split(",")[0])


def _table_defaults(doc: Doc) -> Iterator[tuple[str, str, str]]:
    """(where, option, default) from the option tables' `default` column."""
    for table in doc.tables():
        column = table.column("default")
        if _table_command(table.header) is None or column is None:
            continue
        for number, cells in table.rows:
            if cells[column]:
                yield from ((doc.where(number), flag, cells[column])
                            for flag in OPTION.findall(cells[0]))


def stated_defaults() -> Iterator[tuple[str, str, str]]:
    """(where, option, documented default): the option tables' `default` column, and the prose."""
    for doc in docs(generated=False):
        yield from _table_defaults(doc)
        prose = plain(" ".join(text for _, text in doc.prose()))
        for pattern in _PROSE_DEFAULTS:
            for match in pattern.finditer(prose):
                yield f"{doc.name} (\"{match.group(0)}\")", match.group(1), match.group(2)


def test_every_default_the_docs_state_is_the_codes() -> None:
    wrong = [f"{where}: {flag} is documented with default {value!r}; the code's: "
             f"{' or '.join(repr(d) for d in defaults_of(flag))} (docs/cli.md): correct the doc"
             for where, flag, value in stated_defaults()
             if flag in flags() and not any(_same(value, d) for d in defaults_of(flag))]
    assert not wrong, "\n".join(wrong)


def test_every_option_of_every_command_is_described_in_the_docs() -> None:
    named = {flag for doc in docs(generated=False) for flag in OPTION.findall("\n".join(doc.lines))}
    missing = [f"`coordinator {name} {row.flags[0]}`" for name, rows in ROWS.items() for row in rows
               if "--help" not in row.flags and not named & set(row.flags)]
    assert not missing, (f"options described nowhere but the generated docs/cli.md: "
                         f"{', '.join(missing)}: say what each does in README.md or docs/*.md")


def test_every_preset_the_docs_name_exists() -> None:
    wrong = [f"{doc.name}: --preset {name} is no preset (presets: {', '.join(sorted(PRESETS))})"
             for doc in docs() for name in re.findall(r"--preset ([a-z][a-z0-9-]*)",
                                                      plain("\n".join(doc.lines)))
             if name not in PRESETS]
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_every_list_of_presets_is_complete() -> None:
    lists = [(doc.where(number), cells) for doc in docs(generated=False)
             for number, cells in _option_tables(doc) if cells[0].startswith("`--preset")]
    assert lists, "no option table lists the presets (a row `--preset NAME`): the check reads none"
    wrong = []
    for where, cells in lists:
        listed = set(re.findall(r"`([a-z][a-z0-9-]*)`", " ".join(cells[1:])))
        if listed != set(PRESETS):
            wrong.append(f"{where}: the --preset row lists {sorted(listed)}; add "
                         f"{sorted(set(PRESETS) - listed)}, drop {sorted(listed - set(PRESETS))}")
    assert not wrong, "\n".join(wrong)
