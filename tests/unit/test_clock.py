"""Clock alignment logic (pure) and the spread column (the origin check: tests/integration)."""

from __future__ import annotations

import time

import pytest

from coordinator.defaults import Timing
from coordinator.trials import clock
from results.outputs import table


def test_offset_comes_from_the_fastest_round_trip() -> None:
    delays = iter([0.02, 0.002, 0.03])
    skew_ns = 5_000_000_000  # the worker's clock is 5 s ahead

    def ask() -> int:
        delay = next(delays)
        time.sleep(delay / 2)
        theirs = time.time_ns() + skew_ns
        time.sleep(delay / 2)
        return theirs

    got = clock.measure_one(ask, rounds=3)
    assert got["rounds"] == 3
    assert got["rtt_min_ns"] <= got["rtt_median_ns"]
    assert got["uncertainty_ns"] == got["rtt_min_ns"] // 2
    assert abs(got["offset_ns"] - skew_ns) <= got["uncertainty_ns"]


def _offsets(uncertainty_ms: float, rtt_ms: float = 2.0) -> dict[str, dict[str, int]]:
    return {"w1@a": {"offset_ns": 0, "uncertainty_ns": int(uncertainty_ms * 1e6),
                     "rtt_min_ns": int(rtt_ms * 1e6), "rtt_median_ns": int(rtt_ms * 1e6)}}


def test_too_uncertain_clock_is_refused_unless_forced() -> None:
    assert clock.check_uncertainty(_offsets(90), ttl_s=2.0, force=False) == []  # 4.5% of 2 s
    with pytest.raises(clock.ClockError, match=r"w1@a ±110\.0 ms.*--force-clock"):
        clock.check_uncertainty(_offsets(110), ttl_s=2.0, force=False)
    warnings = clock.check_uncertainty(_offsets(110), ttl_s=2.0, force=True)
    assert len(warnings) == 1 and "w1@a" in warnings[0]


def test_lead_adapts_to_the_slowest_round_trip() -> None:
    timing = Timing(lead_s=1.5)
    assert clock.lead_s(_offsets(1, rtt_ms=2), timing) == 1.5
    assert clock.lead_s(_offsets(1, rtt_ms=100), timing) == pytest.approx(5.0)


def test_table_shows_the_worst_start_spread() -> None:
    row = {"strategy": "naive", "origin_per_expiry": 2.0, "rps": 10.0, "p50_ms": 1.0,
           "p99_ms": 2.0, "requests": 10, "errors": 0, "waits": 0, "stale_served": 0,
           "peak_origin_inflight": 2, "db_calls_match": True, "below_floor": False,
           "origin_calls_total": 4, "db_calls": 4}
    text = table.render([{**row, "start_spread_ms": 1.25}, {**row, "start_spread_ms": 3.5}])
    header, _, line = text.splitlines()
    assert "spread ms" in header
    at = header.index("spread ms")
    assert line[at:at + len("spread ms")].strip() == "3.5"
