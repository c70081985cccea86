"""The origin: a real range aggregate over ``orders`` behind a bounded psycopg pool.

Pool wait and query time are measured apart: under a herd most of the cost can be waiting for
a connection, not the database (experiment 003).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from psycopg_pool import ConnectionPool

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
