"""Each asyncio library adapter keeps the contract (adapters/aio/base.py) on a real Redis: a
primed value is a hit in the library's own format, ``cached_version`` reads it, ``on_write``
deletes it and the next request fills; and the outcomes that need their own setting: soft's old
value when the recompute raises, hit's count, the lock's waiters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import redis

from adapters.aio import registry
from strategies.base import Outcome, Probe
from strategies.version import stamp
from tests.aio_helpers import KEY, Refreshes, SleepLoader, counts, deps, herd, run_herd

SPECS = ["cashews", "cashews:lock=true", "cashews-locked", "cashews-hit", "cashews-early",
         "cashews-soft", "aiocache", "aiocache-stampede"]
OLD = stamp(7, b"old")


@pytest.fixture
def url(redis_server: Callable[[str], str], cache: redis.Redis) -> str:
    return redis_server("cache")


@pytest.mark.parametrize("spec", SPECS)
def test_primed_hit_version_delete_and_fill(spec: str, url: str) -> None:
    loader = SleepLoader(0.01)

    async def scenario() -> list[object]:
        strategy = registry.build(spec, deps(url, loader, 4, Refreshes()))
        try:
            await strategy.prime(KEY, OLD, int(time.time() * 1000) + 10_000)
            hit, probe = await strategy.fetch(KEY, Probe()), Probe()
            held = await strategy.cached_version(KEY)
            await strategy.on_write(KEY, Probe())
            gone = await strategy.cached_version(KEY)
            filled = await strategy.fetch(KEY, probe)
            return [hit, held, gone, filled, probe.version_served, probe.version_set,
                    await strategy.cached_version(KEY)]
        finally:
            await strategy.aclose()

    assert asyncio.run(scenario()) == [Outcome.HIT, 7, None, Outcome.FILLED, 1, 1, 1]
    assert loader.calls == 1


class FailingLoader(SleepLoader):
    async def load(self, key: str, probe: Probe) -> bytes:
        await super().load(key, probe)
        raise ConnectionError("origin down")


def test_cashews_soft_serves_the_old_value_when_the_recompute_raises(url: str) -> None:
    loader = FailingLoader(0.01)

    async def scenario() -> tuple[Outcome, Probe]:
        strategy = registry.build("cashews-soft", deps(url, loader, 1))
        try:
            await strategy.prime(KEY, OLD, int(time.time() * 1000) - 200)  # soft point passed
            probe = Probe()
            return await strategy.fetch(KEY, probe), probe
        finally:
            await strategy.aclose()

    outcome, probe = asyncio.run(scenario())
    assert outcome is Outcome.STALE and probe.version_served == 7 and probe.origin_calls == 1
    assert probe.stale_age_ns >= 0.2e9


def test_cashews_hit_drops_the_value_after_cache_hits(url: str) -> None:
    loader = SleepLoader(0.01)

    async def scenario() -> list[Outcome]:
        strategy = registry.build("cashews-hit:cache_hits=3", deps(url, loader, 1))
        try:
            await strategy.prime(KEY, OLD, int(time.time() * 1000) + 10_000)
            return [await strategy.fetch(KEY, Probe()) for _ in range(5)]
        finally:
            await strategy.aclose()

    assert asyncio.run(scenario()) == [Outcome.HIT] * 3 + [Outcome.FILLED, Outcome.HIT]
    assert loader.calls == 1


def test_cashews_lock_true_waiters_wait_then_read_the_value(url: str) -> None:
    """``lock=True`` without protection: one fill, every other caller waited on the lock and
    then read the value under it (check-lock-read)."""
    loader, results = run_herd("cashews:lock=true,protected=false", url, 10)
    assert loader.calls == 1 and counts(results) == {"filled": 1, "waited": 9}
    assert all(p.lock_wait_ns > 0.05e9 for o, p in results if o is Outcome.WAITED)


def test_cashews_early_protected_joiners_are_stale_too(url: str) -> None:
    """With ``protected`` (its default) the callers of one process await one task: they get the
    old value it read, so they are ``stale`` as it is, and the one refresh is a row of its own."""
    loader, refreshes = SleepLoader(0.05), Refreshes()

    async def scenario() -> list[tuple[Outcome, Probe]]:
        strategy = registry.build("cashews-early", deps(url, loader, 20, refreshes))
        try:
            await strategy.prime(KEY, OLD, int(time.time() * 1000) - 300)
            results = await herd(strategy, 20)
            await asyncio.sleep(0.15)
            return results
        finally:
            await strategy.aclose()

    results = asyncio.run(scenario())
    assert counts(results) == {"stale": 20} and loader.calls == 1 and len(refreshes.probes) == 1
    assert all(p.stale_age_ns >= 0.3e9 and p.version_served == 7 for _, p in results)


def test_cashews_hit_update_after_refreshes_in_the_background(url: str) -> None:
    loader, refreshes = SleepLoader(0.01), Refreshes()

    async def scenario() -> list[Outcome]:
        strategy = registry.build("cashews-hit:cache_hits=5,update_after=2",
                                  deps(url, loader, 1, refreshes))
        try:
            await strategy.prime(KEY, OLD, int(time.time() * 1000) + 10_000)
            outcomes = [await strategy.fetch(KEY, Probe()) for _ in range(3)]
            await asyncio.sleep(0.05)
            return outcomes
        finally:
            await strategy.aclose()

    assert asyncio.run(scenario()) == [Outcome.HIT] * 3
    assert loader.calls == 1 and [p.origin_calls for p in refreshes.probes] == [1]
