"""Metric definitions (BRIEF section 3), computed exactly from raw request rows.

Percentiles: exact, over every request in the window (errors included), with linear
interpolation between the two neighbouring ranks (numpy's default, DuckDB's quantile_cont). A
trial's figures are folded from its rows batch by batch (``results.figures.scan``), so a trial
of any length is summarised in flat memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from results.figures import scan
from results.store.schema import (
    DROPPED,
    LATE_MS,
    LEGACY_WRITE_OP,
    REFRESH_OP,
    REQUEST_SCHEMA,
    WRITE_OP,
)

PERCENTILES = (0.5, 0.9, 0.99, 0.999)


def percentiles_ms(latency_ns: pa.Array | pa.ChunkedArray, qs: Sequence[float]) -> list[float]:
    """Exact percentiles in milliseconds; NaN for an empty window."""
    if len(latency_ns) == 0:
        return [float("nan")] * len(qs)
    values = pc.quantile(latency_ns, q=list(qs), interpolation="linear")
    return [v / 1e6 for v in values.to_pylist()]


def peak_inflight(starts_ns: Iterable[int], durations_ns: Iterable[int]) -> int:
    """Most intervals open at one instant; one ending as another starts does not overlap it."""
    events: list[tuple[int, int]] = []
    for start, duration in zip(starts_ns, durations_ns, strict=True):
        events.append((start, 1))
        events.append((start + duration, -1))
    events.sort()  # at equal instants -1 sorts before +1: ends close before starts open
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


@dataclass(frozen=True)
class Window:
    """The measurement window of one trial: whole TTL periods, on the coordinator's clock."""

    start_ns: int
    end_ns: int

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def in_window(t_start_ns: pa.ChunkedArray | pa.Array, window: Window) -> pa.Array:
    return pc.and_(
        pc.greater_equal(t_start_ns, window.start_ns), pc.less(t_start_ns, window.end_ns)
    )


def peak_per_second(starts_ns: pa.Array | pa.ChunkedArray, origin_ns: int) -> int:
    """Most instants in one whole second counted from ``origin_ns`` (e.g. origin calls/s)."""
    if len(starts_ns) == 0:
        return 0
    buckets = pc.divide(pc.subtract(starts_ns, origin_ns), 10**9)
    counts = pc.value_counts(buckets)
    return int(pc.max(counts.field("counts")).as_py() or 0)


def sends(rows: pa.Table) -> dict[str, int]:
    """Open-loop sends started more than LATE_MS behind their intended instant, and dropped ones."""
    behind = pc.subtract(rows["t_start_ns"], rows["t_intended_ns"])
    dropped = pc.fill_null(pc.starts_with(rows["error"], DROPPED), False)
    late = pc.and_(pc.greater(behind, round(LATE_MS * 1e6)), pc.invert(dropped))
    return {"late_sends": int(pc.sum(late).as_py() or 0),
            "dropped_sends": int(pc.sum(dropped).as_py() or 0)}


def is_write(rows: pa.Table) -> pa.ChunkedArray:
    """The origin write rows (``write``; ``invalidate`` in runs made before versions)."""
    return pc.is_in(rows["op"], pa.array([WRITE_OP, LEGACY_WRITE_OP]))


def reads(rows: pa.Table) -> pa.Table:
    """The request rows (origin write rows left out): what latency figures are over."""
    return rows.filter(pc.invert(is_write(rows)))


def client_requests(rows: pa.Table) -> pa.Table:
    """The clients' requests: every figure of latency, rate and outcome is over these
    (origin writes and background ``refresh`` jobs left out)."""
    rows = reads(rows)
    return rows.filter(pc.not_equal(rows["op"], REFRESH_OP))


# The request columns the trial's figures read.
COLUMNS = ("worker", "op", "in_window", "outcome", "latency_ns", "local_hit", "error",
           "origin_called", "fallback", "stale_age_ns", "t_start_ns", "t_intended_ns", "key",
           "origin_start_ns", "origin_ns", "refresh_of_ns", "pool_wait_ns")
