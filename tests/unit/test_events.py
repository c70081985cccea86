"""Expiry events and herds (results.figures.events): pure attribution over synthetic calls and events.

The first test reproduces the drift seen on a real run: later expiries come one TTL
after the previous herd's last fill, so herds slide against the window of whole TTL periods.
"""

from __future__ import annotations

import math

import pyarrow as pa

from results.figures import events, expiry_reports
from results.figures.events import EventPlan
from results.figures.expiry_reports import Event, Source

S = 1_000_000_000
MS = 1_000_000
TTL = 2 * S


def rows(calls: list[tuple[str, int, int, int]]) -> pa.Table:
    """Request rows that reached the origin: (key, origin start, origin ns, refresh_of_ns)."""
    return pa.table({
        "key": [c[0] for c in calls],
        "origin_called": pa.array([1] * len(calls), pa.int8()),
        "origin_start_ns": pa.array([c[1] for c in calls], pa.int64()),
        "origin_ns": pa.array([c[2] for c in calls], pa.int64()),
        "refresh_of_ns": pa.array([c[3] for c in calls], pa.int64()),
    })


def herd(at: int, size: int, spread: int, key: str = "orders:0") -> list[tuple[str, int, int, int]]:
    """``size`` calls of 3 ms starting evenly over ``spread`` after ``at``."""
    return [(key, at + 2 * MS + i * spread // size, 3 * MS, 0) for i in range(size)]


def plan(window: tuple[int, int], periods: int) -> EventPlan:
    return EventPlan(window, first_expiry_ns=2 * S, ttl_ns=TTL, periods=periods, aligned=False)


def in_window_calls(calls: list[tuple[str, int, int, int]], window: tuple[int, int]) -> int:
    return sum(window[0] <= c[1] < window[1] for c in calls)


def test_drifting_herds_are_counted_whole_per_observed_expiry() -> None:
    # 200 clients; expiries at 2.00 s (scheduled), 4.61 s and 7.13 s (drifted), window 1-7 s:
    # the third herd is outside, the first two are whole -> 200 per expiry, not 398 / 3.
    calls = herd(2 * S, 200, 570 * MS) + herd(4_610 * MS, 198, 490 * MS) + herd(7_130 * MS, 159, 410 * MS)
    observed = [Event("orders:0", t, Source.EXPIRED) for t in (2 * S, 4_610 * MS, 7_130 * MS)]
    window = (1 * S, 7 * S)
    figures, herds = events.trial_events(rows(calls), observed, plan(window, 3),
                                         in_window_calls(calls, window))
    assert figures["expiry_events"] == 2
    assert figures["origin_per_expiry"] == 199.0
    assert figures["herd_max"] == 200
    assert figures["origin_per_period"] == (200 + 198) / 3  # the old figure, kept as cross-check
    assert figures["per_period_differs"]
    assert [h.size for h in herds] == [200, 198, 159]
    assert herds[0].event.scheduled_ns == 2 * S  # the first expiry is at its scheduled instant
    assert herds[1].event.scheduled_ns is None  # drifted: no schedule to compare with


def test_a_herd_crossing_the_window_end_counts_whole() -> None:
    # window 1-5 s; the second herd runs 4.6-5.3 s: half of it after the window's end.
    calls = herd(2 * S, 100, 500 * MS) + herd(4_600 * MS, 100, 700 * MS)
    observed = [Event("orders:0", t, Source.EXPIRED) for t in (2 * S, 4_600 * MS)]
    window = (1 * S, 5 * S)
    figures, _ = events.trial_events(rows(calls), observed, plan(window, 2),
                                     in_window_calls(calls, window))
    assert figures["origin_per_expiry"] == 100.0
    assert figures["window_origin_calls"] < 200  # what a per-window count would have seen


def test_one_fill_per_expiry_is_one_even_when_the_fill_lands_late() -> None:
    # two-level: the local copy hides the Redis expiry; the refill comes 300 ms after it.
    calls = [("orders:0", 2_300 * MS, 4 * MS, 0), ("orders:0", 5_100 * MS, 4 * MS, 0)]
    observed = [Event("orders:0", t, Source.EXPIRED) for t in (2 * S, 4_900 * MS)]
    window = (1 * S, 7 * S)
    figures, _ = events.trial_events(rows(calls), observed, plan(window, 3),
                                     in_window_calls(calls, window))
    assert figures["origin_per_expiry"] == 1.0
    assert figures["origin_per_period"] < 1.0


def test_a_call_just_before_the_late_stamped_report_belongs_to_it() -> None:
    # The listener stamps an event when it receives it: the first miss can start a little earlier.
    calls = [("orders:0", 1_995 * MS, 3 * MS, 0)]
    found = events.attribute(events.origin_calls(rows(calls)),
                             [Event("orders:0", 2 * S, Source.EXPIRED)], 50 * MS, TTL // 2)
    assert found.unattributed == 0
    assert found.herds[0].size == 1
    # the call proves the value was gone before the report came: the event moves to it
    assert found.herds[0].event.at_ns == 1_995 * MS
    assert found.herds[0].event.reported_ns == 2 * S


def test_calls_of_a_cold_key_are_unattributed_not_counted() -> None:
    calls = [("product:7", 2 * S, 3 * MS, 0)]
    found = events.attribute(events.origin_calls(rows(calls)), [], 50 * MS, TTL // 2)
    assert found.unattributed == 1
    assert found.herds == []


def test_early_refreshes_of_one_generation_are_one_refresh_cycle_with_its_expiry() -> None:
    # XFetch without a lock: 30 readers refresh values whose stamps lie within the herd that
    # wrote them (2.00-2.30 s), one more misses when the value expires: one event of 31 calls.
    stamps = [2 * S + i * 10 * MS for i in range(30)]
    calls = [("orders:0", s - 100 * MS, 3 * MS, s) for s in stamps] + [("orders:0", 2_310 * MS, 3 * MS, 0)]
    observed = [Event("orders:0", 2_305 * MS, Source.EXPIRED)]
    found = events.attribute(events.origin_calls(rows(calls)), observed, 50 * MS, TTL // 2)
    assert [h.size for h in found.herds] == [31]
    assert found.herds[0].event.source is Source.EXPIRED


def test_refresh_cycles_a_ttl_apart_are_separate_events() -> None:
    calls = [("orders:0", 1_900 * MS, 3 * MS, 2 * S), ("orders:0", 3_900 * MS, 3 * MS, 4 * S)]
    found = events.attribute(events.origin_calls(rows(calls)), [], 50 * MS, TTL // 2)
    assert [(h.event.source, h.size) for h in found.herds] == [(Source.REFRESH, 1), (Source.REFRESH, 1)]
    assert events.event_kind(found.herds) == "refresh cycle"


def test_reports_of_one_key_within_the_tolerance_are_one_event() -> None:
    observed = [Event("k", t, Source.EXPIRED) for t in (2 * S, 2 * S + 10 * MS, 2 * S + 30 * MS, 4 * S)]
    merged = expiry_reports.merge_close(observed, 50 * MS)
    assert [e.at_ns for e in merged] == [2 * S, 4 * S]


def test_aligned_expiries_carry_their_scheduled_boundary() -> None:
    observed = [Event("k", t, Source.EXPIRED) for t in (2 * S + 3 * MS, 4 * S + 1 * MS)]
    marked = expiry_reports.with_schedule(observed, 2 * S, TTL, aligned=True)
    assert [e.scheduled_ns for e in marked] == [2 * S, 4 * S]
    drift = expiry_reports.with_schedule(observed, 2 * S, TTL, aligned=False)
    assert [e.scheduled_ns for e in drift] == [2 * S, None]


def test_no_event_in_the_window_gives_nan_not_zero() -> None:
    figures = events.figures([], 0, 0, 3)
    assert math.isnan(figures["origin_per_expiry"])
    assert figures["expiry_events"] == 0
