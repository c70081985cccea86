"""The docs and the strategies agree: every strategy spec and label the docs show parses, every
parameter value they name is accepted, every default they state is the code's, and docs/strategies.md
lists every strategy and every parameter with the strategies that take it. The truth is the
registry (strategies/registry.py) and each strategy's Params dataclass, read through
``strategies.from_mapping``, so a new strategy or parameter needs only its documentation."""

from __future__ import annotations

import contextlib
import enum
import re
import sys
from collections.abc import Iterator

import click

import strategies
from coordinator.cli import reference
from coordinator.cli.options import strategy_list
from strategies import plugins, registry
from tests.docs_text import Doc, docs, plain, read
from tests.helpers import ROOT

NAMES = strategies.names()
DEFAULTS = {name: reference.parameter_defaults(name) for name in NAMES}
PARAMS = sorted({param for params in DEFAULTS.values() for param in params})
CATALOGUE = ROOT / "docs" / "strategies.md"
_SPEC_SPAN = re.compile(r"[a-z][a-z0-9-]*:[a-z_]+=\S+")  # lock:poll_ms=2 (not net:delay:a-b=3)
_PARAM_SPAN = re.compile(r"([a-z][a-z_]*)=(\S+)")  # wake=poll|notify, jitter=0.2


@contextlib.contextmanager
def example_plugin() -> Iterator[None]:
    """The example plug-in's strategy (examples/singleflight-plugin) registered while the docs
    that show it are parsed, then forgotten: the catalogue and docs/cli.md list built-in ones."""
    path, before = str(ROOT / "examples" / "singleflight-plugin"), dict(registry._REGISTRY)
    sys.path.insert(0, path)
    try:
        plugins.load("stampede_singleflight")
        yield
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(before)
        sys.path.remove(path)
        sys.modules.pop("stampede_singleflight", None)


def takers(param: str) -> set[str]:
    return {name for name in NAMES if param in DEFAULTS[name]}


def parse_list(text: str) -> str | None:
    """None when ``--strategies TEXT`` is accepted, else the launch's own one-line complaint."""
    launch = reference.commands()["launch"]
    param = next(p for p in launch.params if p.name == "strategies")
    try:
        strategy_list(click.Context(launch), param, text)
    except click.BadParameter as exc:
        return exc.format_message()
    return None


def _output_labels(doc: Doc) -> Iterator[tuple[int, str]]:
    """First words of the rows of a text table in code whose header starts with ``strategy``:
    the lines after its dashes up to a blank line, one holding ``: `` (a note, a progress line)
    or the block's end."""
    code = doc.code()
    for index, (_, text) in enumerate(code[:-1]):
        if not (text.startswith("strategy ") and set(code[index + 1][1]) <= set("- ")):
            continue
        last = code[index + 1][0]
        for row_number, row in code[index + 2:]:
            if row_number != last + 1 or not row.strip() or ": " in row:
                break
            last = row_number
            yield row_number, row.split()[0]


def specs() -> Iterator[tuple[str, str]]:
    """(where, strategy list) for every spec, list or label the docs show."""
    for doc in docs():
        for number, text in [*doc.command_lines(), *doc.spans()]:
            for found in re.findall(r"--strategies[ =](\S+)", text):
                yield doc.where(number), found.rstrip("`")
        for number, span in doc.spans():
            if _SPEC_SPAN.fullmatch(span):
                yield doc.where(number), span
        for table in doc.tables():
            column = table.column("strategy")
            if column is not None:
                yield from ((doc.where(n), cells[column].strip("`")) for n, cells in table.rows)
        yield from ((doc.where(n), label) for n, label in _output_labels(doc))


def test_every_strategy_spec_and_label_the_docs_show_parses() -> None:
    found = list(specs())
    assert len(found) > 20, f"the check found only {found}: the docs' tables are no longer read"
    with example_plugin():
        wrong = [f"{where}: {text}: {why}" for where, text in found
                 if not text[:1].isupper() and (why := parse_list(text))]  # LIST, NAME: placeholders
    assert not wrong, "\n".join(wrong) + "\n(strategies and parameters: docs/cli.md)"


