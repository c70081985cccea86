"""The experiment plan: a pure object, apart from any transport, tested on its own.

Time line of one trial (coordinator clock)::

    start ── warm-up ──┬── TTL ──┬── TTL ──┬ ... ┬── end of window ── end
                       │    ^expiry       ^expiry
                       window start

The window is whole TTL periods with one expiry in the middle of each, so a few
milliseconds of refill drift per period cannot push an expiry event out of the window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from strategies import StrategySpec


class PlanError(ValueError):
    """Options that cannot make a valid plan (reported as bad input)."""


@dataclass(frozen=True)
class WorkerShare:
    index: int
    client_base: int
    clients: int


@dataclass(frozen=True)
class TrialPlan:
    trial: int
    strategy: StrategySpec
    repeat: int
    start_ns: int
    end_ns: int
    window_start_ns: int
    window_end_ns: int
    first_expiry_ns: int
    ttl_ms: int
    periods: int
    keys: tuple[str, ...]
    shares: tuple[WorkerShare, ...]

    @property
    def expiry_events(self) -> int:
        return self.periods * len(self.keys)

    @property
    def window_s(self) -> float:
        return (self.window_end_ns - self.window_start_ns) / 1e9


@dataclass(frozen=True)
class Schedule:
    """What each trial shares: counts and durations, before start instants are known."""

    workers: int
    clients: int
    ttl_s: float
    seconds: float
    warmup_s: float
    keys: tuple[str, ...]

    def periods(self) -> int:
        """Whole TTL periods that fit between warm-up and the trial's end."""
        return math.floor((self.seconds - self.warmup_s) / self.ttl_s + 1e-9)

    def check(self) -> None:
        if self.clients < self.workers:
            raise PlanError(
                f"--clients {self.clients} is fewer than --workers {self.workers}: "
                "every worker needs at least one client"
            )
        if self.periods() < 1:
            raise PlanError(
                f"--seconds {self.seconds:g} leaves no whole TTL period after the "
                f"{self.warmup_s:g} s warm-up: use --seconds >= {self.warmup_s + self.ttl_s:g}"
            )


def split_clients(total: int, workers: int) -> tuple[WorkerShare, ...]:
    """Spread ``total`` clients over ``workers`` as evenly as possible (first ones get more)."""
    base, extra = divmod(total, workers)
    shares, offset = [], 0
    for index in range(workers):
        count = base + (1 if index < extra else 0)
        shares.append(WorkerShare(index, offset, count))
        offset += count
    return tuple(shares)


def trial_order(specs: list[StrategySpec], repeat: int) -> list[tuple[StrategySpec, int]]:
    """Repeats interleave strategies (r1: a, b; r2: a, b) so drift hits all of them alike."""
    return [(spec, r) for r in range(1, repeat + 1) for spec in specs]


def plan_trial(schedule: Schedule, trial: int, spec: StrategySpec, repeat: int,
               now_ns: int, lead_s: float) -> TrialPlan:
    """Place one trial on the clock, starting ``lead_s`` after ``now_ns``."""
    schedule.check()
    ttl_ns = round(schedule.ttl_s * 1e9)
    start = now_ns + round(lead_s * 1e9)
    window_start = start + round(schedule.warmup_s * 1e9)
    periods = schedule.periods()
    return TrialPlan(
        trial=trial,
        strategy=spec,
        repeat=repeat,
        start_ns=start,
        end_ns=start + round(schedule.seconds * 1e9),
        window_start_ns=window_start,
        window_end_ns=window_start + periods * ttl_ns,
        first_expiry_ns=window_start + ttl_ns // 2,
        ttl_ms=round(schedule.ttl_s * 1000),
        periods=periods,
        keys=schedule.keys,
        shares=split_clients(schedule.clients, schedule.workers),
    )
