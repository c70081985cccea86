"""What a strategy did while a fault held: requests, errors, origin calls in the fault window.

``served`` is every request that got a value (hit, stale, filled, waited) during the fault: a
strategy that keeps serving when its lock store is gone *fails open* (it pays with origin calls);
one that answers with errors *fails closed* (it protects the origin).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

FAULT_FIELDS = ("fault_requests", "fault_errors", "fault_served", "fault_origin_calls")


def under_fault(rows: pa.Table, start_ns: int, end_ns: int) -> dict[str, int]:
    """Counts over the rows that started inside [start_ns, end_ns) on the coordinator's clock."""
    inside = rows.filter(pc.and_(pc.greater_equal(rows["t_start_ns"], start_ns),
                                 pc.less(rows["t_start_ns"], end_ns)))
    errors = int(pc.sum(pc.equal(inside["outcome"], "error")).as_py() or 0)
    return {
        "fault_requests": inside.num_rows,
        "fault_errors": errors,
        "fault_served": inside.num_rows - errors,
        "fault_origin_calls": int(pc.sum(inside["origin_called"]).as_py() or 0),
    }


def behaviour(requests: int, errors: int) -> str:
    """``fail-open`` when most requests under the fault still got a value (some failed),
    ``fail-closed`` when most failed, ``no errors`` when none did (the origin may still
    have taken the herd: read the origin calls beside it)."""
    if requests == 0:
        return "no requests"
    if errors == 0:
        return "no errors"
    return "fail-open" if errors * 2 < requests else "fail-closed"
