"""The experiment plan: a pure object, apart from any transport, tested on its own.

Time line of one trial (coordinator clock)::

    start ── warm-up ──┬── TTL ──┬── TTL ──┬ ... ┬── end of window ── end
                       │    ^expiry       ^expiry
                       window start

The window is whole TTL periods, the first expiry in the middle of the first. Later expiries
drift (each comes one TTL after the last fill of the herd before it), so the events counted are
the ones the cache server reports in the window (``results.figures.events``), each with its whole herd:
the trial runs a drain of half a TTL (at most ``DRAIN_MAX_S``) past the window for the last herd.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

from model.http.target import HttpTarget
from strategies import StrategySpec

DRAIN_MAX_S = 1.0


class ExpiryMode(enum.StrEnum):
    """When values expire after the first, synchronized, expiry of a trial."""

    DRIFT = "drift"  # one TTL after each fill (experiment 000): later expiries drift by the herd
    ALIGNED = "aligned"  # at the next boundary of the trial's common clock: every expiry in step
    # A black-box service's cache (--service-url): the tool deletes the keys at the first expiry
    # instant and every TTL after it (coordinator.blackbox.deletes), the service refills them.
    SCHEDULED_DELETE = "scheduled-delete"


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
    variant: str = ""  # what else tells this trial from another of the same strategy (app processes)
    # An HTTP trial (issue 32): the client threads GET this target instead of running the
    # strategy themselves; ``named``, when set, is what the strategy column says instead of the
    # strategy's label (a raw target's URL template: no strategy of ours ran).
    http: HttpTarget | None = None
    named: str = ""

    @property
    def label(self) -> str:
        """The trial's strategy column: the strategy's label (or what ``named`` says), with its
        variant when the run varies something beside the strategy (``lock-dc @2 apps``)."""
        base = self.named or self.strategy.label
        return f"{base} @{self.variant}" if self.variant else base

    @property
    def period_events(self) -> int:
        """TTL periods x primed keys: the per-period cross-check's count of events."""
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

    @property
    def drain_s(self) -> float:
        return drain_s(self.ttl_s)

    def periods(self) -> int:
        """Whole TTL periods that fit between warm-up and the drain before the trial's end."""
        return math.floor((self.seconds - self.warmup_s - self.drain_s) / self.ttl_s + 1e-9)

    def check(self) -> None:
        if self.clients < self.workers:
            raise PlanError(
                f"--clients {self.clients} is fewer than --workers {self.workers}: "
                "every worker needs at least one client"
            )
        if self.periods() < 1:
            raise PlanError(
                f"--seconds {self.seconds:g} leaves no whole TTL period between the "
                f"{self.warmup_s:g} s warm-up and the {self.drain_s:g} s drain: use --seconds >= "
                f"{self.warmup_s + self.ttl_s + self.drain_s:g}"
            )


def drain_s(ttl_s: float) -> float:
    """Time after the window for the last counted herd to finish: half a TTL, at most 1 s."""
    return min(ttl_s / 2, DRAIN_MAX_S)


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


def with_http_target(plan: TrialPlan, target: HttpTarget | None, name: str = "") -> TrialPlan:
    """``plan`` as an HTTP trial against a raw ``target`` (its strategy column ``name``, or the
    target's URL template); unchanged when there is none or the plan has a target of its own."""
    if target is None or plan.http is not None:
        return plan
    return replace(plan, http=target, named=name or target.url_template)
