"""A black-box trial from the coordinator's side: the counts sampled and (when asked) the keys
deleted while the clients drive the service, then its events and herds through the same
attribution as every other trial (``TrialEvents.attributed``), the samples as the origin calls.

Events, first source that applies: the cache's own reports (keyspace notifications it has on:
``del`` for the tool's deletes, ``expired`` for its TTL); the tool's delete instants (the cache
reports nothing); bursts in the headline samples. The headline is the first count given
(pg_stat_statements, else the service's counter); a second count checks it: trial totals within
max(5 %, 2 calls), each event's herd within one call for >= 90 % of the events.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from coordinator import defaults
from coordinator.blackbox.cache import Delete, ScheduledDeletes, ServiceCache, observed
from coordinator.blackbox.sampler import CallCount, CounterCount, Sampler, StatementCount
from coordinator.blackbox.settings import BlackBox, Count, EventSource
from coordinator.console import Console
from coordinator.trials.events import TrialEvents
from coordinator.trials.plan import TrialPlan
from model.services import Services
from results.figures import samples as sampled
from results.figures.events import Herd, in_window, tolerance_ns
from results.figures.expiry_reports import Event, Source
from results.figures.samples import Samples
from results.store.rundir import RunWriter

REPORT_SLACK_NS = 250_000_000  # a delete's report may come this long after its reply
# Connections per count, read in turn (coordinator.blackbox.sampler.Sampler): a query of
# pg_stat_statements took 2-3 ms under load, the example services' /metrics 18-40 ms (their
# event loops busy with the clients): two lanes held it at 40-68 Hz, four reach 100.
LANES = {Count.STATEMENT: 2, Count.COUNTER: 4}


@dataclass
class Live:
    """One trial's samplers and deletes while it runs."""

    samplers: list[Sampler]
    deletes: ScheduledDeletes | None


@dataclass(frozen=True)
class Sampled:
    """What a trial's samplers and deletes gave, stopped."""

    counts: list[Samples]
    rows: list[dict[str, Any]]
    deletes: list[Delete]


class BlackBoxRun:
    """The run's counts (one connection each), the service's cache, and the trial in flight."""

    def __init__(self, box: BlackBox, services: Services, writer: RunWriter, events: TrialEvents,
                 console: Console, keys: Sequence[str]) -> None:
        self.box, self.writer, self.events, self.console = box, writer, events, console
        self.counts: list[list[CallCount]] = [
            [StatementCount(services.origin_dsn, box.query_ids) if c is Count.STATEMENT
             else CounterCount(box.counter.url, box.counter.name) for _ in range(LANES[c])]
            for c in box.counts]
        self.cache = (ServiceCache(box.cache_url, {k: box.cache_name(k) for k in keys})
                      if box.cache_url else None)
        if self.cache is not None:
            self.cache.start()
        self._live: Live | None = None

    def start(self, plan: TrialPlan) -> None:
        """Sample every count from now on; schedule the deletes of the trial's window."""
        ttl_ns = plan.ttl_ms * 1_000_000
        deletes = None
        if self.box.scheduled_delete and self.cache is not None:
            deletes = ScheduledDeletes(self.cache, range(plan.first_expiry_ns, plan.window_end_ns,
                                                         ttl_ns))
        self._live = Live([Sampler(c, defaults.SAMPLE_HZ) for c in self.counts], deletes)
        for sampler in self._live.samplers:
            sampler.start()
        if deletes is not None:
            deletes.start()

    def _stop(self, plan: TrialPlan) -> Sampled:
        live, self._live = self._live, None
        assert live is not None, "finish without start"
        deletes = live.deletes.stop() if live.deletes is not None else []
        counts, rows = [], []
        for sampler in live.samplers:
            found, raw = sampler.stop()
            counts.append(found)
            rows += [{"run_id": self.writer.root.name, "trial": plan.trial, "source": found.source,
                      "t_ns": t, "read_ns": took, "value": value} for t, took, value in raw]
        rows += [{"run_id": self.writer.root.name, "trial": plan.trial, "source": "delete",
                  "t_ns": d.sent_ns, "read_ns": d.took_ns, "value": int(d.removed)} for d in deletes]
        return Sampled(counts, rows, deletes)

    def finish(self, plan: TrialPlan, called: pa.Table, summary: dict[str, Any]) -> list[Event]:
        """Stop the trial's samplers and deletes; its events, herds and check into ``summary``,
        ``expiries.parquet`` and ``samples.parquet``; the events for the trial's record."""
        taken = self._stop(plan)
        self.writer.add_samples(taken.rows)
        reported = self.cache.events(plan.start_ns, time.time_ns()) if self.cache is not None else []
        key = plan.keys[0] if len(plan.keys) == 1 else sampled.ANY_KEY
        source, events = self._events(plan, taken, reported, key)
        head, *checks = taken.counts
        figures, herds = self._attributed(plan, called, head, events, key)
        extra: list[dict[str, Any]] = [{} for _ in herds]
        check = _Check(head, None, [], herds)
        if checks:
            herds_b = self._attributed(plan, called, checks[0], events, key)[1]
            extra = [{"calls_check": h.size} for h in herds_b]
            check = _Check(head, checks[0], herds_b, herds)
        self.events.write(plan, herds, extra)
        summary.update(figures)
        gap = self.cache is not None and self.cache.missed(plan.start_ns, plan.end_ns)
        summary.update(_event_columns(source, events, figures["event_kind"], gap))
        summary.update(check.columns(plan))
        summary.update(deletes=sum(d.removed for d in taken.deletes),
                       deletes_observed=observed(taken.deletes, reported, REPORT_SLACK_NS),
                       sample_hz=min((c.rate_hz() for c in taken.counts), default=0.0))
        return events

    def _attributed(self, plan: TrialPlan, called: pa.Table, counts: Samples, events: list[Event],
                    key: str) -> tuple[dict[str, Any], list[Herd]]:
        window = counts.increase(plan.window_start_ns, plan.window_end_ns)
        return self.events.attributed(plan, called, window, events,
                                      sampled.calls_table(counts, key), tolerance_ns=0)

    def _events(self, plan: TrialPlan, taken: Sampled, reported: list[Event],
                key: str) -> tuple[EventSource, list[Event]]:
        """Who names the events, and the events under ``key`` (module docstring)."""
        gap = tolerance_ns(plan.ttl_ms * 1_000_000)
        wanted = Source.DELETED if self.box.scheduled_delete else Source.EXPIRED
        notified = self.cache is not None and (self.cache.notified.deleted if self.box.scheduled_delete
                                               else self.cache.notified.expired)
        if notified:
            return EventSource.SERVER, sampled.pooled(
                [e for e in reported if e.source in (wanted, Source.EXPIRED)], key, gap)
        if taken.deletes:
            return EventSource.SCHEDULED, sampled.pooled(
                [Event(d.key, d.sent_ns, Source.DELETED, d.scheduled_ns) for d in taken.deletes
                 if d.removed], key, gap)
        quiet = max(plan.ttl_ms * 250_000, round(3e9 / defaults.SAMPLE_HZ))
        return EventSource.INFERRED, sampled.inferred_events(taken.counts[0], key, quiet)

    def close(self) -> None:
        if self._live is not None:
            for sampler in self._live.samplers:
                sampler.stop()
            if self._live.deletes is not None:
                self._live.deletes.stop()
        for lanes in self.counts:
            for count in lanes:
                count.close()
        if self.cache is not None:
            self.cache.close()


