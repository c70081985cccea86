"""One trial from the coordinator's side: prime, dispatch, follow, gather, check, write."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
from celery import Celery

from coordinator import dispatch
from coordinator.caches import CommandCounts, RunCaches
from coordinator.config import LaunchConfig
from coordinator.connect import redis_from_url
from coordinator.consistency import servers_check, written_keys
from coordinator.console import Console
from coordinator.faults.injector import FaultReport, TrialHooks, fault_columns
from coordinator.gather import RowGatherer
from coordinator.liveness import Liveness, Loss
from coordinator.observe.board import BOARD
from coordinator.origin.user import origin_check
from coordinator.plan import ExpiryMode, TrialPlan
from coordinator.priming import Primer
from coordinator.trial_columns import db_word, delivery_columns, liveness_columns, progress_line
from coordinator.trial_events import TrialEvents
from coordinator.trial_rows import TrialRows, align, window_of
from model.origin import OriginShape
from model.origins import origin_pool
from model.services import COORDINATOR_APP, Services, redis_client
from model.wire import TrialResult, TrialSpec
from results.figures import checks, metrics
from results.figures.consistency import consistency_figures
from results.figures.expiry_reports import Event
from results.store import transport
from results.store.rundir import RunWriter

SETTLE_S = 5.0  # after the tasks: how long the last batches and end markers may take to arrive


@dataclass
class Unfinished:
    """A trial written with a worker's rows incomplete: what re-marking it takes."""

    plan: TrialPlan
    gatherer: RowGatherer
    summary: dict[str, Any]
    observed: list[Event]
    floor_ms: float
    present: Sequence[tuple[str, TrialResult]]


