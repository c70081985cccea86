"""Vectorised analysis of a run directory for the report: nothing here loops over request rows.

Each trial partition is read on its own with only the columns needed (pyarrow projection), so
memory holds one strategy's in-window latencies at most, never the whole run. Percentiles are
exact (results.metrics: linear interpolation over all rows, errors included).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from results import store
from results.metrics import PERCENTILES, percentiles_ms

BIN_NS = 100_000_000  # origin calls are counted per 100 ms
LATENCY_COLUMNS = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")


@dataclass
class Timeline:
    """Origin calls per 100 ms of one trial, with its expiry instants (seconds from start)."""

    trial: int
    strategy: str
    repeat: int
    counts: np.ndarray
    expiries_s: list[float]
    window_s: tuple[float, float]


@dataclass
class RunData:
    root: Path
    meta: dict[str, Any]
    trials: list[dict[str, Any]]
    columns: set[str]
    timelines: list[Timeline] = field(default_factory=list)
    latency: list[dict[str, Any]] = field(default_factory=list)  # one row per strategy
    endpoints: list[dict[str, Any]] = field(default_factory=list)  # per strategy and op
    stages: list[dict[str, Any]] = field(default_factory=list)  # per strategy, stage and op
    statements: list[dict[str, Any]] = field(default_factory=list)


def load(root: Path) -> RunData:
    """Everything the report shows, computed from raw rows and the run's recorded configuration."""
    dataset = store.requests_dataset(root)
    meta = store.read_meta(root)
    trials = store.read_trials(root).to_pylist()
    statements = store.read_statements(root)
    data = RunData(root, meta, trials, set(dataset.schema.names),
                   statements=statements.to_pylist() if statements is not None else [])
    plans = {int(t["trial"]): t for t in meta.get("trials", [])}
    for row in trials:
        plan = plans.get(int(row["trial"]))
        if plan is not None:
            data.timelines.append(timeline(dataset, row, plan, float(meta["spec"]["seconds"])))
    for strategy, tables in _window_rows_by_strategy(dataset, trials, data.columns):
        rows = pa.concat_tables(tables)
        floor = min((float(t["floor_ms"]) for t in trials if t["strategy"] == strategy),
                    default=float("nan"))
        data.latency.append({"strategy": strategy, **latency_figures(rows), "floor_ms": floor})
        data.endpoints.extend({**g, "floor_ms": floor} for g in _grouped(strategy, rows, ("op",)))
        if _staged(rows):
            data.stages.extend({**g, "floor_ms": floor}
                               for g in _grouped(strategy, rows, ("stage", "op")))
    return data


def _staged(rows: pa.Table) -> bool:
    """A staged run: its window rows fall into more than one stage (every run has the column)."""
    return "stage" in rows.column_names and len(pc.unique(rows["stage"])) > 1


def timeline(dataset: ds.Dataset, row: Mapping[str, Any], plan: Mapping[str, Any],
             seconds: float) -> Timeline:
    start, ttl_ns = int(plan["start_ns"]), int(float(row["ttl_s"]) * 1e9)
    end = start + int(seconds * 1e9)
    called = dataset.to_table(
        columns=["origin_called", "origin_start_ns"],
        filter=(ds.field("trial") == int(row["trial"])) & (ds.field("origin_called") > 0))
    offsets = pc.subtract(called["origin_start_ns"], start).to_numpy()
    weights = called["origin_called"].to_numpy().astype(np.int64)
    keep = (offsets >= 0) & (offsets < end - start)
    bins = int(np.ceil((end - start) / BIN_NS))
    counts = np.bincount(offsets[keep] // BIN_NS, weights=weights[keep], minlength=bins)
    first = int(plan["first_expiry_ns"])
    expiries = [(t - start) / 1e9 for t in range(first, end, ttl_ns)] if ttl_ns > 0 else []
    window = ((int(plan["window_start_ns"]) - start) / 1e9, (int(plan["window_end_ns"]) - start) / 1e9)
    return Timeline(int(row["trial"]), str(row["strategy"]), int(row["repeat"]),
                    counts[:bins].astype(np.int64), expiries, window)


def _window_rows_by_strategy(dataset: ds.Dataset, trials: Sequence[Mapping[str, Any]],
                             columns: set[str]) -> Iterator[tuple[str, list[pa.Table]]]:
    """Per strategy, the in-window rows of its trials, only the columns the report needs."""
    wanted = [c for c in ("op", "stage", "latency_ns", "outcome", "origin_called", "origin_ns",
                          "pool_wait_ns") if c in columns]
    order: dict[str, list[int]] = {}
    for t in trials:
        order.setdefault(str(t["strategy"]), []).append(int(t["trial"]))
    for strategy, numbers in order.items():
        yield strategy, [
            dataset.to_table(columns=wanted,
                             filter=(ds.field("trial") == n) & ds.field("in_window"))
            for n in numbers
        ]


def latency_figures(rows: pa.Table) -> dict[str, Any]:
    """Exact p50/p90/p99/p99.9/max over every row (errors included) and the error rate."""
    latency = rows["latency_ns"]
    values = percentiles_ms(latency, PERCENTILES)
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


def _grouped(strategy: str, rows: pa.Table, keys: Sequence[str]) -> list[dict[str, Any]]:
    """Latency figures per group, plus p99 of pool wait and of query time over origin calls."""
    if not all(k in rows.column_names for k in keys) or rows.num_rows == 0:
        return []
    groups = rows.group_by(list(keys)).aggregate([]).to_pylist()
    out = []
    for group in groups:
        mask = None
        for k in keys:
            term = pc.equal(rows[k], group[k]) if group[k] is not None else pc.is_null(rows[k])
            mask = term if mask is None else pc.and_(mask, term)
        part = rows.filter(mask)
        called = part.filter(pc.greater(part["origin_called"], 0))
        pool, query = (percentiles_ms(called[c], (0.99,))[0] for c in ("pool_wait_ns", "origin_ns"))
        out.append({"strategy": strategy, **group, **latency_figures(part),
                    "origin_calls": called.num_rows, "pool_wait_p99_ms": pool,
                    "query_p99_ms": query})
    return out