def _event_columns(source: EventSource, events: list[Event], kind: str,
                   gap: bool) -> dict[str, Any]:
    """``expiry_source`` (``server with gap`` where the cache's reports stopped for a while) and
    the ``per`` column's kind: deletes and inferred bursts by name."""
    if source is EventSource.INFERRED:
        kind = "inferred"
    elif events and all(e.source is Source.DELETED for e in events):
        kind = "delete"
    named = "server with gap" if source is EventSource.SERVER and gap else source.value
    return {"expiry_source": named, "event_kind": kind}


@dataclass(frozen=True)
class _Check:
    """The headline count against the second, where one is given."""

    head: Samples
    other: Samples | None
    other_herds: list[Herd]
    herds: list[Herd]

    def columns(self, plan: TrialPlan) -> dict[str, Any]:
        ends = [s.t_ns[-1] for s in (self.head, self.other) if s is not None and s.t_ns]
        span = (plan.start_ns, min(ends, default=plan.end_ns))
        total = self.head.increase(*span)
        out: dict[str, Any] = {"origin_source": self.head.source, "origin_calls_total": total}
        if self.other is None:
            return {**out, "db_calls": -1, "db_calls_match": False, "db_check": "unchecked",
                    "db_check_detail": f"one count ({self.head.source}) given: add the other "
                                       "(--origin-dsn with --origin-statement, or "
                                       "--origin-counter-url with --origin-counter-name) to check it",
                    "herds_agreeing": 0, "herds_compared": 0}
        other = self.other.increase(*span)
        window = (plan.window_start_ns, plan.window_end_ns)
        agreeing, compared = sampled.herds_agreeing(in_window(self.herds, *window),
                                                    in_window(self.other_herds, *window))
        ok = sampled.totals_agree(total, other) and sampled.herds_agree(agreeing, compared)
        return {**out, "db_calls": other, "db_calls_match": ok, "db_check": "ok" if ok else "mismatch",
                "db_check_detail": f"{self.head.source} samples {total} against {self.other.source} "
                                   f"samples {other}; herds within one call in {agreeing} of "
                                   f"{compared} events",
                "herds_agreeing": agreeing, "herds_compared": compared}
