"""Fault injection on the embedded stack's real processes: timers armed at a trial's start.

The trial runner calls ``arm`` once the tasks are sent, ``lost`` while it waits for results
(workers a fault killed will never answer) and ``disarm`` when it has them; the experiment
runner calls ``between_trials`` before each next trial, which restarts what a fault killed.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from coordinator.faults.net import LinkControl, NetControlError
from coordinator.faults.origin_holds import OriginHold, exhaust_origin, lock_orders
from coordinator.faults.spec import LASTING, STANDING, Action, Fault, Target, label
from coordinator.stack import EmbeddedStack
from coordinator.stack.celery_workers import LOCAL_HOST
from coordinator.stack.processes import ManagedProcess
from coordinator.trials.plan import TrialPlan
from results.figures.fault_stats import FAULT_FIELDS, LOAD_FIELDS, origin_load, under_fault

APPLY_TIMEOUT_S = 15.0  # bound on waiting for a fault that is being applied


@dataclass(frozen=True)
class Applied:
    """One fault as it happened: when it was in effect (ns, coordinator clock), on what, and any
    failure."""

    fault: Fault
    at_ns: int
    detail: str
    error: str | None = None


@dataclass
class FaultReport:
    """What a trial's faults did: the trial's ``fault`` columns come from here."""

    label: str = ""
    applied: list[Applied] = field(default_factory=list)
    window: tuple[int, int] | None = None  # first fault instant .. last lift (ns)

    def first_at_s(self, start_ns: int) -> float:
        if not self.applied:
            return float("nan")
        return (min(a.at_ns for a in self.applied) - start_ns) / 1e9


class TrialHooks:
    """No faults: the hooks a run without ``--fault`` uses."""

    def arm(self, plan: TrialPlan) -> None:
        """Called when the trial's tasks are sent."""

    def lost(self) -> set[str]:
        return set()

    def disarm(self, plan: TrialPlan) -> FaultReport:
        return FaultReport()

    def between_trials(self) -> list[str]:
        return []


