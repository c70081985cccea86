"""One experiment on given services: prepare the origin, run every trial, keep every result.

Data flows one way: plan -> dispatch -> client threads (workers) -> rows -> Parquet -> table.
"""

from __future__ import annotations

import enum
import os
import platform
import socket
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from celery import Celery

from coordinator import plugins, provenance
from coordinator.app_tier.connect import TierPlace, connect_tier, target_maker
from coordinator.config import LaunchConfig
from coordinator.console import Console
from coordinator.faults.injector import TrialHooks
from coordinator.manifest import Manifest, workload_json
from coordinator.origin.prepare import prepare_origin
from coordinator.trials import clock, dispatch
from coordinator.trials.liveness import Loss, LossCause, LossPolicy, Roster, WorkersLost
from coordinator.trials.plan import plan_trial, trial_order
from coordinator.trials.runner import FIRST_SETUP_S, TrialRunner
from model.services import Services
from results.store.rundir import RunWriter
from results.store.schema import MANIFEST_VERSION


class RunStatus(enum.StrEnum):
    """run.json's ``status``."""

    RUNNING = "running"
    COMPLETE = "complete"
    DEGRADED = "degraded"  # every trial ran, but a worker was lost (--on-worker-loss continue)
    INCOMPLETE = "incomplete"  # stopped: an error, Ctrl-C, or a lost worker with --on-worker-loss fail


@dataclass
class RunState:
    """What ``run.json`` records; rewritten after every trial so a stopped run stays readable."""

    run_id: str
    config: LaunchConfig
    services: Services
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    meta: dict[str, Any] = field(default_factory=dict)
    trials: list[dict[str, Any]] = field(default_factory=list)
    versions: dict[str, Any] | None = None  # the manifest's, once the services have answered
    hosts: dict[str, Any] | None = None  # the manifest's, once the workers have answered
    roster: Roster | None = None  # the workers, once they have answered; lost and slow ones

    def to_json(self, status: RunStatus) -> dict[str, Any]:
        c = self.config
        return {
            "run_id": self.run_id,
            "status": status.value,
            "started": self.started,
            "ended": datetime.now(UTC).isoformat() if status is not RunStatus.RUNNING else None,
            "manifest_version": MANIFEST_VERSION,
            "manifest": Manifest.of(c, self.versions, self.hosts).to_json(),
            "spec": {
                "workers": c.workers, "clients": c.clients, "ttl_s": c.ttl_s,
                "seconds": c.seconds, "repeat": c.repeat, "scale": c.scale,
                "pool_size": c.pool_size, "keys": list(c.keys),
                "strategies": [{"name": s.name, "params": dict(s.params), "label": s.label}
                               for s in c.strategies],
                "embedded_stack": c.embedded, "timing": vars(c.timing),
                "faults": [f.label for f in c.faults], "expiry": c.expiry.value,
                "workload": workload_json(c.workload),
                "client_driver": c.client_driver.value,
            },
            "services": self.services.masked(),
            "coordinator": {"host": socket.gethostname(), "pid": os.getpid(),
                            "python": platform.python_version()},
            **self.meta,
            **({"liveness": self.roster.to_json()} if self.roster else {}),
            "trials": self.trials,
        }


def run_experiment(config: LaunchConfig, services: Services, app: Celery, writer: RunWriter,
                   console: Console, hooks: TrialHooks | None = None,
                   place: TierPlace | None = None) -> RunState:
    """Every trial of ``config`` on these services (``place``: where the app tier is, when the
    run has one); run.json rewritten as it goes."""
    state = RunState(writer.root.name, config, services)
    writer.write_meta(state.to_json(RunStatus.RUNNING))
    workers = dispatch.wait_for_workers(app, config.workers, config.timing.worker_wait_s,
                                        console.progress)
    console.say(f"workers: {len(workers)} answered ({', '.join(workers)})")
    want = plugins.check_workers(app, workers, plugins.expected(config.plugins, config.strategies))
    if want:
        state.meta["plugins"] = want
        console.say(f"plug-ins: every worker has {', '.join(f'{n} {v}' for n, v in want.items())}")
    state.hosts = provenance.hosts(app, workers)
    offsets, lead_s = _align_clocks(app, workers, config, console, state)
    tier = None
    if config.app.on:
        tier, state.meta["app_tier"] = connect_tier(config, services, place or TierPlace(config.app.url),
                                                    target_maker(config), want, console, offsets)
    state.versions = provenance.versions(services)
    state.meta["origin"] = prepare_origin(config, services, console)
    roster = state.roster = Roster(list(workers), config.on_worker_loss,
                                   config.timing.worker_silence_s)
    writer.write_meta(state.to_json(RunStatus.RUNNING))
    hooks = hooks or TrialHooks()
    runner = TrialRunner(config, services, app, writer, workers, offsets, console,
                         span_s=state.meta["origin"]["span_s"], hooks=hooks,
                         products=state.meta["origin"].get("products", 0), tier=tier)
    caches = runner.events.expiry_meta()  # the first cache's keys as before, each cache's under "caches"
    state.meta["expiries"] = {**next(iter(caches.values())), "mode": config.expiry.value,
                              "caches": caches}
    for kind, listener in runner.caches.listeners.items():
        if listener.unavailable:
            console.say(f"warning: {listener.unavailable}; {kind.value} expiry events fall back to "
                        "the schedule (marked 'schedule' in expiries.parquet and the table)")
    try:
        _run_trials(state, roster, runner, app, hooks, lead_s)
    except BaseException:
        writer.write_meta(state.to_json(RunStatus.INCOMPLETE))
        raise
    finally:
        runner.close()
    writer.write_meta(state.to_json(RunStatus.DEGRADED if roster.degraded else RunStatus.COMPLETE))
    return state


