"""The origin: every endpoint's SQL and the loader that runs it through one shared psycopg pool.

All endpoints of a worker share its pool, as the endpoints of one application server share
its connection pool: that is how experiment 003's heavy rankings starve the light lookups.
Pool wait and query time are recorded apart in the probe.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import orjson
import psycopg
from psycopg_pool import ConnectionPool

from model.workload import Query
from strategies import Probe
from strategies.version import stamp

# pg_stat_statements stores this statement with $1/$2 in place of the bounds; the coordinator
# finds its counter by ORIGIN_MARK, a fragment that survives that normalisation.
ORIGIN_SQL = (
    "SELECT count(*), coalesce(sum(amount), 0)::float8, coalesce(avg(amount), 0)::float8"
    " FROM orders WHERE created_at >= %s AND created_at < %s"
)
ORIGIN_MARK = "FROM orders WHERE created_at >="
DATA_START = datetime(2025, 1, 1, tzinfo=UTC)
DATA_DAYS = 365
PRODUCT_SQL = "SELECT id, category_id, name, price, sales FROM products WHERE id = %s"
RANKING_SQL = ("SELECT id, name, sales FROM products WHERE category_id = %s"
               " ORDER BY sales DESC, id LIMIT 10")
CATEGORIES = 24  # experiment 003: 24 categories over 3M products
# Versions: every write of a key's origin data adds (key, version + 1, its time) to key_writes
# in the same transaction; every read returns the key's current version from the same
# snapshot (one statement), so each cached value carries the version its data belongs to.
VERSIONS_DDL = ("CREATE TABLE IF NOT EXISTS key_writes (key text NOT NULL, version bigint NOT NULL,"
                " committed_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
                " PRIMARY KEY (key, version))")
VERSION_OF_SQL = "SELECT coalesce(max(version), 0) FROM key_writes WHERE key = %s"
NEXT_VERSION_SQL = ("INSERT INTO key_writes (key, version) SELECT %s, coalesce(max(version), 0) + 1"
                    " FROM key_writes WHERE key = %s RETURNING version")
# After the write's cache step: committed_at becomes an instant surely after the commit (the
# servers' end-of-trial check must never date a commit later than it happened).
CONFIRM_SQL = ("UPDATE key_writes SET committed_at = clock_timestamp()"
               " WHERE key = %s AND version = %s")
# Writes: one row changes, then the strategy brings the cache in line (delete or update).
PRODUCT_WRITE_SQL = "UPDATE products SET sales = sales + 1 WHERE id = %s"
# (``FROM orders o`` keeps the write out of the origin read counter, see MARKS)
ORDERS_WRITE_SQL = ("UPDATE orders SET amount = amount + 1 WHERE id = (SELECT min(o.id)"
                    " FROM orders o WHERE o.created_at >= %s AND o.created_at < %s)")

# Fragments that survive pg_stat_statements' normalisation of literals to $1.
MARKS = {
    Query.ORDERS: ORIGIN_MARK,
    Query.PRODUCT: "FROM products WHERE id =",
    Query.RANKING: "FROM products WHERE category_id =",
}


def encode_value(shaper: Callable[[bytes], bytes], key: str, rows: list[Any]) -> bytes:
    """The cached value of ``key``: its rows and when they were read, shaped (padded, compressed)."""
    return shaper(orjson.dumps({"key": key, "rows": rows, "computed_at_ns": time.time_ns()},
                               default=str))


def version_of(pool: ConnectionPool, timeout_s: float, key: str) -> int:
    """The key's version when its read returned no row (the version rides on the rows)."""
    with pool.connection(timeout=timeout_s) as conn:
        row = conn.execute(VERSION_OF_SQL, (key,)).fetchone()
    return int(row[0]) if row else 0


def key_number(key: str) -> int:
    """The number a key's origin row or window is chosen by: ``product:7`` -> 7."""
    suffix = key.rsplit(":", 1)[-1]
    return int(suffix) if suffix.isdigit() else sum(key.encode())


