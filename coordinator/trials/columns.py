"""The columns of a trial that come from how it was run, not from its rows: who named its
events, which workers were lost or slow, what reached Parquet of what was sent (pure)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from coordinator.config import LaunchConfig
from coordinator.faults.injector import FaultReport
from coordinator.trials import dispatch
from coordinator.trials.gather import RowGatherer
from coordinator.trials.plan import TrialPlan
from coordinator.trials.rows import window_of
from model.wire import TrialResult, beat_sent
from results.figures import metrics


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


def done_line(label: str, summary: dict[str, Any], fault: str) -> str:
    """The console's line for a trial just written."""
    per = "expiry" if summary["event_kind"] == "expiry" else summary["event_kind"]
    return (f"{label}: {summary['origin_per_expiry']:.1f} origin calls/{per} "
            f"({summary['expiry_events']} events), {summary['rps']:,.0f} rps, "
            f"p99 {summary['p99_ms']:.1f} ms, errors {summary['errors']}, db calls {db_word(summary)}"
            + (f", fault {fault}" if fault else ""))


def sent_rate(beats: Mapping[str, object], trial_start_ns: int, seconds: float) -> float | None:
    """The workers' own request rate: each one's requests sent over its time since the start
    instant (as its beat reports them, at most the trial's length), summed; None when no beat
    reports the trial starting at ``trial_start_ns``."""
    sent = [s for b in beats.values() if (s := beat_sent(b, trial_start_ns)) is not None]
    if not sent:
        return None
    return sum(requests / min(ns / 1e9, seconds) for requests, ns in sent)


def progress_line(label: str, plan: TrialPlan, seconds: float, p: dispatch.Progress) -> str:
    """The rate the workers report sending (issue 31: the rows written so far lag it, and a
    rate from them showed half the trial's), then the origin calls and errors of the rows written
    so far; past the trial's end the rate stays the trial's, and the line says whose rows are
    awaited (it used to decay towards ``0 rps origin 0``)."""
    elapsed = (time.time_ns() - plan.start_ns) / 1e9
    if elapsed < 0:
        return f"{label}: starts in {-elapsed:.1f} s"
    c = p.counts
    rps = sent_rate(p.beats, plan.start_ns, seconds)
    rate = (f"{rps:8,.0f} rps sent" if rps is not None else
            f"{c['requests'] / min(elapsed, seconds) if elapsed > 0 else 0.0:8,.0f} rps written")
    line = (f"{label}: {min(elapsed, seconds):4.1f}/{seconds:g} s  {rate}  rows in: origin "
            f"{c['origin_calls']:,}  errors {c['errors']:,}")
    return line + (f"  (ended; waiting for {p.waiting} worker(s))" if elapsed > seconds else "")


def trial_record(plan: TrialPlan, workers: Sequence[str], gathered: dispatch.Gathered,
                 present: Sequence[tuple[str, TrialResult]], summary: dict[str, Any],
                 report: FaultReport) -> dict[str, Any]:
    """run.json's record of one trial: when it ran, who ran it, what was lost or injected."""
    return {"trial": plan.trial, "strategy": plan.label, "repeat": plan.repeat,
            "start_ns": plan.start_ns, "window_start_ns": plan.window_start_ns,
            "window_end_ns": plan.window_end_ns, "first_expiry_ns": plan.first_expiry_ns,
            "workers": [r.worker for _, r in present], "missing_workers": gathered.missing,
            "cache_floor_ms": {w: {"p5": r.floor_p5_ns / 1e6, "median": r.floor_median_ns / 1e6}
                               for w, r in present},  # each worker's own cache round trip
            "dispatched": list(workers), "clients_per_worker": [s.clients for s in plan.shares],
            "lost_workers": {w: x.to_json() for w, x in gathered.lost.items()},
            "slow_workers": gathered.slow,
            "complete": summary["complete"], "fault": report.label,
            "faults_applied": [{"fault": a.fault.label, "at_ns": a.at_ns, "detail": a.detail,
                                "error": a.error} for a in report.applied]}


def summary_columns(config: LaunchConfig, run_id: str, plan: TrialPlan, scanned: metrics.Scanned,
                    workers: int) -> dict[str, Any]:
    """The trial's key, how it was run and its figures from the rows (the origin's own count,
    ``db_calls``, comes after, from the origin check: coordinator.origin.check)."""
    window = window_of(plan)
    figures = scanned.figures
    firsts = list(scanned.first_start_ns.values())
    return {
        "run_id": run_id, "trial": plan.trial, "strategy": plan.label,
        "params": orjson.dumps(dict(plan.strategy.params)).decode(), "repeat": plan.repeat,
        "workers": workers, "clients": config.clients,
        "client_driver": config.client_driver.value,
        "ttl_s": config.ttl_s, "window_s": window.seconds, **figures,
        "db_calls": -1, "db_calls_match": figures["origin_calls_total"] == -1,
        "start_spread_ms": (max(firsts) - min(firsts)) / 1e6 if firsts else float("nan"),
        "complete": True,
    }
