"""One trial from the coordinator's side: prime, dispatch, follow, gather, check, write."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from celery import Celery

from coordinator.app_tier.trials import TierRun, TierTrial
from coordinator.blackbox.trial import BlackBoxRun
from coordinator.caches import CommandCounts, RunCaches
from coordinator.config import LaunchConfig
from coordinator.connect import redis_from_url
from coordinator.consistency import servers_check, written_keys
from coordinator.console import Console
from coordinator.faults.injector import FaultReport, TrialHooks, fault_columns
from coordinator.observe.board import BOARD
from coordinator.origin.user import origin_check
from coordinator.trials import dispatch
from coordinator.trials.columns import (
    delivery_columns,
    done_line,
    liveness_columns,
    progress_line,
    summary_columns,
    trial_record,
)
from coordinator.trials.events import TrialEvents
from coordinator.trials.gather import RowGatherer, settle
from coordinator.trials.late import LateRows, Unfinished
from coordinator.trials.liveness import Liveness, Loss
from coordinator.trials.plan import TrialPlan, WorkerShare, with_http_target
from coordinator.trials.priming import Primer
from coordinator.trials.rows import TrialRows, align, window_of
from coordinator.trials.specs import worker_spec
from model.origin import OriginShape
from model.origins import origin_pool
from model.services import COORDINATOR_APP, ClientDriver, Services, redis_client
from model.wire import TrialResult, TrialSpec
from results.figures import checks, metrics
from results.figures.consistency import consistency_figures
from results.figures.expiry_reports import Event
from results.store import transport
from results.store.rundir import RunWriter

# An app tier builds each trial before its clients may start (strategies, connections, pool),
# then an HTTP cache in front is primed through it: this long the first time (2 cores shared
# with 8 workers: 1-3 s), twice the last trial's afterwards (TrialRunner.setup_lead_s).
FIRST_SETUP_S = 5.0
# --client-driver asyncio: a worker creates its coroutine clients and opens their two connections
# each after the task arrives, all in its one event loop: about 1 ms a client on this project's
# 2-core VM (10,000 clients' 20,000 connections in 9.4 s), 3 ms under a load average of 15-55
# (benchmark 11's 10,000 clients were released 19.9 s late with 2 ms a client). 4 ms a client.
ASYNC_CONNECT_S = 0.002


class TrialRunner:
    """Holds the coordinator's own connections for the whole run."""

    def __init__(self, config: LaunchConfig, services: Services, app: Celery, writer: RunWriter,
                 workers: Sequence[str], offsets: dict[str, dict[str, int]], console: Console,
                 span_s: float, hooks: TrialHooks | None = None, products: int = 0,
                 tier: TierRun | None = None) -> None:
        self.config, self.services, self.app = config, services, app
        self.hooks = hooks or TrialHooks()
        self.writer, self.workers, self.offsets, self.console = writer, workers, offsets, console
        self.span_s, self.products = span_s, products
        self.tier = tier  # the app tier the clients reach over HTTP (None: none, as in the seeds)
        self.setup_s = FIRST_SETUP_S if tier is not None else 0.0  # the last trial's publish and prime
        self.caches = RunCaches(services, {s.cache_server for s in config.strategies})
        self.locks = redis_client(services.lock_url, 4, retries=3)
        self.broker = redis_from_url(services.broker_url, socket_timeout=5)
        self.pool = origin_pool(services.origin_dsn, config.workload.origin, 1,
                                app_name=COORDINATOR_APP, check=True)  # none: an HTTP origin
        self.check = origin_check(config.workload, services, config.counter)  # the origin's count
        self.primer = Primer(config.workload, self.caches, self.locks, self.pool,
                             OriginShape(span_s, products), console.say,
                             load=config.http_target is None)
        self.key_names = frozenset(k for ep in config.workload.endpoints for k in ep.key_names())
        self.caches.start()
        self.events = TrialEvents(self.caches, writer, config, console, self.key_names)
        self.late = LateRows(writer, self.events, console)  # trials whose rows may still come
        self.blackbox = (BlackBoxRun(config.service, services, writer, self.events, console,
                                     config.keys) if config.service else None)  # --service-url
        self.last_lost: dict[str, Loss] = {}  # the workers the last trial lost (coordinator.trials.liveness)

    def setup_lead_s(self) -> float:
        """Lead the next trial needs beyond the clients' own: what publishing it to the app tier
        and priming take (0 without a tier), so its clients are not released late."""
        connect = 0.0
        if self.config.client_driver is ClientDriver.ASYNCIO:
            per_worker = -(-self.config.clients // max(1, self.config.workers))
            connect = ASYNC_CONNECT_S * per_worker
        if self.tier is None:
            return connect
        return connect + (max(1.0, 2 * self.setup_s) if self.setup_s != FIRST_SETUP_S
                          else FIRST_SETUP_S)

    def late_rows(self) -> None:
        """Rows of earlier incomplete trials that came since: written, those trials re-marked."""
        self.late.take()

    def close(self) -> None:
        self.late.close()
        if self.blackbox is not None:
            self.blackbox.close()
        self.caches.close()
        if self.pool is not None:
            self.pool.close()
        self.locks.close()
        self.broker.close()
        if self.tier is not None:
            self.tier.tier.broker.close()

    def run(self, plan: TrialPlan, of: int, workers: Sequence[str] | None = None) -> dict[str, Any]:
        """Run ``plan`` on ``workers`` (default: all of the run's), one share each."""
        workers = list(workers or self.workers)
        setup = time.monotonic()
        plan, tiered = self._route(plan, workers)
        label = f"trial {plan.trial}/{of} {plan.label} r{plan.repeat}"
        self._prime(plan, tiered)
        self.setup_s = time.monotonic() - setup
        db_before, statements_before = self.check.read(), self.check.statements()
        commands = CommandCounts(self.caches, plan.strategy.cache_server, self.locks, plan.start_ns,
                                 tiered.front_counters() if tiered else None)
        gatherer = self._gatherer(plan, workers, tiered)
        gathered, report = self._follow(plan, label, workers, gatherer, tiered)
        db_after = self.check.read()
        commands.finish()
        statements = checks.statement_rows(
            statements_before, self.check.statements(), self.writer.root.name, plan.trial,
            self.check.marks, self.check.query_ids)
        self.last_lost = gathered.lost
        present = [(w, TrialResult.from_json(r))
                   for w, r in zip(workers, gathered.results, strict=True) if r]
        complete = settle(gatherer, {w: r.batches for w, r in present},
                          tiered.senders if tiered else {})
        results = [r for _, r in present]
        rows = TrialRows(self.writer.root, plan.trial)
        floor_ms = min(r.floor_p5_ns for r in results) / 1e6
        scanned = metrics.scan_trial(rows.source(), window_of(plan), floor_ms)
        summary = summary_columns(self.config, self.writer.root.name, plan, scanned,
                                  len(workers))
        summary.update(self.check.columns(db_before, db_after, summary["origin_calls_total"]))
        observed = self._events(plan, rows, scanned, summary, tiered)
        summary.update(checks.generator_figures(results))
        span = report.window or (plan.start_ns, plan.start_ns)
        summary.update(fault_columns(report, plan.start_ns, rows.between(plan.start_ns, span[1]),
                                     len(gathered.missing)))
        summary.update(liveness_columns(gathered))
        summary.update(delivery_columns(gatherer, present))
        summary["db_time_ms"] = sum(s["total_ms"] for s in statements)
        summary.update(self._consistency(plan, rows))
        summary.update(commands.columns(scanned.client_requests))
        summary.update({"app_servers": len(tiered.senders) if tiered else 0,
                        "front": tiered.front.name if tiered else ""})
        self.writer.add_commands(commands.rows(self.writer.root.name, plan.trial))
        self.writer.add_statements(statements)
        self.writer.add_trial(summary)
        if not complete:  # rows may still come: written, and the trial re-marked, when they do
            self.late.keep(Unfinished(plan, gatherer, summary, observed, floor_ms, present,
                                      front=bool(tiered and tiered.front.name)))
        self._say_workers(label, gathered, gatherer)
        self.console.say(done_line(label, summary, report.label))
        return trial_record(plan, workers, gathered, present, summary, report)

    def _events(self, plan: TrialPlan, rows: TrialRows, scanned: metrics.Scanned,
                summary: dict[str, Any], tiered: TierTrial | None) -> list[Event]:
        """The trial's events (behind an HTTP cache: as it told them; a black box: in its
        samples) and their herds."""
        if self.blackbox is not None:
            return self.blackbox.finish(plan, scanned.called, summary)
        front = tiered is not None and bool(tiered.front.name)
        observed = self.events.observed(plan, rows if front else None)
        summary.update(self.events.figures(plan, scanned.called, summary["window_origin_calls"],
                                           observed, front))
        return observed

    def _gatherer(self, plan: TrialPlan, workers: Sequence[str],
                  tiered: TierTrial | None) -> RowGatherer:
        """Where the trial's rows go as they arrive: from its stream into its partition (the
        workers' rows and the app processes', each under its own number)."""
        run_id = self.writer.root.name
        by_index = {share.index: worker for share, worker in zip(plan.shares, workers, strict=True)}
        by_index.update({index: node for node, index in (tiered.senders if tiered else {}).items()})

        def aligned(worker: str, wire: pa.Table) -> pa.Table:
            return align(plan, run_id, worker, self.offsets[worker]["offset_ns"], wire)

        key = transport.rows_key(run_id, plan.trial)
        self.broker.delete(key)  # a stream of an earlier run of this directory name: not ours
        return RowGatherer(self.broker, key, by_index, aligned, self.writer.trial_parts(plan.trial))

    def _follow(self, plan: TrialPlan, label: str, workers: Sequence[str], gatherer: RowGatherer,
                tiered: TierTrial | None) -> tuple[dispatch.Gathered, FaultReport]:
        """Send each worker its share, arm the faults, follow the heartbeats until every result
        is in or given up (a worker silent for ``worker_silence_s`` is lost at once); a black
        box's counts sampled and its keys deleted meanwhile."""
        if self.blackbox is not None:
            self.blackbox.start(plan)
        tasks = dispatch.send_trial(self.app, self._assignments(plan, workers))
        live = Liveness(workers, self.config.timing.worker_silence_s, plan.trial)
        self.console.say(f"{label}: sent to {len(workers)} workers "
                         f"({', '.join(str(s.clients) for s in plan.shares)} clients), "
                         f"starts in {(plan.start_ns - time.time_ns()) / 1e9:.2f} s")
        deadline = time.monotonic() + (plan.end_ns - time.time_ns()) / 1e9
        self.hooks.arm(plan)
        try:
            gathered = dispatch.follow(
                tasks, deadline + self.config.timing.gather_grace_s, 0.25,
                lambda p: self._progress(label, plan, p),
                lost=self.hooks.lost, liveness=live,
                on_lost=lambda loss: self.console.say(
                    f"{label}: worker {loss.worker} lost: {loss.describe()}"),
                how=dispatch.Follow(dispatch.beats_on(self.broker), gatherer.poll,
                                    gatherer.counts),
            )
        finally:
            dispatch.release(tasks)
            if tiered is not None:  # every client is done (or given up): the apps ship the rest
                tiered.finish(self.writer.root.name, plan.trial)
            report = self.hooks.disarm(plan)
            BOARD.trial_done()
        return gathered, report

    def _say_workers(self, label: str, gathered: dispatch.Gathered, gatherer: RowGatherer) -> None:
        for worker, why in gathered.missing.items():
            kept = gatherer.sent[worker].rows
            self.console.say(f"{label}: no result from {worker} ({why}); its {kept:,} rows up to "
                             "its last batch are kept; trial marked incomplete")
        for worker, longest in gathered.slow.items():
            self.console.say(f"{label}: worker {worker} slow: silent up to {longest:.1f} s "
                             f"(limit {self.config.timing.worker_silence_s:g} s), not lost")

    def _consistency(self, plan: TrialPlan, rows: TrialRows) -> dict[str, Any]:
        """Stale reads and sets from the rows, and the servers' own word on the written keys."""
        kind = plan.strategy.cache_server
        check = servers_check(plan.strategy, self.config.workload.endpoints,
                              lambda ep: self.primer.deps(ep, kind),
                              lambda key: self.caches.ttl_left_ms(kind, key),
                              self.services.origin_dsn, written_keys(rows.writes()))
        for line in check.detail:
            self.console.say(f"trial {plan.trial} {plan.label}: {line}")
        return {**consistency_figures(rows.source()), **check.columns()}

    def _route(self, plan: TrialPlan, workers: Sequence[str]) -> tuple[TrialPlan, TierTrial | None]:
        """Where the clients send their requests: an HTTP target of the run's, or the app tier
        (the trial published to its processes first: they serve its priming too), or nowhere
        (the strategy runs in the client threads)."""
        plan = with_http_target(plan, self.config.http_target,
                                self.config.service.label if self.config.service else "")
        if self.tier is None:
            return plan, None
        tiered = self.tier.trial(plan.strategy)
        tiered.publish(self._spec(plan, plan.shares[0], workers[0], len(workers)), len(workers))
        return replace(plan, http=tiered.target(self.writer.root.name, plan.trial)), tiered

    def _prime(self, plan: TrialPlan, tiered: TierTrial | None) -> None:
        """Write the late rows of earlier trials, clear what the last trial left, then store
        each key to expire at the first expiry (none for a raw HTTP target: the Primer loaded
        nothing, as nothing of ours reads the cache; behind an HTTP cache: fill its entries
        through it, the trial's URLs being new ones)."""
        BOARD.trial_planned(plan)  # the phase metric (coordinator.observe); inert unless served
        self.late_rows()
        self.caches.flush(plan.strategy.cache_server)
        self.locks.flushdb()
        if tiered is not None and tiered.front.name:
            tiered.prime(self.writer.root.name, plan.trial, plan.keys)
            return
        self.primer.prime(plan.strategy, plan.window_start_ns, plan.trial)

    def _assignments(self, plan: TrialPlan,
                     workers: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
        """Each worker's share (an HTTP trial's target with it)."""
        return [(worker, self._spec(plan, share, worker, len(workers)).to_json())
                for share, worker in zip(plan.shares, workers, strict=True)]

    def _spec(self, plan: TrialPlan, share: WorkerShare, worker: str, workers: int) -> TrialSpec:
        return worker_spec(self.config, self.writer.root.name, plan, share,
                           self.offsets[worker]["offset_ns"], workers, self.span_s, self.products)

    def _progress(self, label: str, plan: TrialPlan, p: dispatch.Progress) -> None:
        """The console line, and the live metrics' expiries (from the run's one listener)."""
        self.console.progress(progress_line(label, plan, self.config.seconds, p))
        listener = self.caches.listeners[plan.strategy.cache_server]
        BOARD.reported(plan.trial, *listener.expired_since(self.key_names, plan.start_ns))
