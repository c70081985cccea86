"""Metric definitions on hand-made rows (BRIEF section 3)."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from results.figures import metrics
from results.store.schema import REQUEST_SCHEMA


def test_peak_inflight_counts_overlaps_only() -> None:
    # [0,10) [5,15) [10,20): at most two at once; one ending at 10 does not overlap one starting at 10
    assert metrics.peak_inflight([0, 5, 10], [10, 10, 10]) == 2
    assert metrics.peak_inflight([0, 0, 0, 100], [50, 50, 50, 1]) == 3
    assert metrics.peak_inflight([], []) == 0


def test_percentiles_are_exact_with_linear_interpolation() -> None:
    latency = pa.array([1_000_000 * i for i in range(1, 101)])  # 1..100 ms
    p50, p99 = metrics.percentiles_ms(latency, (0.5, 0.99))
    assert p50 == pytest.approx(50.5)
    assert p99 == pytest.approx(99.01)
    assert all(math.isnan(v) for v in metrics.percentiles_ms(pa.array([], pa.int64()), (0.5,)))


def rows(latencies_ms: list[float], outcomes: list[str], origin: list[int],
         t_start: list[int]) -> pa.Table:
    n = len(latencies_ms)
    data: dict[str, list[object]] = {
        f.name: [False if f.type == pa.bool_() else 0] * n for f in REQUEST_SCHEMA}
    data.update({
        "run_id": ["r"] * n, "strategy": ["naive"] * n, "worker": ["w"] * n, "key": ["k"] * n,
        "op": ["get"] * n, "latency_ns": [int(ms * 1e6) for ms in latencies_ms],
        "outcome": outcomes, "origin_called": origin, "t_start_ns": t_start,
        "origin_start_ns": t_start, "origin_ns": [3_000_000] * n,
        "error": ["MaxConnectionsError: pool" if o == "error" else None for o in outcomes],
        "in_window": [False] * n, "cache_status": [""] * n, "age_s": [-1] * n,
    })
    table = pa.Table.from_pydict(data, schema=REQUEST_SCHEMA)
    window = metrics.Window(100, 200)
    return table.set_column(table.schema.get_field_index("in_window"), "in_window",
                            metrics.in_window(table["t_start_ns"], window))


def test_summary_counts_errors_in_latency_and_only_window_rows() -> None:
    window = metrics.Window(100, 200)
    table = rows(
        latencies_ms=[0.01, 0.01, 5.0, 6.0, 7.0, 999.0],
        outcomes=["error", "error", "filled", "hit", "waited", "filled"],
        origin=[0, 0, 1, 0, 0, 1],
        t_start=[110, 120, 130, 140, 150, 250],  # the last is outside the window
    )
    s = metrics.summarise(table, window, floor_ms=0.05)
    assert s["requests"] == 5
    assert s["errors"] == 2
    assert s["error_rate"] == pytest.approx(0.4)
    assert s["p50_ms"] == pytest.approx(5.0)  # errors count in the percentiles
    assert s["window_origin_calls"] == 1 and s["origin_calls_total"] == 2
    assert s["waits"] == 1
    assert s["max_ms"] == pytest.approx(7.0)
    assert s["error_types"] == "MaxConnectionsError: pool: 2"


def test_errors_faster_than_the_floor_are_flagged() -> None:
    window = metrics.Window(100, 200)
    table = rows([0.01, 0.01, 0.01, 2.0], ["error", "error", "error", "hit"], [0, 0, 0, 0],
                 [110, 120, 130, 140])
    assert metrics.summarise(table, window, floor_ms=0.08)["below_floor"] is True
