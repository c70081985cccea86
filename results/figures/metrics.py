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
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from results.figures import intervals, rates, scan
from results.figures.batch import Batch
from results.store.schema import (
    APP_OP,
    DROPPED,
    LATE_MS,
    LEGACY_WRITE_OP,
    NOT_REQUESTS,
    REFRESH_OP,
    REQUEST_SCHEMA,
    WRITE_OP,
)

PERCENTILES = (0.5, 0.9, 0.99, 0.999)
BOUNDED = (0.5, 0.99)  # the percentiles given with their 95 % interval (p50_ms_lo, p99_ms_hi, ...)


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
    period_ns: int = 0  # the TTL: the window is whole periods (0: unknown, e.g. a hand-made window)

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
    (origin writes, background ``refresh`` jobs and the app tier's own ``app`` rows left out)."""
    rows = reads(rows)
    return rows.filter(pc.invert(pc.is_in(rows["op"], pa.array(NOT_REQUESTS))))


# The request columns the trial's figures read.
COLUMNS = ("worker", "op", "in_window", "outcome", "latency_ns", "local_hit", "error",
           "origin_called", "fallback", "stale_age_ns", "t_start_ns", "t_intended_ns", "key",
           "origin_start_ns", "origin_ns", "refresh_of_ns", "pool_wait_ns", "cache_status")
# What the second pass reads.
SECOND_COLUMNS = ("op", "in_window", "outcome", "latency_ns", "local_hit", "stale_age_ns")
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
    folds = _Folds(window)
    for batch in source(COLUMNS):
        folds.first(Batch(batch))
    for batch in source(SECOND_COLUMNS):
        folds.second(Batch(batch))
    return folds.result(window, floor_ms)



def _median_ms(column: pa.ChunkedArray | pa.Array) -> float:
    """The median of a (small) column of nanoseconds, in ms; NaN for none."""
    return percentiles_ms(column, (0.5,))[0]


_COUNTED = ("requests", "errors", "stale_served", "waits", "local_hits", "window_origin_calls",
            "refreshes", "fallback_calls", "late_sends", "dropped_sends", "origin_calls_total",
            "client_requests_all")


@dataclass
class _Folds:
    """Counts folded batch by batch, and the quantiles' two passes."""

    window: Window
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTED, 0))
    errors: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)  # an HTTP cache's words on the window's answers
    called: list[pa.Table] = field(default_factory=list)
    firsts: dict[str, int] = field(default_factory=dict)
    latency: scan.Quantiles = field(
        default_factory=lambda: scan.Quantiles(PERCENTILES, bounded=BOUNDED))
    seconds: rates.Seconds = field(init=False)

    def __post_init__(self) -> None:
        self.seconds = rates.Seconds(self.window)
    remote: scan.Quantiles = field(default_factory=lambda: scan.Quantiles((0.5,)))
    stale_age: scan.Quantiles = field(default_factory=lambda: scan.Quantiles((0.5,)))

    def first(self, b: Batch) -> None:
        c = self.counts
        calls = b.ints("origin_called")
        reads_, clients, window = b.reads(), b.client_requests(), b.in_window()
        c["origin_calls_total"] += int(calls.sum())
        c["client_requests_all"] += int(clients.sum())
        self._firsts(b)
        wanted = (calls > 0) | (clients & b.outcome("waited"))  # the events' calls and waits
        if wanted.any():
            called = b.table.filter(pa.array(wanted))
            self.called.append(scan.plain(called.select([x for x in CALL_COLUMNS
                                                         if x in called.column_names])))
        everything, win = reads_ & window, clients & window
        self.seconds.add(b, win)
        c["requests"] += int(win.sum())
        for name, outcome in (("errors", "error"), ("stale_served", "stale"), ("waits", "waited")):
            c[name] += int((b.outcome(outcome) & win).sum())
        c["local_hits"] += int(b.ints("local_hit")[win].sum())
        c["window_origin_calls"] += int(calls[everything].sum())
        c["refreshes"] += int((b.is_in("op", (REFRESH_OP,)) & everything).sum())
        if b.has("fallback"):
            c["fallback_calls"] += int(calls[everything & b.flag("fallback")].sum())
        c["late_sends"] += int((b.late() & win).sum())
        c["dropped_sends"] += int((b.dropped() & win).sum())
        _count_errors(self.errors, b, everything & ~b.is_in("op", (APP_OP,)))  # the client's row has it
        if b.has("cache_status"):
            _add(self.statuses, b.value_counts("cache_status", win))
        for q, values in self._quantile_inputs(b, win):
            q.count(values)

    def second(self, b: Batch) -> None:
        for q, values in self._quantile_inputs(b, b.client_requests() & b.in_window()):
            q.keep(values)

    def _quantile_inputs(self, b: Batch, win: np.ndarray) -> list[tuple[scan.Quantiles, np.ndarray]]:
        latency = b.ints("latency_ns")
        remote = win & (b.ints("local_hit") == 0)
        stale = win & b.outcome("stale")
        return [(self.latency, latency[win]), (self.remote, latency[remote]),
                (self.stale_age, b.ints("stale_age_ns")[stale])]

    def _firsts(self, b: Batch) -> None:
        if not b.has("worker") or b.n == 0:
            return
        clients = b.client_requests()  # a worker's first request (an app process sends none)
        codes, names = b.codes("worker")
        starts = b.ints("t_start_ns")
        for code in np.unique(codes[clients]).tolist():
            name, first = str(names[code]), int(starts[(codes == code) & clients].min())
            self.firsts[name] = min(first, self.firsts.get(name, first))

    def result(self, window: Window, floor_ms: float) -> Scanned:
        c = self.counts
        requests, errors = c["requests"], c["errors"]
        p50, p90, p99, p999 = self.latency.result_ms()
        called = (pa.concat_tables(self.called) if self.called
                  else pa.schema([REQUEST_SCHEMA.field(c) for c in CALL_COLUMNS]).empty_table())
        in_window = called.filter(pc.and_(called["in_window"],
                                          pc.greater(called["origin_called"], 0)))
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
            "cache_statuses": orjson.dumps(dict(sorted(self.statuses.items()))).decode()
            if self.statuses else "",
            "local_hits": c["local_hits"], "fallback_calls": c["fallback_calls"],
            "refreshes": c["refreshes"],
            "stale_age_p50_ms": stale_p50,
            "stale_age_max_ms": (self.stale_age.peak / 1e6 if self.stale_age.peak is not None
                                 else float("nan")),
            "peak_origin_per_s": peak_per_second(in_window["origin_start_ns"], window.start_ns),
            "origin_call_p50_ms": _median_ms(called["origin_ns"]),
            "late_sends": c["late_sends"], "dropped_sends": c["dropped_sends"],
            **self._intervals(),
        }
        return Scanned(figures, called, self.firsts, c["client_requests_all"])

    def _intervals(self) -> dict[str, object]:
        """p50 and p99 with their order-statistic intervals; rps and the stale share with
        their bootstrap over the window's seconds (results.figures.intervals)."""
        p50, p99 = self.latency.estimates_ms()
        rps, stale = self.seconds.estimates()
        return {**intervals.columns("p50_ms", p50), **intervals.columns("p99_ms", p99),
                **intervals.columns("rps", rps), "rate_bins": rps.n,
                "stale_share": stale.value, **intervals.columns("stale_share", stale)}


def _count_errors(found: dict[str, int], b: Batch, rows: np.ndarray) -> None:
    """Add the ``rows``' errors (their first 60 characters) to ``found``."""
    for text, n in b.value_counts("error", rows).items():
        _add(found, {text[:60]: n})


def _add(found: dict[str, int], more: dict[str, int]) -> None:
    for text, n in more.items():
        found[text] = found.get(text, 0) + n


def _error_types(found: dict[str, int]) -> str:
    """``Type: count`` of the window's errors, most frequent first."""
    ordered = sorted(found.items(), key=lambda item: -item[1])
    return "; ".join(f"{text}: {count}" for text, count in ordered[:5])
