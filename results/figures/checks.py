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
                   origin_marks: Collection[str],
                   origin_ids: Collection[int] = ()) -> list[dict[str, Any]]:
    """Per-statement calls and time during the trial, with each one's share of database time.

    A statement is an origin statement when it holds one of ``origin_marks`` (every endpoint's
    query, the same set the origin-call cross-check counts) or is one of ``origin_ids`` (the
    user's statement, by query id)."""
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
         "share": total / db_time if db_time > 0 else 0.0,
         "is_origin": queryid in origin_ids or any(m in query for m in origin_marks)}
        for queryid, query, calls, total in deltas
    ]


def origin_mismatch(client_calls: int, db_calls: int | None, workers_lost: int = 0) -> str:
    """A line naming the mismatch between the clients' and PostgreSQL's origin counts, or ''.

    With workers lost and PostgreSQL counting more, the difference is explained by the loss:
    the lost workers' clients called the origin, but their rows never arrived."""
    if db_calls is None or client_calls == db_calls:
        return ""
    if workers_lost and db_calls > client_calls:
        return (f"PostgreSQL counted {db_calls} origin calls, the rows that arrived {client_calls} "
                f"({db_calls - client_calls:+d}): the difference is the calls of the "
                f"{workers_lost} lost worker(s) after their last batch, whose rows never "
                "arrived; not a miscount")
    return (f"clients counted {client_calls} origin calls, PostgreSQL counted {db_calls} "
            f"({db_calls - client_calls:+d})")


def liveness_notes(row: Mapping[str, Any]) -> list[str]:
    """A trial with missing workers (and their causes) or slow ones; runs made before issue 15
    have neither column and get nothing."""
    out = []
    lost, dispatched = int(row.get("workers_lost") or 0), int(row.get("workers") or 0)
    if lost:
        out.append(f"incomplete: {lost} of {dispatched} workers lost "
                   f"({row.get('lost_workers') or 'cause not recorded'}); their rows up to their "
                   "last batch are kept, the rest never came")
    if row.get("slow_workers"):
        out.append(f"slow, not lost: {row['slow_workers']} (alive, but silent for more than "
                   "half the --worker-silence limit)")
    return out


def workers_cell(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per repeat, the workers whose rows arrived of those sent a share (``2/3``), with the lost
    and slow ones counted: the table's ``workers`` column."""
    cells = []
    for r in rows:
        sent, lost = int(r.get("workers") or 0), int(r.get("workers_lost") or 0)
        slow = len([s for s in str(r.get("slow_workers") or "").split("; ") if s])
        cells.append(f"{sent - lost}/{sent}" + (f" lost {lost}" if lost else "")
                     + (f" slow {slow}" if slow else ""))
    return ", ".join(cells)


def had_losses(trials: Sequence[Mapping[str, Any]]) -> bool:
    """A trial of the run missed a worker's rows or had a slow worker."""
    return any(int(t.get("workers_lost") or 0) or t.get("slow_workers") for t in trials)
