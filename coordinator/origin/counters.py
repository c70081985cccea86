"""PostgreSQL's own counters (pg_stat_statements), read before and after every trial: the
cross-check of the clients' origin calls and the per-statement database time."""

from __future__ import annotations

from coordinator.connect import pg_connect
from model.origin import MARKS
from model.workload import Query


def origin_db_calls(dsn: str, queries: tuple[Query, ...] = tuple(MARKS)) -> int:
    """PostgreSQL's own count of origin queries so far (pg_stat_statements), all endpoints."""
    pattern = "|".join(MARKS[q] for q in queries)
    with pg_connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query ~ %s",
            (pattern,),
        ).fetchone()
    return int(row[0]) if row else 0


Statements = dict[int, tuple[str, int, float]]


def statement_snapshot(dsn: str) -> Statements:
    """pg_stat_statements now: queryid -> (query, calls, total execution ms), our own reads left out."""
    with pg_connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT queryid, query, calls, total_exec_time FROM pg_stat_statements"
            " WHERE query NOT LIKE %s AND queryid IS NOT NULL",
            ("%pg_stat_statements%",),
        ).fetchall()
    return {int(q): (str(text), int(calls), float(ms)) for q, text, calls, ms in rows}
