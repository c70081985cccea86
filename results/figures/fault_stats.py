"""What a strategy did while a fault held: requests, errors, origin calls in the fault window.

``served`` is every request that got a value (hit, stale, filled, waited) during the fault: a
strategy that keeps serving when its lock store is gone *fails open* (it pays with origin calls);
one that answers with errors *fails closed* (it protects the origin). The database's side of it
(``on_cache_error=origin`` sends every request there when the cache is gone): origin calls per
second under the fault against before it, the pool wait of those calls and the requests' p99.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from results.figures.metrics import client_requests, percentiles_ms

FAULT_FIELDS = ("fault_requests", "fault_errors", "fault_served", "fault_origin_calls")
# The database load under the fault (NaN when there was none to measure).
LOAD_FIELDS = ("fault_origin_per_s", "pre_fault_origin_per_s", "fault_pool_wait_p99_ms",
               "fault_p99_ms")


def _started(rows: pa.Table, start_ns: int, end_ns: int) -> pa.Table:
    return rows.filter(pc.and_(pc.greater_equal(rows["t_start_ns"], start_ns),
                               pc.less(rows["t_start_ns"], end_ns)))


def under_fault(rows: pa.Table, start_ns: int, end_ns: int) -> dict[str, int]:
    """Counts over the rows that started inside [start_ns, end_ns) on the coordinator's clock."""
    inside = _started(rows, start_ns, end_ns)
    errors = int(pc.sum(pc.equal(inside["outcome"], "error")).as_py() or 0)
    return {
        "fault_requests": inside.num_rows,
        "fault_errors": errors,
        "fault_served": inside.num_rows - errors,
        "fault_origin_calls": int(pc.sum(inside["origin_called"]).as_py() or 0),
    }


def origin_load(rows: pa.Table, trial_start_ns: int, start_ns: int,
                end_ns: int) -> dict[str, float]:
    """What the database took while the fault held, against the same trial before it: origin
    calls started per second (background refreshes and write-throughs included, as PostgreSQL
    counts them), the p99 pool wait of those calls (the pool is the bound the fallback meets),
    and the p99 latency of the clients' requests (errors included)."""
    inside = _started(rows, start_ns, end_ns)
    before = _started(rows, trial_start_ns, start_ns)
    called = inside.filter(pc.greater(inside["origin_called"], 0))
    return {
        "fault_origin_per_s": _per_s(inside, start_ns, end_ns),
        "pre_fault_origin_per_s": _per_s(before, trial_start_ns, start_ns),
        "fault_pool_wait_p99_ms": percentiles_ms(called["pool_wait_ns"], (0.99,))[0],
        "fault_p99_ms": percentiles_ms(client_requests(inside)["latency_ns"], (0.99,))[0],
    }


def _per_s(rows: pa.Table, start_ns: int, end_ns: int) -> float:
    if end_ns <= start_ns:
        return float("nan")
    return int(pc.sum(rows["origin_called"]).as_py() or 0) / ((end_ns - start_ns) / 1e9)


def behaviour(requests: int, errors: int) -> str:
    """``fail-open`` when most requests under the fault still got a value (some failed),
    ``fail-closed`` when most failed, ``no errors`` when none did (the origin may still
    have taken the herd: read the origin calls beside it)."""
    if requests == 0:
        return "no requests"
    if errors == 0:
        return "no errors"
    return "fail-open" if errors * 2 < requests else "fail-closed"