def window_for(key: str, span_s: float) -> tuple[datetime, datetime]:
    """The time range a key aggregates: key ``orders:7`` is the 8th span of the data year."""
    spans_per_year = max(1, int(DATA_DAYS * 86400 // span_s) - 1)
    start = DATA_START + timedelta(seconds=(key_number(key) % spans_per_year) * span_s)
    return start, start + timedelta(seconds=span_s)


@dataclass(frozen=True)
class OriginShape:
    """What the queries need to know about the dataset: the orders window and product rows."""

    span_s: float = 3600.0
    products: int = 0  # rows in ``products`` (0: not seeded)

    def params(self, query: Query, key: str) -> tuple[Any, ...]:
        n = key_number(key)
        if query is Query.ORDERS:
            return window_for(key, self.span_s)
        if query is Query.PRODUCT:
            return (n % max(self.products, 1) + 1,)
        return (n % CATEGORIES,)


def sql_of(query: Query) -> str:
    return {Query.ORDERS: ORIGIN_SQL, Query.PRODUCT: PRODUCT_SQL, Query.RANKING: RANKING_SQL}[query]


def versioned(sql: str) -> str:
    """``sql`` with the key's version as a first column, read in the same snapshot (its text
    stays inside, so pg_stat_statements still finds it by its MARKS)."""
    return f"SELECT ({VERSION_OF_SQL}) AS version, q.* FROM ({sql}) AS q"


def ensure_versions(conn: psycopg.Connection[Any]) -> None:
    """The version table every read joins: created once, kept across runs (versions only grow)."""
    conn.execute(VERSIONS_DDL)


def filler(size: int, seed: int = 7) -> bytes:
    """JSON-like padding that compresses about 3x, as 004's 7.24 MB -> 2.25 MB JSON did."""
    rng = random.Random(seed)
    parts, total = [], 0
    while total < size:
        part = b'{"id":%d,"title":"event %d","score":%d},' % (
            rng.randrange(10**9), rng.randrange(10**6), rng.randrange(10**4))
        parts.append(part)
        total += len(part)
    return b"".join(parts)[:size]


class ValueShaper:
    """Pads a value to ``size`` bytes and optionally compresses it (real CPU cost per fill)."""

    def __init__(self, size: int, compress: bool) -> None:
        self._pad = filler(size) if size else b""
        self._compress = compress

    def __call__(self, value: bytes) -> bytes:
        if self._pad:
            value = value + b"\n" + self._pad[: max(0, len(self._pad) - len(value) - 1)]
        return zlib.compress(value, 6) if self._compress else value


class Committed(NamedTuple):
    """One origin write: the key's new version, and when the commit was acknowledged (ns)."""

    version: int
    commit_ns: int


class EndpointLoader:
    """A ``Loader`` for one endpoint: its query through the shared pool, costs into the probe.

    The value it returns is stamped with the key's origin version (``strategies.version``).
    ``sql`` replaces the endpoint's statement (a test slows it down to make races likely).
    """

    def __init__(self, pool: ConnectionPool, query: Query, shape: OriginShape,
                 shaper: Callable[[bytes], bytes] = bytes, pool_timeout_s: float = 5.0,
                 sql: str | None = None) -> None:
        self._pool, self._query, self._shape = pool, query, shape
        self._sql = versioned(sql or sql_of(query))
        self._shaper = shaper
        self._pool_timeout_s = pool_timeout_s

    def load(self, key: str, probe: Probe) -> bytes:
        params = (key, *self._shape.params(self._query, key))
        asked = time.perf_counter_ns()
        with self._pool.connection(timeout=self._pool_timeout_s) as conn:
            got = time.perf_counter_ns()
            probe.pool_wait_ns += got - asked
            probe.origin_start_ns = time.time_ns()
            rows = conn.execute(self._sql, params).fetchall()
            probe.origin_ns += time.perf_counter_ns() - got
            probe.origin_calls += 1
        if not rows:
            if self._query is not Query.RANKING:
                raise LookupError(f"origin has no row for {key!r}")
            return stamp(self._empty_version(key), self._encode(key, []))
        return stamp(int(rows[0][0]), self._encode(key, [row[1:] for row in rows]))

    def _encode(self, key: str, rows: list[Any]) -> bytes:
        return encode_value(self._shaper, key, rows)

    def _empty_version(self, key: str) -> int:
        """A ranking with no rows (an empty category) still has a version; rare, so a read more."""
        return version_of(self._pool, self._pool_timeout_s, key)

    def write(self, key: str) -> Committed:
        """Change the origin row behind ``key`` and bump its version, in one transaction."""
        params = self._shape.params(self._query, key)
        sql = ORDERS_WRITE_SQL if self._query is Query.ORDERS else PRODUCT_WRITE_SQL
        if self._query is Query.RANKING:  # a sale in the category: bump one of its products
            params = (int(params[0]) + CATEGORIES,)  # category_id = id % CATEGORIES
        with self._pool.connection(timeout=self._pool_timeout_s) as conn, conn.transaction():
            conn.execute(sql, params)
            row = conn.execute(NEXT_VERSION_SQL, (key, key)).fetchone()
        # the transaction block has committed here: any read that starts now sees the version
        assert row is not None  # an INSERT .. SELECT of an aggregate returns exactly one row
        return Committed(int(row[0]), time.time_ns())

    def confirm(self, key: str, version: int) -> None:
        """Re-date ``version``'s commit to now, after the commit: an upper bound of its instant."""
        with self._pool.connection(timeout=self._pool_timeout_s) as conn:
            conn.execute(CONFIRM_SQL, (key, version))
