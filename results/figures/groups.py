"""Figures of request rows shared by the text tables and the HTML report: latency, and per group
(endpoint, or stage and endpoint) everything either of them shows. Computed once, here.

Latency figures count the clients' requests as ``trials.parquet`` does
(results.figures.metrics.summarise): origin writes and background ``refresh`` jobs left out.
Per-group figures leave out the writes only: a ``refresh`` group shows the origin calls the
background made. Every grouping of a run is folded in one two-pass scan of its rows
(``results.figures.scan``), so a report's memory does not grow with the number of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from results.figures import metrics, scan

# The request columns these figures read (``stage`` and ``bypass`` are absent from older runs).
COLUMNS = ("strategy", "stage", "op", "in_window", "t_intended_ns", "t_start_ns", "latency_ns",
           "outcome", "origin_called", "origin_ns", "pool_wait_ns", "bypass", "error")
LATENCY_COLUMNS = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")
STAGE_KEYS = ("strategy", "stage", "op")
_NAMES = {"op": "endpoint"}  # how a grouping column is named in the figures
Select = Callable[[pa.Table], pa.Table]


@dataclass(frozen=True)
class Grouping:
    """Rows kept (``select``), grouped by ``keys``; ``latency_only``: the latency figures alone."""

    keys: tuple[str, ...]
    select: Select
    latency_only: bool = False


@dataclass
class _Group:
    latency: scan.Quantiles = field(default_factory=lambda: scan.Quantiles(metrics.PERCENTILES))
    pool_wait: scan.Quantiles = field(default_factory=lambda: scan.Quantiles((0.99,)))
    query: scan.Quantiles = field(default_factory=lambda: scan.Quantiles((0.99,)))
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("requests", "errors", "hits", "bypassed", "origin_calls", "late_sends",
         "dropped_sends"), 0))
    first_ns: int | None = None
    last_ns: int | None = None
    bypass_known: bool = True


def window_requests(rows: pa.Table) -> pa.Table:
    """The clients' requests of the window: what a strategy's latency figures are over."""
    return metrics.client_requests(rows.filter(pc.fill_null(rows["in_window"], False)))


def window_reads(rows: pa.Table) -> pa.Table:
    return metrics.reads(rows.filter(pc.fill_null(rows["in_window"], False)))


def after_warmup(rows: pa.Table) -> pa.Table:
    reads = metrics.reads(rows)
    return reads.filter(pc.greater_equal(reads["stage"], 0)) if "stage" in reads.column_names \
        else reads.slice(0, 0)


def scan_groups(rows: pa.Table | scan.Source,
                groupings: Sequence[Grouping]) -> list[list[dict[str, Any]]]:
    """Every grouping's figures, in one two-pass scan; per grouping one dict per group (``op``
    named ``endpoint``), sorted."""
    source = rows if callable(rows) else scan.table_source(rows)
    folds: list[dict[tuple[Any, ...], _Group]] = [{} for _ in groupings]
    for second in (False, True):
        for batch in source(COLUMNS):
            table = pa.Table.from_batches([batch])
            for grouping, groups in zip(groupings, folds, strict=True):
                _fold(grouping, groups, grouping.select(table), second)
    return [_results(g, groups) for g, groups in zip(groupings, folds, strict=True)]


def _fold(grouping: Grouping, groups: dict[tuple[Any, ...], _Group], rows: pa.Table, second: bool) -> None:
    if rows.num_rows == 0:
        return
    keys = [k for k in grouping.keys if k in rows.column_names]
    found = rows.group_by(keys).aggregate([]).to_pylist() if keys else [{}]
    for values in found:
        key = tuple(values.get(k) for k in grouping.keys)
        part = _select(rows, values)
        group = groups.setdefault(key, _Group())
        called = part.filter(pc.greater(part["origin_called"], 0))
        inputs = [(group.latency, part["latency_ns"]), (group.pool_wait, called["pool_wait_ns"]),
                  (group.query, called["origin_ns"])]
        for q, column in inputs:
            values_ns = _ints(column)
            q.keep(values_ns) if second else q.count(values_ns)
        if not second:
            _count(group, part)


def _count(group: _Group, part: pa.Table) -> None:
    c = group.counts
    c["requests"] += part.num_rows
    c["errors"] += _sum(pc.equal(part["outcome"], "error"))
    c["hits"] += _sum(pc.equal(part["outcome"], "hit"))
    c["origin_calls"] += _sum(part["origin_called"])
    if "bypass" in part.column_names:
        c["bypassed"] += _sum(part["bypass"])
    else:
        group.bypass_known = False
    for name, count in metrics.sends(part).items():
        c[name] += count
    lo, hi = pc.min(part["t_intended_ns"]).as_py(), pc.max(part["t_intended_ns"]).as_py()
    group.first_ns = lo if group.first_ns is None else min(group.first_ns, lo)
    group.last_ns = hi if group.last_ns is None else max(group.last_ns, hi)


def _results(grouping: Grouping, groups: Mapping[tuple[Any, ...], _Group]) -> list[dict[str, Any]]:
    out = []
    for key in sorted(groups, key=lambda k: [(v is None, v) for v in k]):
        group = groups[key]
        named = {_NAMES.get(k, k): v for k, v in zip(grouping.keys, key, strict=True)}
        out.append({**named, **_figures(group, grouping.latency_only)})
    return out


def _figures(group: _Group, latency_only: bool) -> dict[str, Any]:
    c, n = group.counts, group.counts["requests"]
    peak = group.latency.peak
    latency = {"requests": n, "errors": c["errors"],
               "error_rate": c["errors"] / n if n else float("nan"),
               **dict(zip(LATENCY_COLUMNS, [*group.latency.result_ms(),
                                            peak / 1e6 if peak is not None else float("nan")],
                          strict=True))}
    if latency_only:
        return latency
    span_ns = (group.last_ns or 0) - (group.first_ns or 0)
    return {
        **latency,
        "rps": n / (span_ns / 1e9) if span_ns > 0 else float("nan"),
        "hit_pct": 100 * c["hits"] / n,
        "bypass_pct": 100 * c["bypassed"] / n if group.bypass_known else float("nan"),
        "origin_calls": c["origin_calls"],
        "pool_wait_p99_ms": group.pool_wait.result_ms()[0],
        "query_p99_ms": group.query.result_ms()[0],
        "late_sends": c["late_sends"], "dropped_sends": c["dropped_sends"],
    }


def latency_figures(rows: pa.Table | scan.Source) -> dict[str, Any]:
    """Exact p50/p90/p99/p99.9/max over every row given (errors included) and the error rate."""
    (found,) = scan_groups(rows, [Grouping((), lambda t: t, latency_only=True)])
    return found[0] if found else {"requests": 0, "errors": 0, "error_rate": float("nan"),
                                   **dict.fromkeys(LATENCY_COLUMNS, float("nan"))}


def group_figures(rows: pa.Table | scan.Source, keys: Sequence[str]) -> list[dict[str, Any]]:
    """One dict per group of ``keys`` (``op`` named ``endpoint``), sorted, origin write rows
    left out: latency figures, rate, hit and bypass shares, origin calls, open-loop sends, and
    pool wait and query p99 over the rows that reached the origin (experiment 003: a light
    endpoint whose latency is pool wait shows it next to its short query time)."""
    (found,) = scan_groups(rows, [Grouping(tuple(keys), metrics.reads)])
    return found


def stage_rows(rows: pa.Table | scan.Source) -> list[dict[str, Any]]:
    """One dict per (strategy, stage, endpoint) over the rows after warm-up (stage >= 0)."""
    (found,) = scan_groups(rows, [Grouping(STAGE_KEYS, after_warmup)])
    return found


def _select(rows: pa.Table, group: Mapping[str, Any]) -> pa.Table:
    mask = None
    for key, value in group.items():
        term = pc.is_null(rows[key]) if value is None else pc.equal(rows[key], value)
        mask = term if mask is None else pc.and_(mask, term)
    return rows if mask is None else rows.filter(mask)


def _sum(column: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(column).as_py() or 0)  # nulls are left out


def _ints(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False) if len(column) else [], np.int64)

