"""Metric definitions (BRIEF section 3), computed exactly from raw request rows.

Percentiles: exact, over every request in the window (errors included), with linear
interpolation between the two neighbouring ranks (numpy's default, DuckDB's quantile_cont).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from results.store.schema import DROPPED, LATE_MS, LEGACY_WRITE_OP, REFRESH_OP, WRITE_OP

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


def summarise(rows: pa.Table, window: Window, floor_ms: float) -> dict[str, object]:
    """The per-trial figures of ``trials.parquet`` that come from request rows alone.

    Origin calls per event come from ``results.figures.events``; here the calls started in the window
    (background refreshes included) feed its per-period cross-check. Requests,
    latency, rps and outcomes count the clients' requests only (origin writes and
    ``refresh`` jobs left out). Every origin read call counts in ``origin_calls_total``, a
    write's write-through load (``on_write=update``) too, as PostgreSQL counts them all.
    """
    all_rows, rows = rows, reads(rows)
    everything = rows.filter(rows["in_window"])
    is_refresh = pc.equal(everything["op"], REFRESH_OP)
    win = client_requests(everything)
    outcome = win["outcome"]
    errors = int(pc.sum(pc.equal(outcome, "error")).as_py() or 0)
    requests = win.num_rows
    p50, p90, p99, p999 = percentiles_ms(win["latency_ns"], PERCENTILES)
    called = everything.filter(pc.greater(everything["origin_called"], 0))
    origin_calls = int(pc.sum(everything["origin_called"]).as_py() or 0)
    return {
        "requests": requests,
        "errors": errors,
        "error_rate": errors / requests if requests else float("nan"),
        "rps": requests / window.seconds,
        "p50_ms": p50,
        "p99_ms": p99,
        "p90_ms": p90,
        "p999_ms": p999,
        "max_ms": (pc.max(win["latency_ns"]).as_py() or 0) / 1e6,
        "window_origin_calls": origin_calls,
        "peak_origin_inflight": peak_inflight(
            called["origin_start_ns"].to_pylist(), called["origin_ns"].to_pylist()
        ),
        "stale_served": int(pc.sum(pc.equal(outcome, "stale")).as_py() or 0),
        "waits": int(pc.sum(pc.equal(outcome, "waited")).as_py() or 0),
        "origin_calls_total": int(pc.sum(all_rows["origin_called"]).as_py() or 0),
        "floor_ms": floor_ms,
        "below_floor": _below_floor(win, floor_ms),
        "error_types": _error_types(everything),
        "local_hits": int(pc.sum(win["local_hit"]).as_py() or 0),
        "fallback_calls": _fallback_calls(everything),
        "refreshes": int(pc.sum(is_refresh).as_py() or 0),
        **_stale_ages(win),
        "peak_origin_per_s": peak_per_second(called["origin_start_ns"], window.start_ns),
        **sends(win),
    }


def _fallback_calls(rows: pa.Table) -> int:
    """Origin calls of requests the origin answered because the cache failed."""
    answered = rows.filter(rows["fallback"])
    return int(pc.sum(answered["origin_called"]).as_py() or 0)


def _below_floor(win: pa.Table, floor_ms: float) -> bool:
    """p50 of the requests that went to Redis faster than one Redis round trip: a defect.
    In-process hits (two-level's local cache) are faster by design and left out."""
    remote = win.filter(pc.equal(win["local_hit"], 0))
    if remote.num_rows == 0:
        return False
    return bool(percentiles_ms(remote["latency_ns"], (0.5,))[0] < floor_ms)


def _stale_ages(win: pa.Table) -> dict[str, float]:
    """Median and largest age of the stale values served (NaN when none were)."""
    ages = win.filter(pc.equal(win["outcome"], "stale"))["stale_age_ns"]
    if len(ages) == 0:
        return {"stale_age_p50_ms": float("nan"), "stale_age_max_ms": float("nan")}
    return {"stale_age_p50_ms": percentiles_ms(ages, (0.5,))[0],
            "stale_age_max_ms": (pc.max(ages).as_py() or 0) / 1e6}


def _error_types(win: pa.Table) -> str:
    """``Type: count`` of the window's errors, most frequent first."""
    errors = win.filter(pc.is_valid(win["error"]))["error"]
    if len(errors) == 0:
        return ""
    counts = pc.value_counts(pc.utf8_slice_codeunits(errors, 0, 60)).to_pylist()
    counts.sort(key=lambda c: -c["counts"])
    return "; ".join(f"{c['values']}: {c['counts']}" for c in counts[:5])
