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

from results.figures import metrics, scan
from results.figures.batch import Batch

# The request columns these figures read (``stage`` and ``bypass`` are absent from older runs).
COLUMNS = ("strategy", "stage", "op", "in_window", "t_intended_ns", "t_start_ns", "latency_ns",
           "outcome", "origin_called", "origin_ns", "pool_wait_ns", "bypass", "error")
# What the second pass reads (the values of the quantiles, and what selects and groups them).
SECOND_COLUMNS = ("strategy", "stage", "op", "in_window", "latency_ns", "origin_called",
                  "origin_ns", "pool_wait_ns")
LATENCY_COLUMNS = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")
STAGE_KEYS = ("strategy", "stage", "op")
_NAMES = {"op": "endpoint"}  # how a grouping column is named in the figures
Select = Callable[[Batch], np.ndarray]  # a batch -> the mask of the rows a grouping keeps


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


def everything(b: Batch) -> np.ndarray:
    return np.ones(b.n, bool)


def window_requests(b: Batch) -> np.ndarray:
    """The clients' requests of the window: what a strategy's latency figures are over."""
    return np.asarray(b.client_requests() & b.in_window(), bool)


def window_reads(b: Batch) -> np.ndarray:
    return np.asarray(b.reads() & b.in_window(), bool)


def after_warmup(b: Batch) -> np.ndarray:
    return b.reads() & (b.ints("stage") >= 0) if b.has("stage") else np.zeros(b.n, bool)


def scan_groups(rows: pa.Table | scan.Source,
                groupings: Sequence[Grouping]) -> list[list[dict[str, Any]]]:
    """Every grouping's figures, in one two-pass scan; per grouping one dict per group (``op``
    named ``endpoint``), sorted."""
    source = rows if callable(rows) else scan.table_source(rows)
    folds: list[dict[tuple[Any, ...], _Group]] = [{} for _ in groupings]
    for second in (False, True):
        for batch in source(SECOND_COLUMNS if second else COLUMNS):
            view = Batch(batch)
            for grouping, groups in zip(groupings, folds, strict=True):
                _fold(grouping, groups, view, second)
    return [_results(g, groups) for g, groups in zip(groupings, folds, strict=True)]


def _keys(b: Batch, keys: Sequence[str], kept: np.ndarray) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """The groups among the kept rows: their key values (None for a column the rows lack), and
    each kept row's group number."""
    columns: list[np.ndarray] = []
    decoders: dict[str, Callable[[int], Any]] = {}
    for k in keys:
        if not b.has(k):
            continue
        if k == "stage":
            columns.append(b.ints(k)[kept])
            decoders[k] = int
        else:
            codes, names = b.codes(k)
            columns.append(codes[kept])
            decoders[k] = names.__getitem__
    if not columns:
        return [tuple(None for _ in keys)], np.zeros(int(kept.sum()), np.int64)
    found, inverse = _distinct_rows(columns)
    keyed = []
    for row in found:
        values = iter(row)
        keyed.append(tuple(decoders[k](int(next(values))) if k in decoders else None for k in keys))
    return keyed, inverse


def _distinct_rows(columns: Sequence[np.ndarray]) -> tuple[list[list[int]], np.ndarray]:
    """The distinct rows of small-integer columns, and each row's index among them, in O(n):
    the columns packed into one number (mixed radix), counted, looked up."""
    lows = [int(c.min()) for c in columns]
    radices = [int(c.max()) - low + 1 for c, low in zip(columns, lows, strict=True)]
    packed = np.zeros(columns[0].size, np.int64)
    for c, low, radix in zip(columns, lows, radices, strict=True):
        packed = packed * radix + (c - low)
    present = np.flatnonzero(np.bincount(packed))
    lookup = np.full(int(packed.max()) + 1, -1, np.int64)
    lookup[present] = np.arange(present.size)
    rows = []
    for packed_value in present.tolist():
        digits, rest = [], packed_value
        for low, radix in zip(reversed(lows), reversed(radices), strict=True):
            rest, digit = divmod(rest, radix)
            digits.append(digit + low)
        rows.append(digits[::-1])
    return rows, lookup[packed]


def _fold(grouping: Grouping, groups: dict[tuple[Any, ...], _Group], b: Batch,
          second: bool) -> None:
    kept = grouping.select(b)
    if not kept.any():
        return
    names, member = _keys(b, grouping.keys, kept)
    found = [groups.setdefault(key, _Group()) for key in names]
    latency = b.ints("latency_ns")[kept]
    called = b.ints("origin_called")[kept] > 0
    if second:
        for g, group in enumerate(found):
            group.latency.keep(latency[member == g])
    else:
        _count(found, b, kept, member, latency)
    for g, group in enumerate(found):  # the origin calls: few
        mine = called & (member == g)
        for q, name in ((group.pool_wait, "pool_wait_ns"), (group.query, "origin_ns")):
            values = b.ints(name)[kept][mine]
            q.keep(values) if second else q.count(values)


def _count(found: Sequence[_Group], b: Batch, kept: np.ndarray, member: np.ndarray,
           latency: np.ndarray) -> None:
    """The first pass over one batch's kept rows, every group at once (bincounts by group)."""
    n = len(found)
    cells = scan.bucket_count(member, b.buckets("latency_ns")[kept], n)
    masks = {"errors": b.outcome("error"), "hits": b.outcome("hit"), "late_sends": b.late(),
             "dropped_sends": b.dropped(), "bypassed": b.flag("bypass") if b.has("bypass") else None}
    sums = {name: np.bincount(member[mask[kept]], minlength=n) if mask is not None
            else np.zeros(n, np.int64) for name, mask in masks.items()}
    sums["requests"] = np.bincount(member, minlength=n)
    calls = b.ints("origin_called")[kept]
    sums["origin_calls"] = np.bincount(member[calls > 0], weights=calls[calls > 0], minlength=n)
    intended = b.ints("t_intended_ns")[kept]
    for g, group in enumerate(found):
        mine = member == g
        group.latency.add_counts(cells[g], latency[mine])
        for name, total in sums.items():
            group.counts[name] += int(total[g])
        group.bypass_known = group.bypass_known and b.has("bypass")
        lo, hi = int(intended[mine].min()), int(intended[mine].max())
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
    (found,) = scan_groups(rows, [Grouping((), everything, latency_only=True)])
    return found[0] if found else {"requests": 0, "errors": 0, "error_rate": float("nan"),
                                   **dict.fromkeys(LATENCY_COLUMNS, float("nan"))}


def group_figures(rows: pa.Table | scan.Source, keys: Sequence[str]) -> list[dict[str, Any]]:
    """One dict per group of ``keys`` (``op`` named ``endpoint``), sorted, origin write rows
    left out: latency figures, rate, hit and bypass shares, origin calls, open-loop sends, and
    pool wait and query p99 over the rows that reached the origin (experiment 003: a light
    endpoint whose latency is pool wait shows it next to its short query time)."""
    (found,) = scan_groups(rows, [Grouping(tuple(keys), Batch.reads)])
    return found


def stage_rows(rows: pa.Table | scan.Source) -> list[dict[str, Any]]:
    """One dict per (strategy, stage, endpoint) over the rows after warm-up (stage >= 0)."""
    (found,) = scan_groups(rows, [Grouping(STAGE_KEYS, after_warmup)])
    return found
