"""The hits counted in bulk (simulate/bulk.py, simulate/latency.py): numpy batches cut before the
expiry (and before xfetch's early window), a histogram whose percentiles are the exact ones
within its bin width, the figures of the per-request path within a few per cent."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
import simpy

from simulate import bulk
from simulate.driver import Network, Origin, SimClock, SimDriver
from simulate.latency import Counted, Histogram
from simulate.metrics import Figures, figures
from simulate.store import SimStore
from simulate.world import KEY, WorldSpec, build, replicate

SMALL = WorldSpec("", app_servers=4, clients=10, ttl_s=0.3, think_ms=5.0, expiries=2)


def run(spec: WorldSpec, seed: int) -> Figures:
    return figures(replicate(spec, seed), spec.expiries, spec.ttl_s / 2)


def test_the_histogram_gives_numpys_percentiles_within_its_bin_width() -> None:
    seconds = np.random.default_rng(0).lognormal(np.log(2e-4), 0.5, 100_001)
    counted = Histogram()
    counted.add(seconds[:50_000])
    counted.add(seconds[50_000:])
    assert counted.total == seconds.size
    exact = np.percentile(seconds, [50, 99])
    assert counted.quantiles([0.5, 0.99]) == pytest.approx(exact, rel=1e-3)


def test_a_clients_last_batch_counts_only_the_hits_that_ended() -> None:
    counted = Counted()
    first, second = counted.enrol(), counted.enrol()
    counted.put(first, np.array([1.0, 2.0]), np.array([1e-4, 2e-4]))
    counted.put(second, np.array([3.0]), np.array([3e-4]))
    assert counted.ended(2.5).total == 2  # second's hit ends at 3.0
    counted.put(first, np.array([4.0]), np.array([1e-4]))  # first's batch before it is over
    assert (counted.done.total, counted.ended(3.0).total, counted.ended(9.0).total) == (2, 3, 4)


@pytest.mark.parametrize("strategy", ["naive", "lock-dc"])
def test_bulk_and_per_request_give_the_same_figures(strategy: str) -> None:
    """The draws differ, so the figures agree in distribution: hits within 2 %, p50 and p99
    within 3 %, every expiry found."""
    spec = replace(SMALL, strategy=strategy)
    for seed in range(2):
        counted, one_by_one = run(spec, seed), run(replace(spec, bulk_hits=False), seed)
        assert counted.events == one_by_one.events == spec.expiries
        assert counted.requests == pytest.approx(one_by_one.requests, rel=0.02)
        assert counted.p50_ms == pytest.approx(one_by_one.p50_ms, rel=0.03)
        assert counted.p99_ms == pytest.approx(one_by_one.p99_ms, rel=0.03)
        assert counted.errors == one_by_one.errors == 0


def test_bulk_counting_is_seeded_and_counts_most_hits() -> None:
    spec = replace(SMALL, strategy="naive")
    rec = replicate(spec, 5)
    found = figures(rec, spec.expiries, spec.ttl_s / 2)
    assert found == run(spec, 5) and found != run(spec, 6)
    assert rec.bulk.ended(rec.seconds).total > 0.9 * found.requests


def test_a_batch_stops_before_the_expiry() -> None:
    """No hit counted in bulk reaches the store at or after the instant the value expires:
    that request's answer (a miss) is the strategy's to decide."""
    env = simpy.Environment()
    clock = SimClock(env)
    cache, locks = SimStore(env, clock.wall_ms), SimStore(env, clock.wall_ms)
    strategy = build("naive", 50, clock, cache, locks, 3.0)
    strategy.prime(KEY, b"value", clock.wall_ms() + 50)  # expires at 0.05 s
    origin = Origin(env, 1, 4, 0.003, 0.25, random.Random(0))
    driver = SimDriver(env, (cache, locks), origin, Network(2e-4, random.Random(1)), 0)
    counted, draws, primed = Counted(), bulk.Draws(1e-4, 0.001, 3, 1), cache.commands
    next_start = bulk.hits(driver, KEY, counted, draws, 1.0, lambda raw: bulk.SAFETY_S)
    ends = counted.ended(1.0)
    assert 0.04 < next_start < 0.05 + 0.0015 and ends.total > 30
    (last_end,) = (e for e, _ in counted._last.values())
    assert float(last_end.max()) - 0.5e-4 < 0.05  # it reached the store 1/2 half-trip earlier
    assert driver.cache.commands - primed == ends.total


def test_xfetchs_early_refresh_is_decided_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """xfetch's hits are counted in bulk only before its early window (36 delta x beta before
    the expiry): its refreshes are those of the per-request path. Counting them in bulk up to
    the expiry (no window) takes every refresh away and the herds come back."""
    spec = replace(SMALL, strategy="xfetch", clients=25, expiries=3)
    for seed in range(2):
        rec = replicate(spec, seed)
        counted = figures(rec, spec.expiries, spec.ttl_s / 2)
        one_by_one = run(replace(spec, bulk_hits=False), seed)
        assert rec.bulk.ended(rec.seconds).total > 0.3 * counted.requests
        # every expiry but the first (the primed value's delta is a real microsecond or so)
        # refreshes early; the first may too, by chance, in either path
        assert min(counted.refresh_events, one_by_one.refresh_events) >= spec.expiries - 1
        assert counted.origin_per_expiry == pytest.approx(one_by_one.origin_per_expiry, rel=0.3)
        monkeypatch.setattr(bulk, "WINDOW_DELTAS", 0.0)
        windowless = run(spec, seed)
        assert windowless.refresh_events == 0
        assert windowless.origin_per_expiry > 1.5 * counted.origin_per_expiry
        monkeypatch.undo()