class TrialRunner:
    """Holds the coordinator's own connections for the whole run."""

    def __init__(self, config: LaunchConfig, services: Services, app: Celery, writer: RunWriter,
                 workers: Sequence[str], offsets: dict[str, dict[str, int]], console: Console,
                 span_s: float, hooks: TrialHooks | None = None, products: int = 0) -> None:
        self.config, self.services, self.app = config, services, app
        self.hooks = hooks or TrialHooks()
        self.writer, self.workers, self.offsets, self.console = writer, workers, offsets, console
        self.span_s, self.products = span_s, products
        self.caches = RunCaches(services, {s.cache_server for s in config.strategies})
        self.locks = redis_client(services.lock_url, 4, retries=3)
        self.broker = redis_from_url(services.broker_url, socket_timeout=5)
        self.pool = origin_pool(services.origin_dsn, config.workload.origin, 1,
                                app_name=COORDINATOR_APP, check=True)  # none: an HTTP origin
        self.check = origin_check(config.workload, services, config.counter)  # the origin's count
        self.primer = Primer(config.workload, self.caches, self.locks, self.pool,
                             OriginShape(span_s, products), console.say)
        self.key_names = frozenset(k for ep in config.workload.endpoints for k in ep.key_names())
        self.caches.start()
        self.events = TrialEvents(self.caches, writer, config, console, self.key_names)
        self.unfinished: dict[int, Unfinished] = {}  # trials whose rows may still come
        self.last_lost: dict[str, Loss] = {}  # the workers the last trial lost (coordinator.liveness)

    def late_rows(self) -> None:
        """Rows of earlier incomplete trials that came since (a worker given up on, then back):
        written to their partition, and each such trial re-marked in trials.parquet."""
        for trial, left in list(self.unfinished.items()):
            came = left.gatherer.take_late()
            if came:
                self._remark(left, came)
            if all(left.gatherer.complete(w) for w in left.gatherer.sent):
                left.gatherer.close(keep_stream=False)
                del self.unfinished[trial]

    def _remark(self, left: Unfinished, came: int) -> None:
        plan, summary = left.plan, left.summary
        scanned = metrics.scan_trial(TrialRows(self.writer.root, plan.trial).source(),
                                     window_of(plan), left.floor_ms)
        summary.update(scanned.figures)
        summary.update(self.events.figures(plan, scanned.called, summary["window_origin_calls"],
                                    left.observed))
        summary.update(delivery_columns(left.gatherer, left.present))
        summary["late_rows"] = int(summary.get("late_rows") or 0) + came
        if summary["db_calls"] >= 0:
            summary["db_calls_match"] = summary["db_calls"] == summary["origin_calls_total"]
        self.writer.add_trial(summary)
        self.console.say(f"trial {plan.trial}: {came:,} rows came after it was summarised: "
                         f"written, the trial re-marked (db calls {db_word(summary)})")

    def close(self) -> None:
        self.late_rows()
        for left in self.unfinished.values():
            left.gatherer.close(keep_stream=False)
        self.caches.close()
        if self.pool is not None:
            self.pool.close()
        self.locks.close()
        self.broker.close()

    def run(self, plan: TrialPlan, of: int, workers: Sequence[str] | None = None) -> dict[str, Any]:
        """Run ``plan`` on ``workers`` (default: all of the run's), one share each."""
        workers = list(workers or self.workers)
        label = f"trial {plan.trial}/{of} {plan.strategy.label} r{plan.repeat}"
        BOARD.trial_planned(plan)  # the phase metric (coordinator.observe); inert unless served
        self.late_rows()
        self._prime(plan)
        db_before, statements_before = self.check.read(), self.check.statements()
        commands = CommandCounts(self.caches, plan.strategy.cache_server, self.locks, plan.start_ns)
        gatherer = self._gatherer(plan, workers)
        gathered, report = self._follow(plan, label, workers, gatherer)
        db_after = self.check.read()
        commands.finish()
        statements = checks.statement_rows(
            statements_before, self.check.statements(), self.writer.root.name, plan.trial,
            self.check.marks, self.check.query_ids)
        self.last_lost = gathered.lost
        present = [(w, TrialResult.from_json(r))
                   for w, r in zip(workers, gathered.results, strict=True) if r]
        complete = self._settle(gatherer, present)
        results = [r for _, r in present]
        rows = TrialRows(self.writer.root, plan.trial)
        floor_ms = min(r.floor_p5_ns for r in results) / 1e6
        scanned = metrics.scan_trial(rows.source(), window_of(plan), floor_ms)
        summary = self._summarise(plan, scanned, -1, len(workers))
        summary.update(self.check.columns(db_before, db_after, summary["origin_calls_total"]))
        observed = self.events.observed(plan)
        summary.update(self.events.figures(plan, scanned.called, summary["window_origin_calls"], observed))
        summary.update(checks.generator_figures(results))
        span = report.window or (plan.start_ns, plan.start_ns)
        summary.update(fault_columns(report, plan.start_ns, rows.between(plan.start_ns, span[1]),
                                     len(gathered.missing)))
        summary.update(liveness_columns(gathered))
        summary.update(delivery_columns(gatherer, present))
        summary["db_time_ms"] = sum(s["total_ms"] for s in statements)
        summary.update(self._consistency(plan, rows))
        summary.update(commands.columns(scanned.client_requests))
        self.writer.add_commands(commands.rows(self.writer.root.name, plan.trial))
        self.writer.add_statements(statements)
        self.writer.add_trial(summary)
        if not complete:  # rows may still come: written, and the trial re-marked, when they do
            self.unfinished[plan.trial] = Unfinished(plan, gatherer, summary, observed, floor_ms,
                                                     present)
        self._say_workers(label, gathered, gatherer)
        per = "expiry" if summary["event_kind"] == "expiry" else summary["event_kind"]
        self.console.say(
            f"{label}: {summary['origin_per_expiry']:.1f} origin calls/{per} "
            f"({summary['expiry_events']} events), "
            f"{summary['rps']:,.0f} rps, p99 {summary['p99_ms']:.1f} ms, "
            f"errors {summary['errors']}, db calls {db_word(summary)}"
            + (f", fault {report.label}" if report.label else "")
        )
        return {"trial": plan.trial, "strategy": plan.strategy.label, "repeat": plan.repeat,
                "start_ns": plan.start_ns, "window_start_ns": plan.window_start_ns,
                "window_end_ns": plan.window_end_ns, "first_expiry_ns": plan.first_expiry_ns,
                "workers": [r.worker for _, r in present], "missing_workers": gathered.missing,
                "cache_floor_ms": {w: {"p5": r.floor_p5_ns / 1e6, "median": r.floor_median_ns / 1e6}
                                   for w, r in present},  # each worker's own cache round trip
                "dispatched": workers, "clients_per_worker": [s.clients for s in plan.shares],
                "lost_workers": {w: x.to_json() for w, x in gathered.lost.items()},
                "slow_workers": gathered.slow,
                "complete": summary["complete"], "fault": report.label,
                "faults_applied": [{"fault": a.fault.label, "at_ns": a.at_ns, "detail": a.detail,
                                    "error": a.error} for a in report.applied]}

    def _gatherer(self, plan: TrialPlan, workers: Sequence[str]) -> RowGatherer:
        """Where the trial's rows go as they arrive: from its stream into its partition."""
        run_id = self.writer.root.name
        by_index = {share.index: worker for share, worker in zip(plan.shares, workers, strict=True)}

        def aligned(worker: str, wire: pa.Table) -> pa.Table:
            return align(plan, run_id, worker, self.offsets[worker]["offset_ns"], wire)

        key = transport.rows_key(run_id, plan.trial)
        self.broker.delete(key)  # a stream of an earlier run of this directory name: not ours
        return RowGatherer(self.broker, key, by_index, aligned, self.writer.trial_parts(plan.trial))

    def _settle(self, gatherer: RowGatherer, present: Sequence[tuple[str, TrialResult]]) -> bool:
        """After the tasks: take the last batches and end markers (bounded), then close; True
        when every worker's rows are complete."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            gatherer.poll(budget_s=None)
            waiting = [w for w, r in present if len(gatherer.sent[w].seqs) < r.batches]
            if not waiting or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        complete = all(gatherer.complete(w) for w in gatherer.sent)
        gatherer.close(keep_stream=not complete)
        return complete

    def _follow(self, plan: TrialPlan, label: str, workers: Sequence[str],
                gatherer: RowGatherer) -> tuple[dispatch.Gathered, FaultReport]:
        """Send each worker its share, arm the faults, follow the heartbeats until every result
        is in or given up (a worker silent for ``worker_silence_s`` is lost at once)."""
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
            self.console.say(f"trial {plan.trial} {plan.strategy.label}: {line}")
        return {**consistency_figures(rows.source()), **check.columns()}

    def _prime(self, plan: TrialPlan) -> None:
        """Clear what the last trial left, then store each key to expire at the first expiry."""
        self.caches.flush(plan.strategy.cache_server)
        self.locks.flushdb()
        self.primer.prime(plan.strategy, plan.window_start_ns, plan.trial)

    def _assignments(self, plan: TrialPlan,
                     workers: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for share, worker in zip(plan.shares, workers, strict=True):
            spec = TrialSpec(
                run_id=self.writer.root.name, trial=plan.trial, repeat=plan.repeat,
                strategy=plan.strategy.name, params=dict(plan.strategy.params),
                worker_index=share.index, client_base=share.client_base, clients=share.clients,
                keys=list(plan.keys), ttl_ms=plan.ttl_ms, start_ns=plan.start_ns,
                end_ns=plan.end_ns, clock_offset_ns=self.offsets[worker]["offset_ns"],
                pool_size=self.config.pool_size, origin_span_s=self.span_s,
                progress_interval_s=self.config.timing.progress_s,
                workload=self.config.workload.to_json(), stage_start_ns=plan.window_start_ns,
                workers=len(workers), products=self.products,
                expiry_grid_ns=plan.first_expiry_ns if self.config.expiry is ExpiryMode.ALIGNED else 0,
                redis_client=self.config.redis_client.value, plugins=list(self.config.plugins),
            )
            out.append((worker, spec.to_json()))
        return out

    def _progress(self, label: str, plan: TrialPlan, p: dispatch.Progress) -> None:
        """The console line, and the live metrics' expiries (from the run's one listener)."""
        self.console.progress(progress_line(label, plan, self.config.seconds, p))
        listener = self.caches.listeners[plan.strategy.cache_server]
        BOARD.reported(plan.trial, *listener.expired_since(self.key_names, plan.start_ns))

    def _summarise(self, plan: TrialPlan, scanned: metrics.Scanned, db_calls: int,
                   workers: int) -> dict[str, Any]:
        window = window_of(plan)
        figures = scanned.figures
        firsts = list(scanned.first_start_ns.values())
        return {
            "run_id": self.writer.root.name, "trial": plan.trial, "strategy": plan.strategy.label,
            "params": orjson.dumps(dict(plan.strategy.params)).decode(), "repeat": plan.repeat,
            "workers": workers, "clients": self.config.clients,
            "ttl_s": self.config.ttl_s, "window_s": window.seconds, **figures,
            "db_calls": db_calls, "db_calls_match": db_calls == figures["origin_calls_total"],
            "start_spread_ms": (max(firsts) - min(firsts)) / 1e6 if firsts else float("nan"),
            "complete": True,
        }
