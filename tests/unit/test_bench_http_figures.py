"""Benchmark 8's ratios (pure): paired round by round, Locust's best over every process count."""

from __future__ import annotations

from bench.http import HttpFigures
from bench.locust_bench import LocustRun


def test_the_ratios_pair_the_rounds_and_take_locusts_best() -> None:
    figures = HttpFigures(ours=[6_000.0, 3_000.0, 8_000.0], floor=[10_000.0, 10_000.0, 10_000.0],
                          locust=[LocustRun("StaticGet", 1, 1, 0, 2_000.0),
                                  LocustRun("StaticGet", 2, 1, 0, 4_000.0)],
                          wrk=[30_000.0, 30_000.0, 20_000.0])
    assert figures.paired("floor") == [0.6, 0.3, 0.8]
    assert figures.ratios() == {"floor": 0.6, "locust": 1.5, "wrk": 0.2}
    assert figures.ratio_line() == (
        "[8] ours / floor: 0.60 (median of the rounds' 0.60, 0.30, 0.80; target >= 0.7); "
        "ours / Locust best: 1.50 x (target >= 1.0); ours / wrk: 0.20")
    missing = HttpFigures(ours=[1.0], floor=[2.0])
    assert missing.ratios() == {"floor": 0.5, "locust": None, "wrk": None}
    assert "Locust best: n/a" in missing.ratio_line()


def test_the_asyncio_ratios_take_the_same_floor_locust_and_wrk() -> None:
    figures = HttpFigures(ours=[6_000.0], floor=[10_000.0], ours_asyncio=[9_000.0],
                          locust=[LocustRun("StaticGet", 2, 1, 0, 4_000.0)], wrk=[30_000.0])
    on_asyncio = figures.on_asyncio()
    assert on_asyncio is not None
    assert on_asyncio.ratios() == {"floor": 0.9, "locust": 2.25, "wrk": 0.3}
    assert on_asyncio.ratio_line("ours on asyncio clients").startswith(
        "[8] ours on asyncio clients / floor: 0.90 (median of the rounds' 0.90; target >= 0.7); "
        "ours on asyncio clients / Locust best: 2.25 x")
    assert HttpFigures(ours=[1.0], floor=[2.0]).on_asyncio() is None
