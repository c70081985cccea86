"""Figures of request rows shared by the text tables and the HTML report: latency, and per group
(endpoint, or stage and endpoint) everything either of them shows. Computed once, here.

Latency figures count the clients' requests as ``trials.parquet`` does (results.figures.metrics.summarise):
origin writes and background ``refresh`` jobs left out. Per-group figures leave out the
writes only: a ``refresh`` group shows the origin calls the background made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from results.figures import metrics

# The request columns these figures read (``stage`` and ``bypass`` are absent from older runs).
COLUMNS = ("strategy", "stage", "op", "in_window", "t_intended_ns", "t_start_ns", "latency_ns",
           "outcome", "origin_called", "origin_ns", "pool_wait_ns", "bypass", "error")
LATENCY_COLUMNS = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")
STAGE_KEYS = ("strategy", "stage", "op")
_NAMES = {"op": "endpoint"}  # how a grouping column is named in the figures


def latency_figures(rows: pa.Table) -> dict[str, Any]:
    """Exact p50/p90/p99/p99.9/max over every row given (errors included) and the error rate."""
    latency = rows["latency_ns"]
    values = metrics.percentiles_ms(latency, metrics.PERCENTILES)
    n = rows.num_rows
    errors = int(pc.sum(pc.equal(rows["outcome"], "error")).as_py() or 0) if n else 0
    peak = pc.max(latency).as_py() if n else None
    return {
        "requests": n,
        "errors": errors,
        "error_rate": errors / n if n else float("nan"),
        **dict(zip(LATENCY_COLUMNS, [*values, peak / 1e6 if peak is not None else float("nan")],
                   strict=True)),
    }


def stage_rows(rows: pa.Table) -> list[dict[str, Any]]:
    """One dict per (strategy, stage, endpoint) over the rows after warm-up (stage >= 0)."""
    return group_figures(rows.filter(pc.greater_equal(rows["stage"], 0)), STAGE_KEYS)


def group_figures(rows: pa.Table, keys: Sequence[str]) -> list[dict[str, Any]]:
    """One dict per group of ``keys`` (``op`` named ``endpoint``), sorted, origin write rows
    left out: latency figures, rate, hit and bypass shares, origin calls, open-loop sends, and
    pool wait and query p99 over the rows that reached the origin (experiment 003: a light
    endpoint whose latency is pool wait shows it next to its short query time)."""
    rows = metrics.reads(rows)
    if rows.num_rows == 0:
        return []
    groups = rows.group_by(list(keys)).aggregate([]).to_pylist()
    groups.sort(key=lambda g: [(g[k] is None, g[k]) for k in keys])
    return [{**{_NAMES.get(k, k): g[k] for k in keys}, **_figures(_select(rows, g))} for g in groups]


def _select(rows: pa.Table, group: Mapping[str, Any]) -> pa.Table:
    mask = None
    for key, value in group.items():
        term = pc.is_null(rows[key]) if value is None else pc.equal(rows[key], value)
        mask = term if mask is None else pc.and_(mask, term)
    return rows.filter(mask)


def _figures(group: pa.Table) -> dict[str, Any]:
    n = group.num_rows
    span_ns = (pc.max(group["t_intended_ns"]).as_py() or 0) - (pc.min(group["t_intended_ns"]).as_py() or 0)
    called = group.filter(pc.greater(group["origin_called"], 0))
    (pool99,) = metrics.percentiles_ms(called["pool_wait_ns"], (0.99,))
    (query99,) = metrics.percentiles_ms(called["origin_ns"], (0.99,))
    bypassed = (pc.sum(group["bypass"]).as_py() or 0) if "bypass" in group.column_names else float("nan")
    return {
        **latency_figures(group),
        "rps": n / (span_ns / 1e9) if span_ns > 0 else float("nan"),
        "hit_pct": 100 * (pc.sum(pc.equal(group["outcome"], "hit")).as_py() or 0) / n,
        "bypass_pct": 100 * bypassed / n,
        "origin_calls": int(pc.sum(group["origin_called"]).as_py() or 0),
        "pool_wait_p99_ms": pool99, "query_p99_ms": query99,
        **metrics.sends(group),
    }
