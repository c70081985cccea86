"""One trial from the coordinator's side: prime, dispatch, follow, gather, check, write."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from celery import Celery

from coordinator import dispatch
from coordinator.caches import CommandCounts, RunCaches
from coordinator.config import LaunchConfig
from coordinator.consistency import servers_check, written_keys
from coordinator.console import Console
from coordinator.faults.injector import FaultReport, TrialHooks, fault_columns
from coordinator.liveness import Liveness, Loss
from coordinator.observe.board import BOARD
from coordinator.origin.user import origin_check
from coordinator.plan import ExpiryMode, TrialPlan
from coordinator.priming import Primer
from model.origin import OriginShape
from model.origins import origin_pool
from model.services import COORDINATOR_APP, Services, redis_client
from model.wire import TrialResult, TrialSpec
from results import checks, events, metrics, reports, transport
from results.consistency import consistency_figures
from results.schema import REQUEST_SCHEMA, WIRE_SCHEMA
from results.store import RunWriter
from strategies.base import CacheServer

_ALIGN = ("t_intended_ns", "t_start_ns", "origin_start_ns", "set_ns", "commit_ns")
_ZERO_IS_NONE = frozenset(_ALIGN[2:])  # 0 means "none" (no origin call, no set, no commit)


def window_of(plan: TrialPlan) -> metrics.Window:
    return metrics.Window(plan.window_start_ns, plan.window_end_ns)


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
        self.pool = origin_pool(services.origin_dsn, config.workload.origin, 1,
                                app_name=COORDINATOR_APP, check=True)  # none: an HTTP origin
        self.check = origin_check(config.workload, services, config.counter)  # the origin's count
        self.primer = Primer(config.workload, self.caches, self.locks, self.pool,
                             OriginShape(span_s, products), console.say)
        self.key_names = frozenset(k for ep in config.workload.endpoints for k in ep.key_names())
        self.caches.start()
        self._skipped = 0  # memcached's log lines skipped for a slow watcher, so far
        self.last_lost: dict[str, Loss] = {}  # the workers the last trial lost (coordinator.liveness)

    def expiry_source(self, kind: CacheServer) -> str:
        """``server`` when the cache reports its expiries, ``schedule`` when it cannot."""
        return "schedule" if self.caches.listeners[kind].unavailable else "server"

    def expiry_meta(self) -> dict[str, Any]:
        """run.json's ``expiries``: where the events come from, per cache of the run."""
        return {kind.value: {"source": self.expiry_source(kind), "unavailable": listener.unavailable,
                             "listener_priority": listener.priority}
                for kind, listener in self.caches.listeners.items()}

    def close(self) -> None:
        self.caches.close()
        if self.pool is not None:
            self.pool.close()
        self.locks.close()

    def run(self, plan: TrialPlan, of: int, workers: Sequence[str] | None = None) -> dict[str, Any]:
        """Run ``plan`` on ``workers`` (default: all of the run's), one share each."""
        workers = list(workers or self.workers)
        label = f"trial {plan.trial}/{of} {plan.strategy.label} r{plan.repeat}"
        BOARD.trial_planned(plan)  # the phase metric (coordinator.observe); inert unless served
        self._prime(plan)
        db_before, statements_before = self.check.read(), self.check.statements()
        commands = CommandCounts(self.caches, plan.strategy.cache_server, self.locks, plan.start_ns)
        gathered, report = self._follow(plan, label, workers)
        db_after = self.check.read()
        commands.finish()
        statements = checks.statement_rows(
            statements_before, self.check.statements(), self.writer.root.name, plan.trial,
            self.check.marks, self.check.query_ids)
        self.last_lost = gathered.lost
        present = [(w, TrialResult.from_json(r))
                   for w, r in zip(workers, gathered.results, strict=True) if r]
        rows = self._gather_rows(plan, present)
        self.writer.write_requests(plan.trial, rows)
        results = [r for _, r in present]
        summary = self._summarise(plan, rows, results, -1, len(workers))
        summary.update(self.check.columns(db_before, db_after, summary["origin_calls_total"]))
        summary.update(self._events(plan, rows, summary["window_origin_calls"]))
        summary.update(checks.generator_figures(results))
        summary.update(fault_columns(report, plan.start_ns, rows, len(gathered.missing)))
        summary.update(liveness_columns(gathered))
        summary["db_time_ms"] = sum(s["total_ms"] for s in statements)
        summary.update(self._consistency(plan, rows))
        summary.update(commands.columns(metrics.client_requests(rows).num_rows))
        self.writer.add_commands(commands.rows(self.writer.root.name, plan.trial))
        self.writer.add_statements(statements)
        self.writer.add_trial(summary)
        self._say_workers(label, gathered)
        per = "expiry" if summary["event_kind"] == "expiry" else summary["event_kind"]
        self.console.say(
            f"{label}: {summary['origin_per_expiry']:.1f} origin calls/{per} "
            f"({summary['expiry_events']} events), "
            f"{summary['rps']:,.0f} rps, p99 {summary['p99_ms']:.1f} ms, "
            f"errors {summary['errors']}, db calls {_db_word(summary)}"
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

    def _follow(self, plan: TrialPlan, label: str,
                workers: Sequence[str]) -> tuple[dispatch.Gathered, FaultReport]:
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
            )
        finally:
            dispatch.release(tasks)
            report = self.hooks.disarm(plan)
            BOARD.trial_done()
        return gathered, report

    def _say_workers(self, label: str, gathered: dispatch.Gathered) -> None:
        for worker, why in gathered.missing.items():
            self.console.say(f"{label}: no rows from {worker} ({why}); trial marked incomplete")
        for worker, longest in gathered.slow.items():
            self.console.say(f"{label}: worker {worker} slow: silent up to {longest:.1f} s "
                             f"(limit {self.config.timing.worker_silence_s:g} s), not lost")

    def _events(self, plan: TrialPlan, rows: pa.Table, window_calls: int) -> dict[str, Any]:
        """Observed events and their herds: the headline figure, and ``expiries.parquet``."""
        ttl_ns = plan.ttl_ms * 1_000_000
        kind = plan.strategy.cache_server
        listener = self.caches.listeners[kind]
        if listener.unavailable:
            observed = reports.schedule_events(plan.keys, plan.first_expiry_ns, ttl_ns, plan.end_ns)
        else:
            # past the end too: an expiry at the last instant must not lend its calls to the one before
            observed = listener.events(self.key_names, plan.start_ns, time.time_ns())
        event_plan = events.EventPlan((plan.window_start_ns, plan.window_end_ns),
                                      plan.first_expiry_ns, ttl_ns, plan.period_events,
                                      self.config.expiry is ExpiryMode.ALIGNED)
        figures, herds = events.trial_events(rows, observed, event_plan, window_calls)
        context = {"run_id": self.writer.root.name, "trial": plan.trial,
                   "strategy": plan.strategy.label, "repeat": plan.repeat}
        self.writer.add_expiries(events.event_rows(herds, event_plan.window, context))
        source = self.expiry_source(kind)
        if source == "server" and listener.missed(plan.start_ns, plan.end_ns):
            source = "server with gap"
            self.console.say(f"trial {plan.trial}: the cache stopped reporting expiries for a while "
                             "(it went away); events in that gap are missing")
        elif source == "server" and (skipped := self.caches.watcher_skipped()) > self._skipped:
            source, self._skipped = "server with gap", skipped
            self.console.say(f"trial {plan.trial}: memcached skipped log lines of a slow watcher: "
                             "expiries it reported may be missing")
        return {**figures, "expiry_source": stamped(source, figures["event_kind"]),
                "expiry_mode": self.config.expiry.value}

    def _consistency(self, plan: TrialPlan, rows: pa.Table) -> dict[str, Any]:
        """Stale reads and sets from the rows, and the servers' own word on the written keys."""
        kind = plan.strategy.cache_server
        check = servers_check(plan.strategy, self.config.workload.endpoints,
                              lambda ep: self.primer.deps(ep, kind),
                              lambda key: self.caches.ttl_left_ms(kind, key),
                              self.services.origin_dsn, written_keys(rows))
        for line in check.detail:
            self.console.say(f"trial {plan.trial} {plan.strategy.label}: {line}")
        return {**consistency_figures(rows), **check.columns()}

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
        self.console.progress(self._progress_line(label, plan, p))
        listener = self.caches.listeners[plan.strategy.cache_server]
        BOARD.reported(plan.trial, *listener.expired_since(self.key_names, plan.start_ns))

    def _progress_line(self, label: str, plan: TrialPlan, p: dispatch.Progress) -> str:
        """Counts so far; past the trial's end the rate stays the trial's, and the line says
        whose rows are awaited (it used to decay towards ``0 rps origin 0``)."""
        elapsed = (time.time_ns() - plan.start_ns) / 1e9
        if elapsed < 0:
            return f"{label}: starts in {-elapsed:.1f} s"
        seconds = self.config.seconds
        c = p.counts
        rps = c["requests"] / min(elapsed, seconds) if elapsed > 0 else 0.0
        line = (f"{label}: {min(elapsed, seconds):4.1f}/{seconds:g} s  {rps:8,.0f} rps  "
                f"origin {c['origin_calls']:,}  errors {c['errors']:,}")
        return line + (f"  (ended; waiting for {p.waiting} worker(s))" if elapsed > seconds else "")

    def _gather_rows(self, plan: TrialPlan,
                     results: Sequence[tuple[str, TrialResult]]) -> pa.Table:
        tables = []
        for worker, result in results:
            wire = transport.decode(result.rows) if result.rows else WIRE_SCHEMA.empty_table()
            tables.append(self._contextualise(plan, worker, wire))
        return pa.concat_tables(tables)

    def _contextualise(self, plan: TrialPlan, worker: str, wire: pa.Table) -> pa.Table:
        """Add run/trial columns, move times onto our clock, mark the measurement window."""
        offset = self.offsets[worker]["offset_ns"]
        for name in _ALIGN:
            column = pc.subtract(wire[name], offset)
            if name in _ZERO_IS_NONE:  # keep 0 as 0
                column = pc.if_else(pc.equal(wire[name], 0), 0, column)
            wire = wire.set_column(wire.schema.get_field_index(name), name, column)
        n = wire.num_rows
        constants = {"run_id": self.writer.root.name, "trial": plan.trial,
                     "strategy": plan.strategy.label, "repeat": plan.repeat, "worker": worker}
        for name, value in constants.items():
            wire = wire.append_column(REQUEST_SCHEMA.field(name), pa.array([value] * n,
                                      REQUEST_SCHEMA.field(name).type))
        wire = wire.append_column("in_window",
                                  metrics.in_window(wire["t_start_ns"], window_of(plan)))
        return wire.select(REQUEST_SCHEMA.names).cast(REQUEST_SCHEMA)

    def _summarise(self, plan: TrialPlan, rows: pa.Table, results: Sequence[TrialResult],
                   db_calls: int, workers: int) -> dict[str, Any]:
        window = window_of(plan)
        floor_ms = min(r.floor_p5_ns for r in results) / 1e6
        figures = metrics.summarise(rows, window, floor_ms)
        firsts = rows.group_by("worker").aggregate([("t_start_ns", "min")])["t_start_ns_min"]
        firsts = [f for f in firsts.to_pylist() if f is not None]
        return {
            "run_id": self.writer.root.name, "trial": plan.trial, "strategy": plan.strategy.label,
            "params": orjson.dumps(dict(plan.strategy.params)).decode(), "repeat": plan.repeat,
            "workers": workers, "clients": self.config.clients,
            "ttl_s": self.config.ttl_s, "window_s": window.seconds, **figures,
            "db_calls": db_calls, "db_calls_match": db_calls == figures["origin_calls_total"],
            "start_spread_ms": (max(firsts) - min(firsts)) / 1e6 if firsts else float("nan"),
            "complete": True,
        }


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


def _db_word(summary: dict[str, Any]) -> str:
    if summary.get("db_check") == "unchecked":
        return "unchecked"
    if summary["db_calls_match"]:
        return "match"
    return "MISMATCH" + (" (rows of a lost worker missing)" if summary["workers_lost"] else "")
