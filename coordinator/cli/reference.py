"""docs/cli.md, generated from the click commands, the presets and the strategy registry.

``python -m coordinator.cli.reference`` (``make cli-reference``) writes it; ``--check`` exits 1
when the file is not current. The same reading of the commands (``option_rows``) is what the
docs' drift checks compare the prose with (tests/unit/test_docs_cli.py).
"""

from __future__ import annotations

import enum
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

import strategies
from coordinator.cli.commands import cli
from coordinator.cli.workload_options import PRESETS

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
_HELP_DEFAULT = re.compile(r"[\[;] ?default: ([^;\]]+)")  # a default the help text states itself
HEADER = """\
# Command-line reference

Generated from the code by `make cli-reference` (`python -m coordinator.cli.reference`): the
click commands, the presets (`coordinator/cli/workload_options.py`) and the strategies' parameters
(`strategies/`). Do not edit it by hand; `tests/unit/test_docs_cli.py` fails when it is not
current. What the options do, with examples: [README](../README.md#running-experiments).
"""


@dataclass(frozen=True)
class OptionRow:
    """One option of one command, as ``--help`` and the reference show it."""

    flags: tuple[str, ...]  # every spelling: --seed, --no-seed; -h, --help
    value: str  # what it takes: a range, the choices, a metavar, or "flag"
    default: str | None  # None: no default (absent means off or unset)
    env: str | None
    help: str


def _value(param: click.Option, ctx: click.Context) -> str:
    kind = param.type
    if param.is_flag:
        return "flag"
    if isinstance(kind, click.Choice):
        text = " | ".join(str(c) for c in kind.choices)
    elif isinstance(kind, click.IntRange | click.FloatRange):
        name = "integer" if isinstance(kind, click.IntRange) else "number"
        text = f"{name} {show(kind.min)}..{show(kind.max)}"
    else:
        text = param.make_metavar(ctx)
    return text + (" (repeatable)" if param.multiple else "")


def show(value: Any) -> str:
    """A value as the docs write it: enums by value, floats without a needless ``.0``."""
    if isinstance(value, enum.Enum):
        value = value.value
    return f"{value:g}" if isinstance(value, float) else str(value)


def default_of(param: click.Option, ctx: click.Context) -> str | None:
    """The default as a user reads it: the help text's own ``[default: ...]``, else click's
    (a flag's as the spelling that is in effect, or ``off``); None when there is none."""
    found = _HELP_DEFAULT.search(param.help or "")
    if found:
        return found.group(1).strip()
    value: Any = param.get_default(ctx, call=True)
    if param.is_flag and isinstance(value, bool):
        spellings = (*param.secondary_opts, "off")
        return param.opts[0] if value else spellings[0]
    if isinstance(value, str | int | float) and not isinstance(value, bool):  # StrEnums too
        return show(value)
    return None  # no default (None, or click's unset marker, an Enum that is no str)


def option_rows(command: click.Command) -> list[OptionRow]:
    """Every option of ``command`` (``--help`` included), in ``--help``'s order."""
    ctx = click.Context(command, info_name=command.name)
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option):
            continue
        env = param.envvar if isinstance(param.envvar, str) else None
        rows.append(OptionRow((*param.opts, *param.secondary_opts), _value(param, ctx),
                              default_of(param, ctx), env, " ".join((param.help or "").split())))
    return rows


def commands() -> dict[str, click.Command]:
    """``coordinator``'s subcommands by name, in the order they are defined."""
    return dict(cli.commands)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _command_section(name: str, command: click.Command) -> list[str]:
    ctx = click.Context(command, info_name=name)
    usage = " ".join(["coordinator", name, *command.collect_usage_pieces(ctx)])
    lines = [f"## `coordinator {name}`", "", " ".join((command.help or "").split()), "",
             f"    {usage}", "", "| option | value | default | env | meaning |", "|---|---|---|---|---|"]
    for row in option_rows(command):
        flags = " / ".join(f"`{f}`" for f in row.flags)
        lines.append(f"| {flags} | {_cell(row.value)} | {_cell(row.default or '')} | "
                     f"{row.env or ''} | {_cell(row.help)} |")
    return [*lines, ""]


def _preset_section() -> list[str]:
    launch = commands()["launch"]
    flag = {p.name: p.opts[0] for p in launch.params if isinstance(p, click.Option)}
    lines = ["## Presets (`coordinator launch --preset NAME`)", "",
             "Each preset fills in the options it names that the command line does not give.", "",
             "| preset | options it sets |", "|---|---|"]
    for name, options in sorted(PRESETS.items()):
        given = []
        for key, raw in options.items():
            values = raw if isinstance(raw, tuple) else (raw,)
            given += [flag[key] if v is True else f"{flag[key]} {show(v)}" for v in values]
        lines.append(f"| `{name}` | {_cell(', '.join(f'`{g}`' for g in given))} |")
    return [*lines, ""]


def parameter_defaults(name: str) -> dict[str, str]:
    """A strategy's parameters and their defaults, as ``name:key=value`` takes them."""
    return {key: show(value) for key, value in strategies.from_mapping(name, {}).params.items()}


def _strategy_section() -> list[str]:
    lines = ["## Strategies and their parameters (`--strategies NAME:KEY=VALUE,...`)", "",
             "Every parameter a strategy takes, with its default; any other is refused (exit 2).",
             "What each means: [docs/strategies.md](strategies.md#parameters).", "",
             "| strategy | parameters (default) |", "|---|---|"]
    for name in strategies.names():
        params = ", ".join(f"`{k}` ({v})" for k, v in sorted(parameter_defaults(name).items()))
        lines.append(f"| `{name}` | {params} |")
    return [*lines, ""]


def render() -> str:
    """The whole of docs/cli.md."""
    lines = [HEADER]
    for name, command in commands().items():
        lines += _command_section(name, command)
    lines += _preset_section() + _strategy_section()
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    """Write docs/cli.md, or with ``--check`` say whether it is current (exit 1 when not)."""
    text = render()
    if argv[1:] == ["--check"]:
        current = DOC.is_file() and DOC.read_text() == text
        if not current:
            print(f"{DOC} is not current: run `make cli-reference`", file=sys.stderr)
        return 0 if current else 1
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