def _run_trials(state: RunState, roster: Roster, runner: TrialRunner, app: Celery,
                hooks: TrialHooks, lead_s: float) -> None:
    """Every trial in order, each on the workers still in the roster (clients re-split);
    run.json rewritten after each."""
    config, console, writer = state.config, runner.console, runner.writer
    counts = config.app.counts or (0,)
    order = [(count, spec, repeat) for count in counts
             for spec, repeat in trial_order(list(config.strategies), config.repeat)]
    for number, (count, spec, repeat) in enumerate(order, start=1):
        serving = _app_processes(runner, count, config, console)
        if number > 1:
            _recover(config, app, hooks, console, len(roster.active))
            _recheck(app, roster, number, console)
        schedule = replace(config.schedule(), workers=len(roster.active))
        plan = plan_trial(schedule, number, spec, repeat, time.time_ns(),
                          lead_s + runner.setup_lead_s())
        if len(counts) > 1:  # the trials differ by their app processes too: the label says so
            plan = replace(plan, variant=f"{serving} apps")
        known = len(roster.lost)
        record = runner.run(plan, of=len(order), workers=roster.active)
        roster.record(number, runner.last_lost, record["slow_workers"])
        state.trials.append(record)
        writer.write_meta(state.to_json(RunStatus.RUNNING))
        _follow_policy(roster, console, known)


def _app_processes(runner: TrialRunner, count: int, config: LaunchConfig,
                   console: Console) -> int:
    """The app tier at ``count`` processes for the next trials (``--app-servers 1,2,4``); how
    many serve (0: no tier)."""
    if runner.tier is None:
        return 0
    before = len(runner.tier.tier.nodes)
    serving = runner.tier.rescale(count, config.timing.worker_wait_s, console.progress)
    if serving != before:  # new processes: their clocks beside ours, as the first ones'
        runner.offsets.update(runner.tier.clock_offsets())
        runner.setup_s = FIRST_SETUP_S  # their first build is slower, as the first trial's was
        console.say(f"app tier: {serving} processes serve from now on")
    return serving


def _align_clocks(app: Celery, workers: list[str], config: LaunchConfig, console: Console,
                  state: RunState) -> tuple[dict[str, dict[str, int]], float]:
    """Measure every worker's clock offset (recorded), refuse if too uncertain; return the lead."""
    offsets = clock.measure_offsets(app, workers)
    state.meta["clock_offsets"] = offsets
    worst = max(o["uncertainty_ns"] for o in offsets.values()) / 1e6
    console.say(f"clocks: {len(offsets)} offsets measured, uncertainty at most ±{worst:.2f} ms")
    # A black box's events and herds are on the coordinator's clock (its samples, its deletes):
    # the workers' offsets only place its rows, so an uncertain one is a warning there.
    force = config.force_clock or config.service is not None
    for warning in clock.check_uncertainty(offsets, config.ttl_s, force):
        console.say(f"warning: {warning}")
    lead = clock.lead_s(offsets, config.timing)
    state.meta["lead_s"] = lead
    return offsets, lead


def _recover(config: LaunchConfig, app: Celery, hooks: TrialHooks, console: Console,
             workers: int) -> None:
    """Between trials: restart what a fault killed, then wait (bounded) for the run's workers."""
    restarted = hooks.between_trials()
    if "broker" in restarted:
        dispatch.reset_connections(app)  # every pooled broker connection died with the old server
    if restarted:
        dispatch.wait_for_workers(app, workers, config.timing.worker_wait_s, console.progress)
        console.say(f"recovered: restarted {', '.join(restarted) or 'the broker'}; "
                    f"{workers} workers answer")


def _recheck(app: Celery, roster: Roster, trial: int, console: Console) -> None:
    """Between trials: every worker of the next trial must answer a ping within the silence
    limit; one that does not is lost (no share in this or any later trial)."""
    known, started = len(roster.lost), time.monotonic()
    answered = dispatch.ping(app, roster.active, roster.silence_s)
    for worker in [w for w in roster.active if w not in answered]:
        loss = Loss(worker, LossCause.NO_PING, trial, time.monotonic() - started,
                    roster.silence_s, time.time_ns())
        roster.lose(loss)
        console.say(f"before trial {trial}: worker {worker} lost: {loss.describe()}")
    _follow_policy(roster, console, known)


def _follow_policy(roster: Roster, console: Console, known: int) -> None:
    """``--on-worker-loss`` once workers beyond the ``known`` losses are lost: stop, or go on
    with the survivors (the clients re-split over them)."""
    if len(roster.lost) == known:
        return
    if roster.policy is LossPolicy.FAIL:
        raise WorkersLost(f"stopped (--on-worker-loss fail): {roster.describe()}")
    if not roster.active:
        raise dispatch.DispatchError(f"no worker left: {roster.describe()}")
    console.say(f"continuing on {len(roster.active)} workers ({', '.join(roster.active)}): "
                f"{roster.describe()}")
