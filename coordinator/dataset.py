"""The origin's data: seed ``orders``, tune the query's cost, read PostgreSQL's own counter."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from worker.origin import DATA_DAYS, DATA_START, ORIGIN_SQL, window_for
from worker.queries import CATEGORIES, MARKS, OriginShape, sql_of
from worker.workload import Query

CALIBRATION_SAMPLES = 40
SPAN_STEPS_H = (1, 4, 16, 48, 96, 192, 384)


@dataclass(frozen=True)
class Calibration:
    span_s: float
    median_ms: float
    samples: int


class OriginNotReady(RuntimeError):
    """The origin database has no ``orders`` table to measure (and seeding was not asked)."""


def require_orders(dsn: str) -> None:
    """Without --seed the existing table is measured: say clearly when there is none."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT to_regclass('orders') IS NOT NULL, "
                           "to_regclass('orders_created_at') IS NOT NULL").fetchone()
    if not row or not row[0]:
        raise OriginNotReady("the origin has no orders table: run once with --seed "
                             "(seeds --scale rows, then calibrates)")
    if not row[1]:
        raise OriginNotReady("orders has no index on created_at (orders_created_at): "
                             "run with --seed to recreate it")


def seed_orders(dsn: str, rows: int) -> None:
    """Create ``orders`` with ``rows`` random orders over one year and an index on the time."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS orders")
        conn.execute(
            "CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL,"
            " amount numeric(10,2) NOT NULL, created_at timestamptz NOT NULL)"
        )
        conn.execute(
            "INSERT INTO orders (customer_id, amount, created_at)"
            " SELECT (random() * 100000)::int, (random() * 500)::numeric(10,2),"
            " %s::timestamptz + random() * make_interval(days => %s)"
            " FROM generate_series(1, %s)",
            (DATA_START, DATA_DAYS, rows),
        )
        conn.execute("CREATE INDEX orders_created_at ON orders (created_at)")
        conn.execute("VACUUM ANALYZE orders")


def _median_ms(dsn: str, sql: str, params: Sequence[tuple[Any, ...]], warm_up: int) -> float:
    """Median wall time of ``sql`` over ``params``; the first ``warm_up`` runs are not counted
    (they read pages into the buffer cache)."""
    times = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i, args in enumerate(params):
            t0 = time.perf_counter()
            conn.execute(sql, args).fetchall()
            if i >= warm_up:
                times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def median_query_ms(dsn: str, span_s: float, samples: int = CALIBRATION_SAMPLES) -> float:
    """Median wall time of the origin query for the hot key's window, warm cache."""
    return _median_ms(dsn, ORIGIN_SQL, [window_for("orders:0", span_s)] * (samples + 5), 5)


def calibrate(dsn: str, target_ms: float) -> Calibration:
    """Grow the query's time window until its median reaches ``target_ms``, then interpolate.

    Cost grows about linearly with the rows aggregated, so the window is set where the line
    between the last two measured spans crosses the target; the final median is measured.
    """
    prev_span, prev_ms = 0.0, 0.0
    span_s = SPAN_STEPS_H[0] * 3600.0
    for hours in SPAN_STEPS_H:
        span_s = hours * 3600.0
        ms = median_query_ms(dsn, span_s, samples=15)
        if ms >= target_ms:
            slope = (ms - prev_ms) / (span_s - prev_span)
            span_s = prev_span + (target_ms - prev_ms) / slope if slope > 0 else span_s
            break
        prev_span, prev_ms = span_s, ms
    span_s = max(span_s, 60.0)
    return Calibration(span_s, median_query_ms(dsn, span_s), CALIBRATION_SAMPLES)


def seed_products(dsn: str, rows: int) -> None:
    """Create ``products`` (experiment 003): ``rows`` products over CATEGORIES categories.

    Only the primary key is indexed: the lookup by id is light, and the ranking (top 10 of a
    category by sales) must scan every row, which is what made it heavy in 003.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS products")
        conn.execute(
            "CREATE TABLE products (id bigint PRIMARY KEY, category_id int NOT NULL,"
            " name text NOT NULL, price numeric(10,2) NOT NULL, sales int NOT NULL)"
        )
        conn.execute(
            "INSERT INTO products SELECT i, i %% %s, 'product ' || i,"
            " (random() * 500)::numeric(10,2), (random() * 100000)::int"
            " FROM generate_series(1, %s) AS i",
            (CATEGORIES, rows),
        )
        conn.execute("VACUUM ANALYZE products")


def query_median_ms(dsn: str, query: Query, shape: OriginShape, samples: int = 15) -> float:
    """Median wall time of one endpoint's origin query over ``samples`` keys, warm cache."""
    params = [shape.params(query, f"{query.value}:{i * 7919}") for i in range(samples + 2)]
    return _median_ms(dsn, sql_of(query), params, 2)


def origin_db_calls(dsn: str, queries: tuple[Query, ...] = tuple(Query)) -> int:
    """PostgreSQL's own count of origin queries so far (pg_stat_statements), all endpoints."""
    pattern = "|".join(MARKS[q] for q in queries)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query ~ %s",
            (pattern,),
        ).fetchone()
    return int(row[0]) if row else 0


Statements = dict[int, tuple[str, int, float]]


def statement_snapshot(dsn: str) -> Statements:
    """pg_stat_statements now: queryid -> (query, calls, total execution ms), our own reads left out."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT queryid, query, calls, total_exec_time FROM pg_stat_statements"
            " WHERE query NOT LIKE %s AND queryid IS NOT NULL",
            ("%pg_stat_statements%",),
        ).fetchall()
    return {int(q): (str(text), int(calls), float(ms)) for q, text, calls, ms in rows}
