"""Calibration: tune the orders query's window to the target cost, measure every endpoint's cost."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.connect import pg_connect
from model.origin import ORIGIN_SQL, OriginShape, sql_of, window_for
from model.workload import Query

CALIBRATION_SAMPLES = 40
SPAN_STEPS_H = (1, 4, 16, 48, 96, 192, 384)


@dataclass(frozen=True)
class Calibration:
    span_s: float
    median_ms: float
    samples: int


def _median_ms(dsn: str, sql: str, params: Sequence[tuple[Any, ...]], warm_up: int) -> float:
    """Median wall time of ``sql`` over ``params``; the first ``warm_up`` runs are not counted
    (they read pages into the buffer cache)."""
    times = []
    with pg_connect(dsn, autocommit=True) as conn:
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


def query_median_ms(dsn: str, query: Query, shape: OriginShape, samples: int = 15) -> float:
    """Median wall time of one endpoint's origin query over ``samples`` keys, warm cache."""
    params = [shape.params(query, f"{query.value}:{i * 7919}") for i in range(samples + 2)]
    return _median_ms(dsn, sql_of(query), params, 2)
