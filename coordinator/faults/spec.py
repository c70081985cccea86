"""Fault specs: ``TARGET:ACTION@SECONDS[+DURATION]``, parsed and checked, apart from any process.

Every trial of a run gets the same faults at the same instants (seconds from the trial's start),
so each strategy is measured under the same failure. ``broker:restart`` is the one fault that
acts between trials: its instant must lie at or after the trial's end.
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


class Action(enum.StrEnum):
    KILL = "kill"  # SIGKILL the process; the stack restarts it before the next trial
    PAUSE = "pause"  # SIGSTOP, SIGCONT after the duration (or at the trial's end)
    LOCK = "lock"  # hold an ACCESS EXCLUSIVE lock on ``orders``: every origin query blocks
    EXHAUST = "exhaust"  # hold every free PostgreSQL connection slot: new connections fail
    RESTART = "restart"  # stop and start again on the same port, between trials


ALLOWED: dict[Target, tuple[Action, ...]] = {
    Target.LOCK_STORE: (Action.KILL, Action.PAUSE),
    Target.CACHE: (Action.KILL, Action.PAUSE),
    Target.ORIGIN: (Action.LOCK, Action.EXHAUST),
    Target.WORKER: (Action.KILL,),
    Target.BROKER: (Action.RESTART,),
}
# Faults that last: without ``+DURATION`` they last until the trial's end.
LASTING = (Action.PAUSE, Action.LOCK, Action.EXHAUST)
SYNTAX = "TARGET:ACTION@SECONDS[+DURATION], e.g. lock-store:kill@5 or origin:lock@3+2"
_SPEC = re.compile(r"^(?P<target>[a-z-]+):(?P<action>[a-z]+)@(?P<at>[^+]+)(?:\+(?P<dur>.+))?$")


@dataclass(frozen=True)
class Fault:
    target: Target
    action: Action
    at_s: float
    duration_s: float | None = None

    @property
    def label(self) -> str:
        dur = f"+{self.duration_s:g}" if self.duration_s is not None else ""
        return f"{self.target}:{self.action}@{self.at_s:g}{dur}"

    @property
    def between_trials(self) -> bool:
        return self.action is Action.RESTART

    def end_s(self, trial_s: float) -> float:
        """When the fault's effect ends (seconds from the trial's start).

        A lasting fault is lifted after its duration (or at the trial's end); a killed process
        stays dead until the stack restarts it between trials.
        """
        if self.between_trials:
            return self.at_s
        if self.action in LASTING and self.duration_s:
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
    at_s = _number(match["at"], "SECONDS", spec)
    duration = None
    if match["dur"] is not None:
        if action not in LASTING:
            raise FaultError(f"{spec!r}: {action} takes no +DURATION "
                             f"(only {', '.join(a.value for a in LASTING)} do)")
        duration = _number(match["dur"], "DURATION", spec)
        if duration <= 0:
            raise FaultError(f"{spec!r}: DURATION must be > 0")
    return Fault(target, action, at_s, duration)


def check(faults: Iterable[Fault], trial_s: float) -> None:
    """Instants against the trial's length: mid-trial faults inside it, broker restarts after it."""
    for fault in faults:
        if fault.between_trials and fault.at_s < trial_s:
            raise FaultError(f"{fault.label}: the broker is restarted between trials; "
                             f"use @SECONDS >= --seconds ({trial_s:g})")
        if not fault.between_trials and fault.at_s >= trial_s:
            raise FaultError(f"{fault.label}: @{fault.at_s:g} is not inside the trial "
                             f"(--seconds {trial_s:g}); use 0 <= SECONDS < {trial_s:g}")


def label(faults: Iterable[Fault]) -> str:
    """The ``fault`` column: every fault of the trial, ``;``-separated ('' for none)."""
    return ";".join(f.label for f in faults)
