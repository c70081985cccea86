"""The user's own origin, resolved before anything starts: the statement tried once, its key set
read, its counter found. Every problem is bad input naming the option (exit 2, nothing written).

Nothing is written into the user's database: the statement and ``--keys-sql`` run in a
read-only transaction that is rolled back (a statement that would write fails there, and is
refused unless ``--allow-writes``); no table is created, seeded or tuned. Only ``--write-sql``
(with ``--invalidate-rate``) writes, and then ``key_writes`` holds each key's version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from coordinator.connect import pg_connect
from coordinator.origin.check import (
    CounterCheck,
    CounterError,
    OriginCheck,
    builtin_check,
    counter_value,
    unchecked,
)
from model.custom import CustomOrigin, InvalidOrigin, OriginKind, raw_placeholders
from model.services import Services
from model.sql_origin import cursor, executed_read, versioned_read
from model.workload import MAX_KEY_LIST, PRIME_LIMIT, KeyKind, KeySet, Workload

NO_EXTENSION = "pg_stat_statements is not installed in the origin database"


@dataclass(frozen=True)
class KeySource:
    """Where the user's keys come from (``--keys-sql`` or ``--keys-file``), and the key set
    asked for over them (``--keys``; None: every key, uniform)."""

    sql: str = ""
    file: str = ""
    keys: KeySet | None = None
    trace: bool = False  # the keys were read from --keys-trace (model.trace)

    @property
    def given(self) -> bool:
        return bool(self.sql or self.file)


@dataclass(frozen=True)
class Counter:
    """``--origin-counter-url`` and ``--origin-counter-name`` (a Prometheus counter)."""

    url: str = ""
    name: str = ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


def try_statement(dsn: str, origin: CustomOrigin, key: str) -> None:
    """Run the read once for ``key`` in a read-only transaction, rolled back, and plan the
    write (``EXPLAIN``, never run); InvalidOrigin with the server's own words when one fails
    (a missing table, a write, a wrong number of parameters)."""
    read_only = not origin.writes_allowed
    try:
        with pg_connect(dsn) as conn, conn.transaction(force_rollback=True):
            if read_only:
                conn.execute("SET TRANSACTION READ ONLY")
            cursor(conn, _raw(origin.read)).execute(origin.read, (key,)).fetchall()
    except psycopg.errors.ReadOnlySqlTransaction:
        raise InvalidOrigin("--origin-sql", "the statement writes (PostgreSQL refused it in a "
                                            "read-only transaction); reads only, unless "
                                            "--allow-writes") from None
    except (psycopg.Error, TypeError) as exc:
        raise InvalidOrigin("--origin-sql", f"the statement fails on key {key!r}: "
                                            f"{_first_line(exc)}") from None
    if origin.write:
        try:
            with pg_connect(dsn) as conn, conn.transaction(force_rollback=True):
                cursor(conn, _raw(origin.write)).execute("EXPLAIN " + origin.write, (key,))
        except (psycopg.Error, TypeError) as exc:
            raise InvalidOrigin("--write-sql", f"the statement cannot run on key {key!r}: "
                                               f"{_first_line(exc)}") from None


def _raw(sql: str) -> bool:
    return raw_placeholders(sql)


def _params(origin: CustomOrigin, key: str) -> tuple[str, ...]:
    return (key,) * (versioned_read(origin.read)[1] if origin.write else 1)


def keys_from_sql(dsn: str, sql: str) -> list[str]:
    """The first column of every row of ``--keys-sql``, as text, in its order (read-only)."""
    try:
        with pg_connect(dsn) as conn, conn.transaction(force_rollback=True):
            conn.execute("SET TRANSACTION READ ONLY")
            rows = conn.execute(sql).fetchmany(MAX_KEY_LIST + 1)
    except psycopg.Error as exc:
        raise InvalidOrigin("--keys-sql", _first_line(exc)) from None
    return [str(row[0]) for row in rows if row and row[0] is not None]


def keys_from_file(path: str) -> list[str]:
    """One key per line; blank lines and lines starting with ``#`` are skipped."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line.rstrip("\r\n") for line in handle]
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidOrigin("--keys-file", f"cannot read {path}: {_first_line(exc)}") from None
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def check_keys(option: str, keys: Sequence[str]) -> list[str]:
    """Keys without repeats, 1 to 200 characters each, at most MAX_KEY_LIST of them."""
    if not keys:
        raise InvalidOrigin(option, "no key (the list is empty)")
    if len(keys) > MAX_KEY_LIST:
        raise InvalidOrigin(option, f"more than {MAX_KEY_LIST:,} keys")
    bad = next((k for k in keys if not 0 < len(k) <= 200), None)
    if bad is not None:
        raise InvalidOrigin(option, f"key {bad[:40]!r} is not 1 to 200 characters")
    unique = list(dict.fromkeys(keys))
    return unique


