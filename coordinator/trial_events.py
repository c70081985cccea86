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
from coordinator.plan import ExpiryMode, TrialPlan
from coordinator.trial_columns import stamped
from results.figures import events, expiry_reports
from results.figures.expiry_reports import Event
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

    def observed(self, plan: TrialPlan) -> list[Event]:
        """The trial's events as the cache reported them (or the schedule, if it cannot)."""
        listener = self._caches.listeners[plan.strategy.cache_server]
        if listener.unavailable:
            return expiry_reports.schedule_events(plan.keys, plan.first_expiry_ns,
                                                  plan.ttl_ms * 1_000_000, plan.end_ns)
        # past the end too: an expiry at the last instant must not lend its calls to the one before
        return listener.events(self._keys, plan.start_ns, time.time_ns())

    def figures(self, plan: TrialPlan, called: pa.Table, window_calls: int,
                observed: list[Event]) -> dict[str, Any]:
        """Observed events and their herds: the headline figure, and ``expiries.parquet``."""
        ttl_ns = plan.ttl_ms * 1_000_000
        kind = plan.strategy.cache_server
        listener = self._caches.listeners[kind]
        event_plan = events.EventPlan((plan.window_start_ns, plan.window_end_ns),
                                      plan.first_expiry_ns, ttl_ns, plan.period_events,
                                      self._config.expiry is ExpiryMode.ALIGNED)
        figures, herds = events.trial_events(called, observed, event_plan, window_calls)
        context = {"run_id": self._writer.root.name, "trial": plan.trial,
                   "strategy": plan.strategy.label, "repeat": plan.repeat}
        self._writer.add_expiries(events.event_rows(herds, event_plan.window, context))
        source = self.expiry_source(kind)
        if source == "server" and listener.missed(plan.start_ns, plan.end_ns):
            source = "server with gap"
            self._console.say(f"trial {plan.trial}: the cache stopped reporting expiries for a while "
                             "(it went away); events in that gap are missing")
        elif source == "server" and (skipped := self._caches.watcher_skipped()) > self._skipped:
            source, self._skipped = "server with gap", skipped
            self._console.say(f"trial {plan.trial}: memcached skipped log lines of a slow watcher: "
                             "expiries it reported may be missing")
        return {**figures, "expiry_source": stamped(source, figures["event_kind"]),
                "expiry_mode": self._config.expiry.value}