# The columns of the origin-call rows kept for the events, peaks and faults (few rows).
CALL_COLUMNS = ("key", "op", "in_window", "origin_called", "fallback", "t_start_ns",
                "origin_start_ns", "origin_ns", "refresh_of_ns", "pool_wait_ns", "outcome")


@dataclass
class Scanned:
    """What one scan of a trial's rows gives: the figures, the rows that reached the origin
    (events and herds are computed from them) and each worker's first request."""

    figures: dict[str, object]
    called: pa.Table
    first_start_ns: dict[str, int]
    client_requests: int  # over the whole trial (warm-up and drain too): per-request costs


def summarise(rows: pa.Table | scan.Source, window: Window, floor_ms: float) -> dict[str, object]:
    """The per-trial figures of ``trials.parquet`` that come from request rows alone."""
    return scan_trial(rows, window, floor_ms).figures


def scan_trial(rows: pa.Table | scan.Source, window: Window, floor_ms: float) -> Scanned:
    """The per-trial figures of ``trials.parquet`` from request rows, in two scans of flat memory.

    Origin calls per event come from ``results.figures.events`` (over ``Scanned.called``); here
    the calls started in the window (background refreshes included) feed its per-period
    cross-check. Requests, latency, rps and outcomes count the clients' requests only (origin
    writes and ``refresh`` jobs left out). Every origin read call counts in
    ``origin_calls_total``, a write's write-through load (``on_write=update``) too, as
    PostgreSQL counts them all.
    """
    source = rows if callable(rows) else scan.table_source(rows)
    folds = _Folds()
    for batch in source(COLUMNS):
        folds.first(pa.Table.from_batches([batch]))
    for batch in source(COLUMNS):
        folds.second(pa.Table.from_batches([batch]))
    return folds.result(window, floor_ms)


_COUNTED = ("requests", "errors", "stale_served", "waits", "local_hits", "window_origin_calls",
            "refreshes", "fallback_calls", "late_sends", "dropped_sends", "origin_calls_total",
            "client_requests_all")


