"""Fault specs: ``TARGET:ACTION@SECONDS[+DURATION]``, parsed and checked, apart from any process.

Every trial of a run gets the same faults at the same instants (seconds from the trial's start),
so each strategy is measured under the same failure. ``broker:restart`` is the one fault that
acts between trials: its instant must lie at or after the trial's end. ``net:`` faults act on a
link of the namespace lab (docs/faults.md, "Network faults"): ``net:partition:A-B@S[+D]`` for a
while, ``net:delay:A-B=MS`` and ``net:loss:A-B=PCT`` for the whole run.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass


class FaultError(ValueError):
    """A fault spec that is malformed or names an unknown target or action."""


class Target(enum.StrEnum):
    LOCK_STORE = "lock-store"
    CACHE = "cache"
    ORIGIN = "origin"
    WORKER = "worker"
    BROKER = "broker"
    NET = "net"  # a link between two hosts of the namespace lab, through its link control


class Action(enum.StrEnum):
    KILL = "kill"  # SIGKILL the process; the stack restarts it before the next trial
    PAUSE = "pause"  # SIGSTOP, SIGCONT after the duration (or at the trial's end)
    LOCK = "lock"  # hold an ACCESS EXCLUSIVE lock on ``orders``: every origin query blocks
    EXHAUST = "exhaust"  # hold the workers' pooled origin connections; new ones refused
    RESTART = "restart"  # stop and start again on the same port, between trials
    PARTITION = "partition"  # drop every packet between two hosts for a while
    DELAY = "delay"  # MS one-way latency each way between two hosts, the whole run
    LOSS = "loss"  # drop PCT % of the packets between two hosts, the whole run


ALLOWED: dict[Target, tuple[Action, ...]] = {
    Target.LOCK_STORE: (Action.KILL, Action.PAUSE),
    Target.CACHE: (Action.KILL, Action.PAUSE),
    Target.ORIGIN: (Action.LOCK, Action.EXHAUST),
    Target.WORKER: (Action.KILL,),
    Target.BROKER: (Action.RESTART,),
    Target.NET: (Action.PARTITION, Action.DELAY, Action.LOSS),
}
# Faults that last: without ``+DURATION`` they last until the trial's end.
LASTING = (Action.PAUSE, Action.LOCK, Action.EXHAUST, Action.PARTITION)
# A kill with ``+DURATION``: the server is started again (empty, on the same port) after it,
# within the trial; without one it stays dead until the stack restarts it between trials.
RESTARTED = (Target.CACHE, Target.LOCK_STORE)
# Faults that hold for the whole run (set before the first trial, lifted after the last).
STANDING = (Action.DELAY, Action.LOSS)
SYNTAX = ("TARGET:ACTION@SECONDS[+DURATION], e.g. lock-store:kill@5, origin:lock@3+2 "
          "or worker:kill:w2@3 (one worker named)")
_SPEC = re.compile(r"^(?P<target>[a-z-]+):(?P<action>[a-z]+)(?::(?P<worker>[^@]*))?"
                   r"@(?P<at>[^+]+)(?:\+(?P<dur>.+))?$")
_WORKER = re.compile(r"^w[1-9][0-9]*$")  # the embedded stack's worker names: w1, w2, ...


@dataclass(frozen=True)
class Fault:
    target: Target
    action: Action
    at_s: float
    duration_s: float | None = None
    link: str | None = None  # net: the lab's link "A-B"
    value: float | None = None  # net:delay milliseconds, net:loss percent
    worker: str | None = None  # worker:kill: the worker named (w2), else the last one

    @property
    def label(self) -> str:
        if self.target is Target.NET:
            return _net_label(self)
        dur = f"+{self.duration_s:g}" if self.duration_s is not None else ""
        named = f":{self.worker}" if self.worker else ""
        return f"{self.target}:{self.action}{named}@{self.at_s:g}{dur}"

    @property
    def between_trials(self) -> bool:
        return self.action is Action.RESTART

    def end_s(self, trial_s: float) -> float:
        """When the fault's effect ends (seconds from the trial's start).

        A lasting fault is lifted after its duration (or at the trial's end); a killed process
        stays dead until the stack restarts it between trials, or, with a duration, until then.
        """
        if self.between_trials:
            return self.at_s
        if self.duration_s:
            return min(trial_s, self.at_s + self.duration_s)
        return trial_s


def _number(text: str, what: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FaultError(f"{spec!r}: {what} {text!r} is not a number ({SYNTAX})") from None
    if not math.isfinite(value) or value < 0:
        raise FaultError(f"{spec!r}: {what} must be a finite number >= 0, got {text}")
    return value


def parse(spec: str) -> Fault:
    """One ``TARGET:ACTION@SECONDS[+DURATION]``; FaultError names what is wrong and what is allowed."""
    if spec.strip().startswith(f"{Target.NET}:"):
        return _parse_net(spec)
    match = _SPEC.match(spec.strip())
    if not match:
        raise FaultError(f"{spec!r} is not {SYNTAX}")
    try:
        target = Target(match["target"])
    except ValueError:
        raise FaultError(f"{spec!r}: unknown target {match['target']!r} "
                         f"(allowed: {', '.join(t.value for t in Target)})") from None
    allowed = ALLOWED[target]
    if match["action"] not in {a.value for a in allowed}:
        raise FaultError(f"{spec!r}: {target} cannot {match['action']!r} "
                         f"(allowed: {', '.join(a.value for a in allowed)})")
    action = Action(match["action"])
    worker = _worker_name(spec, target, match["worker"])
    at_s = _number(match["at"], "SECONDS", spec)
    duration = None
    if match["dur"] is not None:
        if action not in LASTING and not (action is Action.KILL and target in RESTARTED):
            raise FaultError(f"{spec!r}: {target}:{action} takes no +DURATION "
                             f"(only {', '.join(a.value for a in LASTING)}, and a kill of "
                             f"{' or '.join(t.value for t in RESTARTED)}, which restarts it, do)")
        duration = _number(match["dur"], "DURATION", spec)
        if duration <= 0:
            raise FaultError(f"{spec!r}: DURATION must be > 0")
    return Fault(target, action, at_s, duration, worker=worker)


def _worker_name(spec: str, target: Target, name: str | None) -> str | None:
    """``worker:kill:w2@S`` names the worker; no other fault takes a name."""
    if name is None:
        return None
    if target is not Target.WORKER:
        raise FaultError(f"{spec!r}: only worker:kill takes a name ({SYNTAX})")
    if not _WORKER.match(name):
        raise FaultError(f"{spec!r}: worker name {name!r} is not w1, w2, ... "
                         "(the names the stack gives its workers)")
    return name


NET_SYNTAX = "net:partition:A-B@SECONDS[+DURATION], net:delay:A-B=MS or net:loss:A-B=PCT"
_NET = re.compile(r"^net:(?P<action>[a-z]+):(?P<link>[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)+)"
                  r"(?:=(?P<value>[^@+]+))?(?:@(?P<at>[^+]+)(?:\+(?P<dur>.+))?)?$")
_NET_LIMIT = {Action.DELAY: 10_000.0, Action.LOSS: 100.0}  # ms, percent


def _parse_net(spec: str) -> Fault:
    """``net:ACTION:A-B...``: a partition takes an instant, a delay or a loss a value instead."""
    match = _NET.match(spec.strip())
    if not match:
        raise FaultError(f"{spec!r} is not {NET_SYNTAX}")
    actions = ALLOWED[Target.NET]
    if match["action"] not in {a.value for a in actions}:
        raise FaultError(f"{spec!r}: net cannot {match['action']!r} "
                         f"(allowed: {', '.join(a.value for a in actions)})")
    action, link = Action(match["action"]), match["link"]
    if action is Action.PARTITION:
        if match["value"] is not None or match["at"] is None:
            raise FaultError(f"{spec!r}: a partition takes @SECONDS[+DURATION], no =VALUE ({NET_SYNTAX})")
        duration = None if match["dur"] is None else _number(match["dur"], "DURATION", spec)
        if duration is not None and duration <= 0:
            raise FaultError(f"{spec!r}: DURATION must be > 0")
        return Fault(Target.NET, action, _number(match["at"], "SECONDS", spec), duration, link)
    unit = "MS" if action is Action.DELAY else "PCT"
    if match["value"] is None or match["at"] is not None:
        raise FaultError(f"{spec!r}: net:{action} takes ={unit} and holds for the whole run, "
                         f"no @SECONDS ({NET_SYNTAX})")
    value = _number(match["value"], unit, spec)
    if value > _NET_LIMIT[action] or (action is Action.LOSS and value <= 0):
        raise FaultError(f"{spec!r}: {unit} must be in {'(0' if action is Action.LOSS else '[0'}, "
                         f"{_NET_LIMIT[action]:g}], got {match['value']}")
    return Fault(Target.NET, action, 0.0, None, link, value)


def _net_label(fault: Fault) -> str:
    if fault.action is Action.PARTITION:
        dur = f"+{fault.duration_s:g}" if fault.duration_s is not None else ""
        return f"net:{fault.action}:{fault.link}@{fault.at_s:g}{dur}"
    return f"net:{fault.action}:{fault.link}={fault.value:g}"


def check(faults: Iterable[Fault], trial_s: float, workers: int | None = None) -> None:
    """Instants against the trial's length: mid-trial faults inside it, broker restarts after it;
    a named worker among the ``workers`` started."""
    for fault in faults:
        if fault.worker and workers is not None and int(fault.worker[1:]) > workers:
            raise FaultError(f"{fault.label}: there is no worker {fault.worker} with --workers "
                             f"{workers} (w1..w{workers})")
        if fault.between_trials and fault.at_s < trial_s:
            raise FaultError(f"{fault.label}: the broker is restarted between trials; "
                             f"use @SECONDS >= --seconds ({trial_s:g})")
        if not fault.between_trials and fault.at_s >= trial_s:
            raise FaultError(f"{fault.label}: @{fault.at_s:g} is not inside the trial "
                             f"(--seconds {trial_s:g}); use 0 <= SECONDS < {trial_s:g}")


def label(faults: Iterable[Fault]) -> str:
    """The ``fault`` column: every fault of the trial, ``;``-separated ('' for none)."""
    return ";".join(f.label for f in faults)