def test_every_parameter_value_the_docs_name_is_accepted() -> None:
    wrong = []
    for doc in docs():
        for number, span in doc.spans():
            match = _PARAM_SPAN.fullmatch(span)
            if match is None or match.group(1) not in PARAMS:
                continue
            key, values = match.group(1), match.group(2).split("|")
            for value in values:
                if all(parse_list(f"{name}:{key}={value}") for name in takers(key)):
                    wrong.append(f"{doc.where(number)}: `{span}`: {key}={value} is refused by "
                                 f"every strategy that takes {key}")
            defaults = {DEFAULTS[name][key] for name in takers(key)}
            if len(values) > 1 and values[0] not in defaults:
                wrong.append(f"{doc.where(number)}: `{span}`: the first value is the default in "
                             f"these docs; {key}'s is {' or '.join(sorted(defaults))}")
    assert not wrong, "\n".join(wrong)


def test_every_parameter_default_the_prose_states_is_the_codes() -> None:
    wrong = []
    for doc in docs():
        prose = plain(" ".join(text for _, text in doc.prose()))
        for key, value in re.findall(r"\b([a-z][a-z_]+) \(default ([^;),:]+)[;),:]", prose):
            if key in PARAMS and not _same(value, {DEFAULTS[n][key] for n in takers(key)}):
                wrong.append(f"{doc.name}: {key} is documented with default {value!r}; the code's: "
                             f"{DEFAULTS[min(takers(key))][key]!r}")
    assert not wrong, "\n".join(wrong)


def _same(documented: str, defaults: set[str]) -> bool:
    try:
        return any(float(documented) == float(d) for d in defaults)
    except ValueError:  # booleans as users type them: true, false
        return documented.lower() in {d.lower() for d in defaults}


def _parameter_table() -> tuple[Doc, list[tuple[int, list[str]]]]:
    doc = read(CATALOGUE)
    for table in doc.tables():
        if table.header[:4] == ["parameter", "values", "default", "strategies"]:
            return doc, table.rows
    raise AssertionError("docs/strategies.md has no table | parameter | values | default | "
                         "strategies | meaning |: the parameters' check has nothing to read")


def _listed(cell: str) -> set[str]:
    """``all``, ``all but `a`, `b```, or ```a`, `b``` as the strategies they name."""
    named = set(re.findall(r"`([^`]+)`", cell))
    if cell.startswith("all but"):
        return set(NAMES) - named
    return set(NAMES) if cell == "all" else named


def _enum_values(param: str) -> set[str] | None:
    value = strategies.from_mapping(min(takers(param)), {}).params[param]
    return {str(m.value) for m in type(value)} if isinstance(value, enum.Enum) else None


def _row_errors(param: str, cells: list[str]) -> Iterator[str]:
    defaults = {DEFAULTS[name][param] for name in takers(param)}
    if not _same(plain(cells[2]), defaults):
        yield f"default {cells[2]!r}, the code's is {' or '.join(sorted(defaults))}"
    if _listed(cells[3]) != takers(param):
        yield (f"strategies {cells[3]!r}, but {param} is taken by exactly "
               f"{', '.join(sorted(takers(param)))}")
    values = _enum_values(param)
    if values is not None and set(re.findall(r"`([^`]+)`", cells[1])) != values:
        yield f"values {cells[1]!r}, the code's are {', '.join(sorted(values))}"


def test_the_parameter_table_is_the_codes() -> None:
    doc, rows = _parameter_table()
    wrong, seen = [], set()
    for number, cells in rows:
        param = cells[0].strip("`")
        seen.add(param)
        if param not in PARAMS:
            wrong.append(f"{doc.where(number)}: `{param}` is no parameter of any strategy "
                         f"(parameters: {', '.join(PARAMS)})")
            continue
        wrong += [f"{doc.where(number)}: {param}: {error}" for error in _row_errors(param, cells)]
    wrong += [f"docs/strategies.md: add a row for `{p}` (taken by {', '.join(sorted(takers(p)))}, "
              f"default {DEFAULTS[min(takers(p))][p]})" for p in PARAMS if p not in seen]
    assert not wrong, "\n".join(wrong)


def test_every_strategy_is_in_the_catalogue() -> None:
    tables = [t for t in read(CATALOGUE).tables() if t.header[:2] == ["strategy", "mechanism"]]
    assert tables, "docs/strategies.md has no catalogue table (| strategy | mechanism | ...)"
    listed = {cells[0].strip("`") for _, cells in tables[0].rows}
    missing = sorted(set(NAMES) - listed)
    assert not missing, f"docs/strategies.md's catalogue has no row for {missing}: add one each"
