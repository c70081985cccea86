"""Which workers are alive: their heartbeats during a trial, a ping between trials (pure).

Each worker beats from a process of its own (``worker.heartbeat``: outside the GIL its client
threads hold), a new number every quarter second while the worker runs and is not stopped. A
worker whose task shows no new sign (status or beat) for longer than the silence limit
(``--worker-silence``) is **lost** at that moment, not at the trial's end; one that fell silent
for more than half the limit and came back is **slow** (alive, but late: paused for a while).
Between trials every worker must answer a ping within the limit. A lost worker gets no share in
later trials; ``--on-worker-loss`` says whether the run goes on with the survivors (clients re-
split) or stops.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from model.wire import BEAT

SLOW_SHARE = 0.5  # silent for more than this share of the limit, then heard again: slow
READY_OK, READY_FAILED = frozenset({"SUCCESS"}), frozenset({"FAILURE", "REVOKED"})


class LossPolicy(enum.StrEnum):
    """``--on-worker-loss``: what the run does once a worker is lost."""

    CONTINUE = "continue"  # later trials on the survivors, clients re-split; the run is degraded
    FAIL = "fail"  # stop after the trial (or the ping) that lost it


class Health(enum.StrEnum):
    """One worker's task in one trial, as the coordinator follows it."""

    RUNNING = "running"  # beating (or not yet silent for the limit)
    DONE = "done"  # its result arrived
    FAILED = "failed"  # its task raised
    LOST = "lost"  # silent for longer than the limit
    KILLED = "killed"  # our own fault injector killed it (--fault worker:kill)


class LossCause(enum.StrEnum):
    SILENT = "silent"  # no heartbeat during a trial
    NO_PING = "no ping answer"  # no answer to the ping between trials


class WorkersLost(RuntimeError):
    """A worker was lost: the run went on degraded, or stopped (``--on-worker-loss fail``)."""


@dataclass(frozen=True)
class Loss:
    worker: str
    cause: LossCause
    trial: int  # the trial it was lost in (a ping loss: the trial about to start)
    silent_s: float  # how long nothing was heard from it
    limit_s: float
    at_ns: int  # wall clock when the coordinator declared it lost

    def describe(self) -> str:
        what = "silent" if self.cause is LossCause.SILENT else "no answer to the ping for"
        return f"{what} {self.silent_s:.1f} s (limit {self.limit_s:g} s)"

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "cause": self.cause.value, "trial": self.trial,
                "silent_s": round(self.silent_s, 3), "limit_s": self.limit_s,
                "at_ns": self.at_ns, "detail": self.describe()}


@dataclass
class Watch:
    """One task's signs of life: the last new (status, beat) and when it was heard."""

    worker: str
    heard: float  # monotonic; the dispatch until the first sign
    sign: tuple[str, Any] = ("PENDING", None)
    longest_s: float = 0.0  # the longest silence between two signs
    looked: float | None = None  # monotonic: the last reading (the sign seen then or before)
    health: Health = Health.RUNNING
    loss: Loss | None = None


class Liveness:
    """The watches of one trial's tasks; ``observe`` each poll's reading of each task."""

    def __init__(self, workers: Sequence[str], silence_s: float, trial: int = 0,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.silence_s, self.trial, self._now = silence_s, trial, now
        start = now()
        self.watches = {w: Watch(w, start) for w in workers}

    def observe(self, worker: str, status: str, info: object) -> Health:
        """The task's status and meta as just read; its health after it (LOST at most once)."""
        watch = self.watches[worker]
        if watch.health is not Health.RUNNING:
            return watch.health
        now = self._now()
        sign = (status, info.get(BEAT) if isinstance(info, Mapping) else None)
        looked, watch.looked = watch.looked, now
        if sign != watch.sign or status in READY_OK | READY_FAILED:
            # Silent for sure: from when the old sign was heard to the last reading that still
            # saw it. A pause of the coordinator's own (a starved CPU) is not the worker's.
            watch.longest_s = max(watch.longest_s, (looked or watch.heard) - watch.heard)
            watch.heard, watch.sign = now, sign
        elif now - watch.heard > self.silence_s:
            watch.health = Health.LOST
            watch.loss = Loss(worker, LossCause.SILENT, self.trial, now - watch.heard,
                              self.silence_s, time.time_ns())
            return watch.health
        if status in READY_OK:
            watch.health = Health.DONE
        elif status in READY_FAILED:
            watch.health = Health.FAILED
        return watch.health

    def kill(self, worker: str) -> None:
        """Our fault injector killed it: given up at once, not lost."""
        if self.watches[worker].health is Health.RUNNING:
            self.watches[worker].health = Health.KILLED

    def waiting(self) -> int:
        return sum(w.health is Health.RUNNING for w in self.watches.values())

    def lost(self) -> dict[str, Loss]:
        return {w.worker: w.loss for w in self.watches.values() if w.loss is not None}

    def slow(self) -> dict[str, float]:
        """Workers not lost that were once silent for more than half the limit: longest silence."""
        return {w.worker: round(w.longest_s, 3) for w in self.watches.values()
                if w.loss is None and w.longest_s > self.silence_s * SLOW_SHARE}


@dataclass
class Roster:
    """The run's workers: who takes part in the next trial, who was lost (and why), who was slow."""

    active: list[str]
    policy: LossPolicy
    silence_s: float
    lost: list[Loss] = field(default_factory=list)
    slow: list[dict[str, Any]] = field(default_factory=list)

    def record(self, trial: int, lost: Mapping[str, Loss], slow: Mapping[str, float]) -> None:
        """One trial's losses (out of every later trial) and slow workers."""
        for loss in lost.values():
            self.lose(loss)
        self.slow += [{"worker": w, "trial": trial, "longest_silence_s": s} for w, s in slow.items()]

    def lose(self, loss: Loss) -> None:
        self.lost.append(loss)
        self.active = [w for w in self.active if w != loss.worker]

    @property
    def degraded(self) -> bool:
        return bool(self.lost)

    def describe(self) -> str:
        """One line: who was lost, when and why."""
        return (f"{len(self.lost)} worker{'s' * (len(self.lost) != 1)} lost ("
                + "; ".join(f"{x.worker} in trial {x.trial}: {x.describe()}" for x in self.lost)
                + f"); {len(self.active)} left")

    def to_json(self) -> dict[str, Any]:
        return {"silence_s": self.silence_s, "on_worker_loss": self.policy.value,
                "active": list(self.active), "lost": [x.to_json() for x in self.lost],
                "slow": list(self.slow)}