@dataclass
class _Folds:
    """Counts folded batch by batch, and the quantiles' two passes."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTED, 0))
    errors: dict[str, int] = field(default_factory=dict)
    called: list[pa.Table] = field(default_factory=list)
    firsts: dict[str, int] = field(default_factory=dict)
    latency: scan.Quantiles = field(default_factory=lambda: scan.Quantiles(PERCENTILES))
    remote: scan.Quantiles = field(default_factory=lambda: scan.Quantiles((0.5,)))
    stale_age: scan.Quantiles = field(default_factory=lambda: scan.Quantiles((0.5,)))

    def first(self, rows: pa.Table) -> None:
        reads_ = reads(rows)
        self.counts["origin_calls_total"] += _sum(rows["origin_called"])
        self.counts["client_requests_all"] += client_requests(reads_).num_rows
        self._firsts(rows)
        called = rows.filter(pc.greater(rows["origin_called"], 0))
        if called.num_rows:
            self.called.append(called.select([c for c in CALL_COLUMNS if c in called.column_names]))
        everything = reads_.filter(reads_["in_window"])
        win = client_requests(everything)
        c = self.counts
        c["requests"] += win.num_rows
        c["errors"] += _sum(pc.equal(win["outcome"], "error"))
        c["stale_served"] += _sum(pc.equal(win["outcome"], "stale"))
        c["waits"] += _sum(pc.equal(win["outcome"], "waited"))
        c["local_hits"] += _sum(win["local_hit"])
        c["window_origin_calls"] += _sum(everything["origin_called"])
        c["refreshes"] += _sum(pc.equal(everything["op"], REFRESH_OP))
        c["fallback_calls"] += _fallback_calls(everything)
        for name, count in sends(win).items():
            c[name] += count
        _count_errors(self.errors, everything)
        for q, values in self._quantile_inputs(win):
            q.count(values)

    def second(self, rows: pa.Table) -> None:
        read = reads(rows)
        win = client_requests(read.filter(read["in_window"]))
        for q, values in self._quantile_inputs(win):
            q.keep(values)

    def _quantile_inputs(self, win: pa.Table) -> list[tuple[scan.Quantiles, np.ndarray]]:
        remote = win.filter(pc.equal(win["local_hit"], 0))
        stale = win.filter(pc.equal(win["outcome"], "stale"))
        return [(self.latency, _ints(win["latency_ns"])), (self.remote, _ints(remote["latency_ns"])),
                (self.stale_age, _ints(stale["stale_age_ns"]))]

    def _firsts(self, rows: pa.Table) -> None:
        if "worker" not in rows.column_names or rows.num_rows == 0:
            return
        for row in rows.group_by("worker").aggregate([("t_start_ns", "min")]).to_pylist():
            name, first = str(row["worker"]), int(row["t_start_ns_min"])
            self.firsts[name] = min(first, self.firsts.get(name, first))

    def result(self, window: Window, floor_ms: float) -> Scanned:
        c = self.counts
        requests, errors = c["requests"], c["errors"]
        p50, p90, p99, p999 = self.latency.result_ms()
        called = (pa.concat_tables(self.called) if self.called
                  else pa.schema([REQUEST_SCHEMA.field(c) for c in CALL_COLUMNS]).empty_table())
        in_window = called.filter(called["in_window"]) if called.num_rows else called
        stale_p50 = self.stale_age.result_ms()[0]
        figures: dict[str, object] = {
            "requests": requests, "errors": errors,
            "error_rate": errors / requests if requests else float("nan"),
            "rps": requests / window.seconds,
            "p50_ms": p50, "p99_ms": p99, "p90_ms": p90, "p999_ms": p999,
            "max_ms": (self.latency.peak or 0) / 1e6,
            "window_origin_calls": c["window_origin_calls"],
            "peak_origin_inflight": peak_inflight(in_window["origin_start_ns"].to_pylist(),
                                                  in_window["origin_ns"].to_pylist()),
            "stale_served": c["stale_served"], "waits": c["waits"],
            "origin_calls_total": c["origin_calls_total"],
            "floor_ms": floor_ms,
            "below_floor": bool(self.remote.n and self.remote.result_ms()[0] < floor_ms),
            "error_types": _error_types(self.errors),
            "local_hits": c["local_hits"], "fallback_calls": c["fallback_calls"],
            "refreshes": c["refreshes"],
            "stale_age_p50_ms": stale_p50,
            "stale_age_max_ms": (self.stale_age.peak / 1e6 if self.stale_age.peak is not None
                                 else float("nan")),
            "peak_origin_per_s": peak_per_second(in_window["origin_start_ns"], window.start_ns),
            "late_sends": c["late_sends"], "dropped_sends": c["dropped_sends"],
        }
        return Scanned(figures, called, self.firsts, c["client_requests_all"])


def _sum(column: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(column).as_py() or 0)


def _ints(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False) if len(column) else [], np.int64)


def _fallback_calls(rows: pa.Table) -> int:
    """Origin calls of requests the origin answered because the cache failed."""
    answered = rows.filter(rows["fallback"])
    return int(pc.sum(answered["origin_called"]).as_py() or 0)


def _count_errors(found: dict[str, int], rows: pa.Table) -> None:
    """Add the rows' errors (their first 60 characters) to ``found``."""
    errors = rows.filter(pc.is_valid(rows["error"]))["error"]
    if len(errors):
        for c in pc.value_counts(pc.utf8_slice_codeunits(errors, 0, 60)).to_pylist():
            found[c["values"]] = found.get(c["values"], 0) + int(c["counts"])


def _error_types(found: dict[str, int]) -> str:
    """``Type: count`` of the window's errors, most frequent first."""
    ordered = sorted(found.items(), key=lambda item: -item[1])
    return "; ".join(f"{text}: {count}" for text, count in ordered[:5])
