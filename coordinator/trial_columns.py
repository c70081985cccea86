"""The columns of a trial that come from how it was run, not from its rows: who named its
events, which workers were lost or slow, what reached Parquet of what was sent (pure)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from coordinator import dispatch
from coordinator.gather import RowGatherer
from coordinator.plan import TrialPlan
from model.wire import TrialResult


def stamped(source: str, kind: str) -> str:
    """Who named the events: the server (or the schedule), and ``stamp`` where they are refresh
    cycles, named by the replaced value's own expiry stamp (swr's and XFetch's envelope, dogpile's
    creation time + TTL, memcached's remaining TTL at a recache win)."""
    if kind == "refresh cycle":
        return "stamp"
    return f"{source}+stamp" if kind == "expiry+refresh" else source


def liveness_columns(gathered: dispatch.Gathered) -> dict[str, Any]:
    """Why each missing worker's rows are missing, and the slow workers (trials.parquet)."""
    return {"lost_workers": "; ".join(f"{w}: {why}" for w, why in gathered.missing.items()),
            "slow_workers": "; ".join(f"{w}: silent up to {s:.1f} s"
                                      for w, s in gathered.slow.items())}


def delivery_columns(gatherer: RowGatherer,
                     present: Sequence[tuple[str, TrialResult]]) -> dict[str, Any]:
    """What reached Parquet of what the workers sent: batches that never came, batches delivered
    twice (written once), rows the workers dropped when the coordinator fell behind."""
    expected = {w: r.batches for w, r in present}
    missing = {w: sent.missing(expected.get(w)) for w, sent in gatherer.sent.items()}
    return {"batches_missing": sum(len(m) for m in missing.values()),
            "batches_duplicated": sum(s.duplicates for s in gatherer.sent.values()),
            "rows_dropped": sum(r.dropped_rows for _, r in present),
            "calls_dropped": sum(r.dropped_calls for _, r in present),
            "client_ships": sum(r.client_ships for _, r in present),
            "client_wait_s": sum(r.client_wait_s for _, r in present),
            "rows_written": gatherer.parts.rows}


def db_word(summary: dict[str, Any]) -> str:
    if summary.get("db_check") == "unchecked":
        return "unchecked"
    if summary["db_calls_match"]:
        return "match"
    return "MISMATCH" + (" (rows of a lost worker missing)" if summary["workers_lost"] else "")


def progress_line(label: str, plan: TrialPlan, seconds: float, p: dispatch.Progress) -> str:
    """Counts so far; past the trial's end the rate stays the trial's, and the line says
    whose rows are awaited (it used to decay towards ``0 rps origin 0``)."""
    elapsed = (time.time_ns() - plan.start_ns) / 1e9
    if elapsed < 0:
        return f"{label}: starts in {-elapsed:.1f} s"
    c = p.counts
    rps = c["requests"] / min(elapsed, seconds) if elapsed > 0 else 0.0
    line = (f"{label}: {min(elapsed, seconds):4.1f}/{seconds:g} s  {rps:8,.0f} rps  "
            f"origin {c['origin_calls']:,}  errors {c['errors']:,}")
    return line + (f"  (ended; waiting for {p.waiting} worker(s))" if elapsed > seconds else "")