def key_set(asked: KeySet | None, count: int, option: str) -> KeySet:
    """The key set over ``count`` named keys: every key uniformly, or the first K of them."""
    if asked is None:
        return KeySet(KeyKind.MANY, count) if count > 1 else KeySet()
    if asked.count > count:
        raise InvalidOrigin("--keys", f"{asked.label} asks for {asked.count:,} keys; {option} "
                                      f"gives {count:,}")
    return asked


def with_keys(workload: Workload, keys: list[str], asked: KeySet | None, option: str) -> Workload:
    """``workload`` with its one endpoint given the user's keys (primed when few)."""
    ep = workload.endpoints[0]
    chosen = key_set(asked, len(keys), option)
    ep = dataclasses.replace(ep, keys=chosen, key_list=tuple(keys[: chosen.count]),
                             prime=chosen.count <= PRIME_LIMIT)
    return dataclasses.replace(workload, endpoints=(ep,))


def resolve_keys(workload: Workload, source: KeySource, dsn: str) -> Workload:
    """The workload with the user's keys read (``--keys-sql`` on ``dsn``, or ``--keys-file``);
    a workload that names its keys already (a rerun) is kept as it is."""
    if workload.endpoints[0].key_list or not source.given:
        return workload
    option = "--keys-sql" if source.sql else "--keys-file"
    keys = keys_from_sql(dsn, source.sql) if source.sql else keys_from_file(source.file)
    return with_keys(workload, check_keys(option, keys), source.keys, option)


def statement_check(dsn: str, origin: CustomOrigin, key: str) -> OriginCheck:
    """pg_stat_statements' calls of the user's statement, by its query id; ``unchecked`` when
    the database has no pg_stat_statements or computes no query id."""
    try:
        with pg_connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT 1 FROM pg_stat_statements LIMIT 1").fetchall()
    except psycopg.Error as exc:
        return unchecked(f"{NO_EXTENSION} ({_first_line(exc)})")
    try:
        with pg_connect(dsn) as conn, conn.transaction(force_rollback=True):
            plan = cursor(conn, _raw(origin.read)).execute(
                "EXPLAIN (VERBOSE, FORMAT JSON) " + executed_read(origin),
                _params(origin, key)).fetchone()
    except psycopg.Error as exc:
        return unchecked(f"the statement's query id: {_first_line(exc)}", dsn)
    query_id = _query_id(plan[0] if plan else None)
    if query_id is None:
        return unchecked("PostgreSQL computes no query id (compute_query_id is off)", dsn)
    return OriginCheck(f"pg_stat_statements: calls of query id {query_id}", dsn,
                       query_ids=(query_id,))


def _query_id(plan: Any) -> int | None:
    if isinstance(plan, list) and plan and isinstance(plan[0], dict):
        value = plan[0].get("Query Identifier")
        return int(value) if value is not None else None
    return None


def http_check(counter: Counter) -> OriginCheck:
    """The service's own counter; ``unchecked`` when the user named none. A counter that cannot
    be read now is bad input (``--origin-counter-url``)."""
    if not counter.url:
        return unchecked("no counter of the service named (--origin-counter-url, "
                         "--origin-counter-name)")
    try:
        counter_value(counter.url, counter.name)
    except (CounterError, ValueError) as exc:
        raise InvalidOrigin("--origin-counter-url", str(exc)) from None
    return CounterCheck(f"{counter.name} at {counter.url}", url=counter.url, selector=counter.name)


def origin_check(workload: Workload, services: Services, counter: Counter) -> OriginCheck:
    """How this run's origin calls are checked (run.json's ``origin.check`` says it)."""
    origin = workload.origin
    if origin.kind is OriginKind.SERVICE:  # counted by the samples (coordinator.blackbox)
        return unchecked("a black box: its origin calls are sampled (samples.parquet)")
    if origin.kind is OriginKind.HTTP:
        return http_check(counter)
    if origin.kind is OriginKind.SQL:
        return statement_check(services.origin_dsn, origin, workload.endpoints[0].key_names()[0])
    return builtin_check(services.origin_dsn)


def resolve(workload: Workload, source: KeySource, services: Services) -> Workload:
    """The user's keys read and the statement tried; InvalidOrigin names what is wrong."""
    origin = workload.origin
    if origin.builtin:
        return workload
    workload = resolve_keys(workload, source, services.origin_dsn)
    if origin.kind is OriginKind.SQL:
        try_statement(services.origin_dsn, origin, workload.endpoints[0].key_names()[0])
    return workload
