"""The origin's own count of the calls, read before and after every trial: the cross-check of
the clients' count (``db_check`` in trials.parquet: ``ok``, ``mismatch`` or ``unchecked``).

Built-in origin: pg_stat_statements' calls of the seeded statements. The user's statement:
pg_stat_statements' calls of that statement's query id (PostgreSQL's hash of the parsed
statement, the same whatever its spacing or comments), found once before the run by
``EXPLAIN (VERBOSE)``. An HTTP service: the Prometheus counter the user names, read from its
metrics page. Anything else (no pg_stat_statements in the database, no counter named) is
``unchecked``, with the reason: never ``ok``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
import urllib3
from prometheus_client.parser import text_string_to_metric_families

from coordinator.connect import pg_connect
from coordinator.origin import counters
from coordinator.origin.counters import Statements
from model.origin import MARKS
from model.services import mask_url

COUNTER_TIMEOUT_S = 5.0
_SELECTOR = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?$')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


class CounterError(RuntimeError):
    """The origin's counter cannot be read (the trial is ``unchecked``, with this reason)."""


@dataclass
class OriginCheck:
    """How the origin's own count is read; ``read`` returns None when it cannot be."""

    detail: str  # what is counted, or why nothing is (run.json, trials.parquet, the notes)
    dsn: str = ""  # the database whose pg_stat_statements gives statements.parquet ("": none)
    marks: tuple[str, ...] = ()  # fragments of the origin statements (statements.parquet)
    query_ids: tuple[int, ...] = ()
    unchecked: str = ""  # why the calls are not checked ("" when they are)
    last_problem: str = field(default="", repr=False)

    def read(self) -> int | None:
        """The origin's count now, or None (``last_problem`` says why)."""
        if self.unchecked:
            return None
        try:
            return self._count()
        except (CounterError, psycopg.Error, OSError) as exc:
            self.last_problem = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            return None

    def _count(self) -> int:
        if self.query_ids:
            return statement_calls(self.dsn, self.query_ids)
        return counters.origin_db_calls(self.dsn)

    def statements(self) -> Statements:
        """pg_stat_statements now ({} without a database or without the extension)."""
        if not self.dsn or self.unchecked:
            return {}
        return counters.statement_snapshot(self.dsn)

    def columns(self, before: int | None, after: int | None, client_calls: int) -> dict[str, Any]:
        """trials.parquet's check columns for one trial (``db_calls`` -1: not checked)."""
        if before is None or after is None:
            why = self.unchecked or self.last_problem or "the counter could not be read"
            return {"db_calls": -1, "db_calls_match": False, "db_check": "unchecked",
                    "db_check_detail": why}
        calls = after - before
        return {"db_calls": calls, "db_calls_match": calls == client_calls,
                "db_check": "ok" if calls == client_calls else "mismatch",
                "db_check_detail": self.detail}


@dataclass
class CounterCheck(OriginCheck):
    """A Prometheus counter of the service itself: ``NAME`` or ``NAME{label="value",...}``."""

    url: str = ""
    selector: str = ""

    def _count(self) -> int:
        return round(counter_value(self.url, self.selector))

    def statements(self) -> Statements:
        return {}


def builtin_check(dsn: str) -> OriginCheck:
    return OriginCheck("pg_stat_statements: calls of the seeded statements", dsn,
                       tuple(MARKS.values()))


def unchecked(reason: str, dsn: str = "") -> OriginCheck:
    return OriginCheck(reason, dsn, unchecked=reason)


def statement_calls(dsn: str, query_ids: Sequence[int]) -> int:
    """pg_stat_statements' calls of these query ids, every user and database."""
    with pg_connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements"
                           " WHERE queryid = ANY(%s)", (list(query_ids),)).fetchone()
    return int(row[0]) if row else 0


def parse_selector(selector: str) -> tuple[str, dict[str, str]]:
    """``NAME{a="x"}`` -> (NAME, {a: x}); ValueError when it is not one."""
    match = _SELECTOR.match(selector.strip())
    if match is None:
        raise ValueError(f"{selector!r} is not a metric name (NAME or NAME{{label=\"value\"}})")
    name, body = match.group(1), match.group(2) or ""
    labels = dict(_LABEL.findall(body))
    if _LABEL.sub("", body).strip():
        raise ValueError(f"{selector!r}: labels are written label=\"value\", comma-separated")
    return name, labels


def counter_value(url: str, selector: str) -> float:
    """The sum of the samples of ``selector`` on the metrics page at ``url`` (a counter's
    ``NAME_total`` samples answer to ``NAME`` too); CounterError when there are none."""
    name, labels = parse_selector(selector)
    try:
        response = urllib3.request("GET", url, timeout=COUNTER_TIMEOUT_S, retries=False)
    except urllib3.exceptions.HTTPError as exc:
        raise CounterError(f"{mask_url(url)}: {type(exc).__name__}: {exc}") from None
    if response.status != 200:
        raise CounterError(f"{mask_url(url)} answered HTTP {response.status}")
    found, total, names = False, 0.0, set()
    for family in text_string_to_metric_families(response.data.decode("utf-8", "replace")):
        names.add(family.name)
        # a family without samples yet (a labelled counter before its first call) counts 0
        found = found or family.name in (name, name.removesuffix("_total"))
        for sample in family.samples:
            if sample.name in (name, f"{name}_total") and labels.items() <= sample.labels.items():
                found, total = True, total + sample.value
    if not found:
        have = ", ".join(sorted(names)[:8]) or "none"
        raise CounterError(f"no metric {selector} at {mask_url(url)} (it has: {have})")
    return total
