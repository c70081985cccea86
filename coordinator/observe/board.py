"""The coordinator's own metrics: trial phase, expiry instants, workers alive.

The phase is not pushed at each change: the board keeps the current trial's plan and works the
phase out from its instants at scrape time, so the trial code only says "planned" and "done".
Observed expiries are the ones the run's expiry listener (``coordinator.expiry``) received for
the trial's keys, handed over by the trial runner while it follows the workers: one
subscription to the cache's events feeds both the metrics and expiries.parquet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, StateSetMetricFamily
from prometheus_client.registry import Collector

from coordinator.trials.plan import TrialPlan

PHASES = ("idle", "lead", "warmup", "window", "drain", "gathering")


def phase_at(plan: TrialPlan | None, now_ns: int, done: bool) -> str:
    """Where a trial stands at ``now_ns``: before its start, in its warm-up, window, drain, or
    past its end while the results are gathered."""
    if plan is None or done:
        return "idle"
    for name, until in (("lead", plan.start_ns), ("warmup", plan.window_start_ns),
                        ("window", plan.window_end_ns), ("drain", plan.end_ns)):
        if now_ns < until:
            return name
    return "gathering"


class Board(Collector):
    """What the coordinator exports; inert (no port, no thread) until ``serve``."""

    def __init__(self) -> None:
        self.run_id = ""
        self.plan: TrialPlan | None = None
        self.done = True
        self.aligned = False
        self.workers_alive: Callable[[], int] | None = None
        self.expiries: dict[int, int] = {}  # trial -> expiries the cache reported
        self.last_expiry_ns = 0
        self._lock = threading.Lock()

    def trial_planned(self, plan: TrialPlan) -> None:
        with self._lock:
            self.plan, self.done = plan, False
            self.expiries.setdefault(plan.trial, 0)

    def trial_done(self) -> None:
        with self._lock:
            self.done = True

    def reported(self, trial: int, count: int, last_ns: int) -> None:
        """The expiries the cache has reported so far in ``trial``, and the latest instant."""
        with self._lock:
            self.expiries[trial] = count
            self.last_expiry_ns = max(self.last_expiry_ns, last_ns)

    def collect(self) -> Iterator[Any]:
        with self._lock:
            plan, done, expiries, last = self.plan, self.done, dict(self.expiries), self.last_expiry_ns
        now = time.time_ns()
        run = [self.run_id]
        phase = StateSetMetricFamily("stampede_trial_phase", "Where the current trial stands.",
                                     labels=["run_id", "trial", "strategy"])
        trial = [str(plan.trial), plan.label] if plan is not None else ["0", ""]
        current = phase_at(plan, now, done)
        phase.add_metric([*run, *trial], {p: p == current for p in PHASES})
        yield phase
        yield from self._expiry_families(plan, done, expiries, last, now)
        alive = GaugeMetricFamily("stampede_workers_alive", "Worker processes alive.", labels=["run_id"])
        if self.workers_alive is not None:
            alive.add_metric(run, self.workers_alive())
        yield alive

    def _expiry_families(self, plan: TrialPlan | None, done: bool, expiries: dict[int, int],
                         last_ns: int, now_ns: int) -> Iterator[Any]:
        run = [self.run_id]
        scheduled = GaugeMetricFamily(
            "stampede_expiry_scheduled_timestamp_seconds",
            "The next scheduled expiry instant of the trial under way (the first one only, unless "
            "--expiry aligned).", labels=["run_id", "trial"])
        if plan is not None and not done:
            scheduled.add_metric([*run, str(plan.trial)], next_scheduled_ns(plan, now_ns, self.aligned) / 1e9)
        observed = GaugeMetricFamily("stampede_expiry_observed_timestamp_seconds",
                                     "When the cache last reported a key expiring.", labels=["run_id"])
        if last_ns:
            observed.add_metric(run, last_ns / 1e9)
        count = CounterMetricFamily("stampede_expiries_observed", "Expiries the cache reported.",
                                    labels=["run_id", "trial"])
        for number, n in expiries.items():
            count.add_metric([*run, str(number)], n)
        yield from (scheduled, observed, count)


def next_scheduled_ns(plan: TrialPlan, now_ns: int, aligned: bool) -> int:
    """The first expiry; with aligned expiries, the next TTL boundary after it once it passed."""
    ttl_ns = plan.ttl_ms * 1_000_000
    if not aligned or now_ns <= plan.first_expiry_ns or ttl_ns <= 0:
        return plan.first_expiry_ns
    periods = -(-(now_ns - plan.first_expiry_ns) // ttl_ns)
    return plan.first_expiry_ns + periods * ttl_ns


BOARD = Board()


def serve(port: int, run_id: str, addr: str = "127.0.0.1") -> Callable[[], None]:
    """Export a fresh board on ``addr:port`` (a registry of its own: no process metrics mixed
    in); return what stops it."""
    BOARD.__init__()  # type: ignore[misc]  # one launch per process at a time; tests run several
    BOARD.run_id = run_id
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BOARD)
    server, thread = start_http_server(port, addr=addr, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=2)

    return stop