class Injector(TrialHooks):
    """Acts on the embedded stack's ManagedProcess objects (PIDs we own) and its PostgreSQL, and
    on the namespace lab's links through its link control (``net:`` faults; no stack needed)."""

    def __init__(self, stack: EmbeddedStack | None, faults: Sequence[Fault], trial_s: float,
                 say: Callable[[str], None], net: LinkControl | None = None) -> None:
        self._stack, self.faults, self.trial_s, self.say = stack, tuple(faults), trial_s, say
        self.net = net
        self._standing: dict[Fault, str] = {}  # net:delay / net:loss set for the whole run
        self._timers: list[threading.Timer] = []
        self._mutex = threading.Lock()
        self._applied: list[Applied] = []
        self._lifts: dict[Fault, Callable[[], None]] = {}
        self._killed_workers: set[str] = set()

    @property
    def stack(self) -> EmbeddedStack:
        if self._stack is None:
            raise RuntimeError("process faults need the embedded stack")
        return self._stack

    def open(self) -> None:
        """Set the faults that hold for the whole run (before the first trial's floor is measured)."""
        for fault in self.faults:
            if fault.action in STANDING:
                self._standing[fault], _ = self._link_control().apply(fault)
                self.say(f"fault {fault.label}: {self._standing[fault]} (the whole run)")

    def close(self) -> None:
        """Lift the whole-run faults (every link back to clear)."""
        if self._standing and self.net is not None:
            self._standing.clear()
            self.say(f"faults lifted: {self.net.ask('reset')}")

    def arm(self, plan: TrialPlan) -> None:
        self._applied, self._lifts, self._killed_workers = [], {}, set()
        for fault in self.faults:
            if fault.between_trials:
                continue
            if fault.action in STANDING:  # set by ``open``: held since before the trial started
                self._applied.append(Applied(fault, plan.start_ns, self._standing.get(fault, ""),
                                             None if fault in self._standing else "not set"))
                continue
            self._after(plan, fault.at_s, self._apply, fault)
            if fault.action in LASTING or fault.duration_s:  # a kill with a duration: restart
                self._after(plan, fault.end_s(self.trial_s), self._lift, fault)

    def _after(self, plan: TrialPlan, at_s: float, action: Callable[[Fault], None],
               fault: Fault) -> None:
        delay = (plan.start_ns + round(at_s * 1e9) - time.time_ns()) / 1e9
        timer = threading.Timer(max(0.0, delay), action, args=(fault,))
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def lost(self) -> set[str]:
        with self._mutex:
            return set(self._killed_workers)

    def disarm(self, plan: TrialPlan) -> FaultReport:
        """Cancel what has not fired, lift what still holds, and say what happened."""
        for timer in self._timers:
            timer.cancel()
        for timer in self._timers:
            timer.join(APPLY_TIMEOUT_S)  # one already applying a fault finishes first
        self._timers.clear()
        for fault in list(self._lifts):
            self._lift(fault)
        with self._mutex:
            applied = list(self._applied)
        window = None
        if applied:
            end_s = max(a.fault.end_s(self.trial_s) for a in applied)
            window = (min(a.at_ns for a in applied), plan.start_ns + round(end_s * 1e9))
        return FaultReport(label(f for f in self.faults if not f.between_trials), applied, window)

    def between_trials(self) -> list[str]:
        """Restart the broker where asked, then every process a fault killed (same port)."""
        restarted: list[str] = []
        if self._stack is None:  # remote services (the namespace lab): nothing of ours to restart
            return restarted
        for fault in self.faults:
            if fault.between_trials:
                self.say(f"fault {fault.label}: restarting the broker")
                self.stack.restart(self.stack.process("broker"))
                restarted.append("broker")
        return restarted + self.stack.restart_dead()

    def _apply(self, fault: Fault) -> None:
        try:
            detail = self._act(fault)
            error = None
        except Exception as exc:  # noqa: BLE001 - a fault that failed to apply is reported, not lost
            detail, error = "not applied", f"{type(exc).__name__}: {exc}"
        # The fault window opens when the fault is in effect (a killed server reaped, not when
        # the signal was sent): a request started before that may still be answered by it.
        at_ns = time.time_ns()
        with self._mutex:
            self._applied.append(Applied(fault, at_ns, detail, error))
        self.say(f"fault {fault.label}: {detail}" + (f" FAILED: {error}" if error else ""))

    def _act(self, fault: Fault) -> str:
        if fault.target is Target.NET:
            detail, release = self._link_control().apply(fault)
            self._hold(fault, OriginHold(detail, release))
            return detail
        if fault.target is Target.ORIGIN:
            hold = (lock_orders if fault.action is Action.LOCK else exhaust_origin)(
                self.stack.services.origin_dsn)
            self._hold(fault, hold)
            return hold.detail
        proc = self._process(fault.target, fault.worker)
        if fault.action is Action.PAUSE:
            proc.signal(signal.SIGSTOP)
            self._hold(fault, OriginHold("", lambda: proc.signal(signal.SIGCONT)))
            return f"SIGSTOP {proc.name} (pid {proc.pid})"
        proc.signal(signal.SIGKILL)
        proc.popen.wait(5)
        if fault.target is Target.WORKER:
            with self._mutex:
                self._killed_workers.add(proc.name)
        killed = f"SIGKILL {proc.name} (pid {proc.pid})"
        if fault.duration_s:  # started again (empty, same port) when the duration ends
            self._hold(fault, OriginHold(killed, lambda: self.stack.restart(proc)))
        return killed

    def _process(self, target: Target, worker: str | None = None) -> ManagedProcess:
        if target is Target.WORKER:  # the worker named (w2 -> w2@stampede-local), else the last
            return self.stack.process(f"{worker}@{LOCAL_HOST}") if worker else self.stack.workers[-1]
        return self.stack.process(target.value)

    def _link_control(self) -> LinkControl:
        if self.net is None:
            raise NetControlError("net: faults need the lab's link control (--net-control)")
        return self.net

    def _hold(self, fault: Fault, hold: OriginHold) -> None:
        with self._mutex:
            self._lifts[fault] = hold.release

    def _lift(self, fault: Fault) -> None:
        with self._mutex:
            release = self._lifts.pop(fault, None)
        if release is not None:
            release()
            self.say(f"fault {fault.label}: lifted")


def fault_columns(report: FaultReport, start_ns: int, rows: pa.Table,
                  workers_lost: int) -> dict[str, Any]:
    """The trial's fault columns (results/schema.py): label, instant, completeness, counts."""
    counts: dict[str, Any] = dict.fromkeys(FAULT_FIELDS, 0) | dict.fromkeys(LOAD_FIELDS, math.nan)
    if report.window is not None:
        counts = dict(under_fault(rows, *report.window)) | origin_load(rows, start_ns,
                                                                       *report.window)
    return {"fault": report.label, "fault_at_s": report.first_at_s(start_ns),
            "workers_lost": workers_lost, "complete": workers_lost == 0, **counts}
