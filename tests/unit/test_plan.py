"""The planner is pure: client split, window of whole TTL periods, start instant."""

from __future__ import annotations

import pytest

import strategies
from coordinator.trials.plan import PlanError, Schedule, plan_trial, split_clients, trial_order


def schedule(**overrides: object) -> Schedule:
    base = {"workers": 8, "clients": 200, "ttl_s": 2.0, "seconds": 10.0, "warmup_s": 1.0,
            "keys": ("orders:0",)}
    base.update(overrides)
    return Schedule(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("total", "workers", "expected"), [
    (200, 8, [25] * 8),
    (10, 3, [4, 3, 3]),
    (3, 3, [1, 1, 1]),
    (7, 1, [7]),
])
def test_split_clients_is_even_and_complete(total: int, workers: int, expected: list[int]) -> None:
    shares = split_clients(total, workers)
    assert [s.clients for s in shares] == expected
    assert [s.client_base for s in shares] == [sum(expected[:i]) for i in range(workers)]
    assert [s.index for s in shares] == list(range(workers))


def test_window_is_whole_ttl_periods_with_expiries_in_the_middle() -> None:
    plan = plan_trial(schedule(), 1, strategies.parse("lock"), 1, now_ns=10**18, lead_s=1.5)
    assert plan.start_ns == 10**18 + 1_500_000_000
    assert plan.window_start_ns == plan.start_ns + 1_000_000_000
    assert plan.periods == 4  # (10 - 1) / 2 -> 4 whole periods
    assert plan.window_end_ns - plan.window_start_ns == 4 * 2_000_000_000
    assert plan.first_expiry_ns == plan.window_start_ns + 1_000_000_000
    assert plan.end_ns == plan.start_ns + 10_000_000_000
    assert plan.window_end_ns <= plan.end_ns
    assert plan.period_events == 4
    assert plan.window_s == pytest.approx(8.0)


def test_period_events_count_every_key() -> None:
    keys = tuple(f"orders:{i}" for i in range(5))
    plan = plan_trial(schedule(keys=keys), 1, strategies.parse("naive"), 1, 0, 1.0)
    assert plan.period_events == plan.periods * 5


def test_exactly_fitting_periods_are_not_lost_to_rounding() -> None:
    # 3.05 s - 0.2 s warm-up - 0.05 s drain = 28 periods of 0.1 s, exactly
    assert schedule(seconds=3.05, ttl_s=0.1, warmup_s=0.2).periods() == 28


@pytest.mark.parametrize(("overrides", "message"), [
    ({"clients": 2, "workers": 3}, "--clients 2 is fewer than --workers 3"),
    ({"seconds": 2.5}, "use --seconds >= 4"),  # 1 s warm-up + 2 s TTL + 1 s drain
])
def test_impossible_schedules_are_refused(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        schedule(**overrides).check()


def test_repeats_interleave_strategies() -> None:
    a, b = strategies.parse("naive"), strategies.parse("lock")
    assert trial_order([a, b], 2) == [(a, 1), (b, 1), (a, 2), (b, 2)]
