"""A trial's expiry events on the coordinator's side: what the cache reported (or the schedule),
attributed to herds once the trial's origin calls are read back, into ``expiries.parquet``."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import pyarrow as pa

from coordinator.caches import RunCaches
from coordinator.config import LaunchConfig
from coordinator.console import Console
from coordinator.trials.columns import stamped
from coordinator.trials.plan import ExpiryMode, TrialPlan
from coordinator.trials.rows import TrialRows
from results.figures import events, expiry_reports, front_events
from results.figures.expiry_reports import Event, Source
from results.store.rundir import RunWriter
from strategies.base import CacheServer


class TrialEvents:
    """The run's expiry listeners, read per trial."""

    def __init__(self, caches: RunCaches, writer: RunWriter, config: LaunchConfig,
                 console: Console, keys: Collection[str]) -> None:
        self._caches, self._writer, self._config = caches, writer, config
        self._console, self._keys = console, keys
        self._skipped = 0  # memcached's log lines skipped for a slow watcher, so far

    def expiry_source(self, kind: CacheServer) -> str:
        """``server`` when the cache reports its expiries, ``schedule`` when it cannot."""
        return "schedule" if self._caches.listeners[kind].unavailable else "server"

    def expiry_meta(self) -> dict[str, Any]:
        """run.json's ``expiries``: where the events come from, per cache of the run."""
        return {kind.value: {"source": self.expiry_source(kind), "unavailable": listener.unavailable,
                             "listener_priority": listener.priority}
                for kind, listener in self._caches.listeners.items()}

    def observed(self, plan: TrialPlan, rows: TrialRows | None = None) -> list[Event]:
        """The trial's events as the cache reported them (or the schedule, if it cannot); with
        ``rows`` of a trial behind an HTTP cache, as that cache told them in its answers."""
        if rows is not None:
            signs = rows.front_signs()
            found = front_events.front_events(signs["key"].to_pylist(),
                                              signs["t_start_ns"].to_pylist(), plan.ttl_ms * 1_000_000)
            return found or expiry_reports.schedule_events(
                plan.keys, plan.first_expiry_ns, plan.ttl_ms * 1_000_000, plan.end_ns)
        listener = self._caches.listeners[plan.strategy.cache_server]
        if listener.unavailable:
            return expiry_reports.schedule_events(plan.keys, plan.first_expiry_ns,
                                                  plan.ttl_ms * 1_000_000, plan.end_ns)
        # past the end too: an expiry at the last instant must not lend its calls to the one before
        return listener.events(self._keys, plan.start_ns, time.time_ns())

    def attributed(self, plan: TrialPlan, called: pa.Table, window_calls: int,
                   observed: list[Event], calls: pa.Table | None = None,
                   tolerance_ns: int | None = None) -> tuple[dict[str, Any], list[events.Herd]]:
        """The figures of ``observed`` and every herd (``calls``: the origin calls when they
        come from elsewhere than the rows, a black-box trial's samples)."""
        event_plan = events.EventPlan((plan.window_start_ns, plan.window_end_ns),
                                      plan.first_expiry_ns, plan.ttl_ms * 1_000_000,
                                      plan.period_events, self._config.expiry is ExpiryMode.ALIGNED,
                                      tolerance_ns)
        return events.trial_events(called, observed, event_plan, window_calls, calls)

    def write(self, plan: TrialPlan, herds: list[events.Herd],
              extra: list[dict[str, Any]] | None = None) -> None:
        """The trial's events and herds into ``expiries.parquet`` (``extra``: columns per event)."""
        context = {"run_id": self._writer.root.name, "trial": plan.trial,
                   "strategy": plan.label, "repeat": plan.repeat}
        rows = events.event_rows(herds, (plan.window_start_ns, plan.window_end_ns), context)
        for row, more in zip(rows, extra or [{}] * len(rows), strict=True):
            row.update(more)
        self._writer.add_expiries(rows)

    def figures(self, plan: TrialPlan, called: pa.Table, window_calls: int,
                observed: list[Event], front: bool = False) -> dict[str, Any]:
        """Observed events and their herds: the headline figure, and ``expiries.parquet``."""
        kind = plan.strategy.cache_server
        listener = self._caches.listeners[kind]
        figures, herds = self.attributed(plan, called, window_calls, observed)
        self.write(plan, herds)
        source = self.expiry_source(kind)
        if front:  # the HTTP cache's own word, or the schedule where it said nothing
            source = "front" if any(e.source is Source.FRONT for e in observed) else "schedule"
        elif source == "server" and listener.missed(plan.start_ns, plan.end_ns):
            source = "server with gap"
            self._console.say(f"trial {plan.trial}: the cache stopped reporting expiries for a while "
                             "(it went away); events in that gap are missing")
        elif source == "server" and (skipped := self._caches.watcher_skipped()) > self._skipped:
            source, self._skipped = "server with gap", skipped
            self._console.say(f"trial {plan.trial}: memcached skipped log lines of a slow watcher: "
                             "expiries it reported may be missing")
        return {**figures, "expiry_source": stamped(source, figures["event_kind"]),
                "expiry_mode": self._config.expiry.value}

