"""Pure logic of the strategies: XFetch's decision over many draws, jitter, envelope, specs."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

import strategies
from strategies import envelope
from strategies.params import LockErrorPolicy, Ttl, Wake
from strategies.xfetch import draw, should_recompute

Decide = Callable[[float, float, float, float, float], bool]
DRAWS = 40_000


def reversed_sign(now_s: float, expiry_s: float, delta_s: float, beta: float, rand: float) -> bool:
    """Experiment 000's defect: ``+`` where the paper has ``-``."""
    return now_s + delta_s * beta * math.log(rand) >= expiry_s


def fraction(decide: Decide, left_s: float, delta_s: float, beta: float, seed: int = 7) -> float:
    rng = random.Random(seed)
    now = 1_000.0
    hits = sum(decide(now, now + left_s, delta_s, beta, 1.0 - rng.random()) for _ in range(DRAWS))
    return hits / DRAWS


def matches_theory(decide: Decide, left_s: float, delta_s: float, beta: float) -> bool:
    """Within 5 standard errors of exp(-D / (beta * delta))."""
    expected = math.exp(-left_s / (beta * delta_s))
    tolerance = 5 * math.sqrt(max(expected * (1 - expected), 1e-6) / DRAWS)
    return abs(fraction(decide, left_s, delta_s, beta) - expected) <= tolerance


@pytest.mark.parametrize(("left_s", "delta_s", "beta"),
                         [(0.005, 0.005, 1.0), (0.02, 0.005, 1.0), (0.05, 0.005, 10.0),
                          (0.3, 0.004, 100.0)])
def test_xfetch_recompute_rate_matches_theory(left_s: float, delta_s: float, beta: float) -> None:
    assert matches_theory(should_recompute, left_s, delta_s, beta)


@pytest.mark.parametrize(("left_s", "delta_s", "beta"), [(0.005, 0.005, 1.0), (0.05, 0.005, 10.0)])
def test_the_same_check_catches_a_reversed_sign(left_s: float, delta_s: float, beta: float) -> None:
    assert not matches_theory(reversed_sign, left_s, delta_s, beta)


def test_xfetch_never_recomputes_far_from_expiry() -> None:
    assert fraction(should_recompute, left_s=10.0, delta_s=0.005, beta=1.0) == 0.0


def test_larger_beta_recomputes_earlier() -> None:
    rates = [fraction(should_recompute, 0.05, 0.005, beta) for beta in (1.0, 10.0, 100.0)]
    assert rates[0] < rates[1] < rates[2]


def test_xfetch_always_recomputes_once_expired() -> None:
    assert fraction(should_recompute, left_s=-0.001, delta_s=0.005, beta=1.0) == 1.0


def test_draw_is_in_half_open_unit_interval() -> None:
    values = [draw() for _ in range(10_000)]
    assert all(0.0 < v <= 1.0 for v in values)


def test_jitter_spreads_ttl_within_bounds() -> None:
    ttl = Ttl(2000, 0.2)
    values = [ttl.draw_ms() for _ in range(5_000)]
    assert min(values) >= 1600 and max(values) <= 2400
    assert min(values) < 1700 and max(values) > 2300  # it really spreads
    assert {Ttl(2000, 0.0).draw_ms() for _ in range(100)} == {2000}


def test_envelope_round_trip_keeps_expiry_and_delta() -> None:
    packed = envelope.pack(b"value", 1_700_000_000_123_456, 0.00343)
    value = envelope.unpack(packed)
    assert value == (b"value", 1_700_000_000_123_456, 0.00343)
    assert value.left_us(1_700_000_000_000_000) == 123_456
    with pytest.raises(ValueError, match="no envelope header"):
        envelope.unpack(b"short")


def test_common_parameters_parse_for_every_strategy() -> None:
    for name in ("lock", "lock-dc", "xfetch-lock", "swr", "local-lock", "two-level"):
        spec = strategies.parse(f"{name}:jitter=0.2,wake=notify,on_lock_error=closed")
        assert spec.params["wake"] is Wake.NOTIFY
        assert spec.params["on_lock_error"] is LockErrorPolicy.CLOSED
        assert "on_lock_error=closed" in spec.label
    assert strategies.parse("xfetch:beta=10").params["beta"] == 10.0
    assert strategies.parse("naive:jitter=0.1").params["jitter"] == 0.1


@pytest.mark.parametrize(("text", "message"), [
    ("lock:wake=shout", "wake='shout' is not one of poll|notify"),
    ("lock-dc:on_lock_error=maybe", "is not one of open|closed"),
    ("xfetch:beta=0", "beta must be > 0"),
    ("naive:jitter=1.5", "jitter must be in [0, 1)"),
    ("swr:hard_factor=1", "hard_factor must be > 1"),
    ("xfetch:delta=wall", "is not one of origin|refill"),
])
def test_bad_strategy_parameters_say_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(strategies.InvalidStrategy, match=message.replace("[", r"\[").replace(
            "(", r"\(").replace(")", r"\)").replace("|", r"\|")):
        strategies.parse(text)


def test_every_issue_strategy_is_registered() -> None:
    expected = {"naive", "lock", "lock-dc", "xfetch", "xfetch-lock", "swr", "lease",
                "local-lock", "two-level"}
    assert expected <= set(strategies.names())
