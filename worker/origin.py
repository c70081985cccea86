"""The origin: a real range aggregate over ``orders`` behind a bounded psycopg pool.

Pool wait and query time are measured apart: under a herd most of the cost can be waiting for
a connection, not the database (experiment 003).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import orjson
from psycopg_pool import ConnectionPool

from strategies import Probe

# pg_stat_statements stores this statement with $1/$2 in place of the bounds; the coordinator
# finds its counter by ORIGIN_MARK, a fragment that survives that normalisation.
ORIGIN_SQL = (
    "SELECT count(*), coalesce(sum(amount), 0)::float8, coalesce(avg(amount), 0)::float8"
    " FROM orders WHERE created_at >= %s AND created_at < %s"
)
ORIGIN_MARK = "FROM orders WHERE created_at >="
DATA_START = datetime(2025, 1, 1, tzinfo=UTC)
DATA_DAYS = 365
# application_name of the two kinds of origin connections (the origin:exhaust fault tells them apart)
WORKER_APP = "stampede-worker"
COORDINATOR_APP = "stampede-coordinator"


def window_for(key: str, span_s: float) -> tuple[datetime, datetime]:
    """The time range a key aggregates: key ``orders:7`` is the 8th span of the data year."""
    suffix = key.rsplit(":", 1)[-1]
    index = int(suffix) if suffix.isdigit() else sum(key.encode())
    spans_per_year = max(1, int(DATA_DAYS * 86400 // span_s) - 1)
    start = DATA_START + timedelta(seconds=(index % spans_per_year) * span_s)
    return start, start + timedelta(seconds=span_s)


def make_pool(dsn: str, size: int, timeout_s: float = 10.0, app_name: str = WORKER_APP,
              check: bool = False) -> ConnectionPool:
    """A fixed-size pool, opened and filled before it is returned.

    ``check``: test each connection before use (one extra round trip), so a pool outside the
    measured path survives its server dropping connections (the origin:exhaust fault).
    """
    pool = ConnectionPool(
        dsn,
        min_size=size,
        max_size=size,
        kwargs={"autocommit": True, "application_name": app_name, "connect_timeout": 5},
        check=ConnectionPool.check_connection if check else None,
        open=False,
        timeout=timeout_s,
        name="origin",
    )
    pool.open(wait=True, timeout=timeout_s)
    return pool


class PooledOrigin:
    """A ``Loader`` that runs ORIGIN_SQL through a pool and records its costs in the probe."""

    def __init__(self, pool: ConnectionPool, span_s: float, pool_timeout_s: float = 5.0) -> None:
        self._pool = pool
        self._span_s = span_s
        self._pool_timeout_s = pool_timeout_s

    def load(self, key: str, probe: Probe) -> bytes:
        start, end = window_for(key, self._span_s)
        asked = time.perf_counter_ns()
        with self._pool.connection(timeout=self._pool_timeout_s) as conn:
            got = time.perf_counter_ns()
            probe.pool_wait_ns += got - asked
            probe.origin_start_ns = time.time_ns()
            row = conn.execute(ORIGIN_SQL, (start, end)).fetchone()
            probe.origin_ns += time.perf_counter_ns() - got
            probe.origin_calls += 1
        if row is None:
            raise RuntimeError("origin query returned no row")
        orders, revenue, average = row
        return orjson.dumps(
            {"key": key, "orders": orders, "revenue": revenue, "avg": average,
             "computed_at_ns": time.time_ns()}
        )
