"""Self-checks that make a number trustworthy: generator saturation and database-side counts.

Each check turns raw evidence (worker task results, pg_stat_statements snapshots) into columns
of ``trials.parquet`` / rows of ``statements.parquet``, so the table and the report can flag it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from model.wire import TrialResult

# A CPython worker is GIL-bound: at 90% of one core its clients queue for the interpreter.
CPU_SATURATED = 0.9
# A sampler asking to wake every 10 ms that wakes this late means clients wait to run.
LAG_SATURATED_MS = 20.0
# Clients released this late after the common start instant: the start is no longer common.
RELEASE_LATE_MS = 50.0

Snapshot = Mapping[int, tuple[str, int, float]]


def generator_figures(results: Sequence[TrialResult]) -> dict[str, Any]:
    """The worst worker's CPU share, loop lag and release lateness, and whether it saturated."""
    cpu = max((r.cpu_share for r in results), default=0.0)
    lag_ms = max((r.loop_lag_p99_ns for r in results), default=0) / 1e6
    late_ms = max((r.release_late_ns for r in results), default=0) / 1e6
    return {
        "max_worker_cpu": cpu,
        "max_loop_lag_ms": lag_ms,
        "max_release_late_ms": late_ms,
        "saturated": is_saturated(cpu, lag_ms, late_ms),
    }


def is_saturated(cpu: float, lag_ms: float, late_ms: float) -> bool:
    return cpu >= CPU_SATURATED or lag_ms >= LAG_SATURATED_MS or late_ms >= RELEASE_LATE_MS


def saturation_reason(row: Mapping[str, Any]) -> str:
    """Why a trial's generator counts as saturated, in words; empty when it did not."""
    reasons = []
    cpu, lag, late = (row.get("max_worker_cpu"), row.get("max_loop_lag_ms"),
                      row.get("max_release_late_ms"))
    if cpu is not None and cpu >= CPU_SATURATED:
        reasons.append(f"worker CPU {cpu:.0%} of one core")
    if lag is not None and lag >= LAG_SATURATED_MS:
        reasons.append(f"loop lag p99 {lag:.1f} ms")
    if late is not None and late >= RELEASE_LATE_MS:
        reasons.append(f"released {late:.1f} ms late")
    return ", ".join(reasons)


def statement_rows(before: Snapshot, after: Snapshot, run_id: str, trial: int,
                   origin_marks: Collection[str]) -> list[dict[str, Any]]:
    """Per-statement calls and time during the trial, with each one's share of database time.

    A statement is an origin statement when it holds one of ``origin_marks`` (every endpoint's
    query, the same set the origin-call cross-check counts)."""
    deltas = []
    for queryid, (query, calls, total_ms) in after.items():
        _, calls0, total0 = before.get(queryid, (query, 0, 0.0))
        if calls - calls0 > 0:
            deltas.append((queryid, query, calls - calls0, total_ms - total0))
    db_time = sum(d[3] for d in deltas)
    deltas.sort(key=lambda d: -d[3])
    return [
        {"run_id": run_id, "trial": trial, "queryid": queryid, "query": query[:500],
         "calls": calls, "total_ms": total, "mean_ms": total / calls,
         "share": total / db_time if db_time > 0 else 0.0, "is_origin": any(m in query for m in origin_marks)}
        for queryid, query, calls, total in deltas
    ]


def origin_mismatch(client_calls: int, db_calls: int | None) -> str:
    """A line naming the mismatch between the clients' and PostgreSQL's origin counts, or ''."""
    if db_calls is None or client_calls == db_calls:
        return ""
    return (f"clients counted {client_calls} origin calls, PostgreSQL counted {db_calls} "
            f"({db_calls - client_calls:+d})")
