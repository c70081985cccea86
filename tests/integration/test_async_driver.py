"""The asyncio driver on real servers (redis.asyncio): a herd of coroutines on one expired key,
each ported strategy's logic as the threads run it, with the same defence."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis
import redis.asyncio

import strategies
from strategies import Outcome, Probe
from strategies.core.twolevel import CHANNEL
from strategies.drivers import aio_listen
from strategies.drivers.aio import AsyncDriver, RedisAsyncCommands, afetch, for_asyncio
from strategies.version import stamp

KEY = "stampede:async"
HERD = 20


class SleepLoader:
    """An origin of 20 ms, counted."""

    def __init__(self) -> None:
        self.calls = 0

    async def load(self, key: str, probe: Probe) -> bytes:
        self.calls += 1
        probe.origin_calls += 1
        await asyncio.sleep(0.02)
        return stamp(self.calls, b"value")


async def _herd(spec: str, cache_url: str, lock_url: str) -> tuple[list[Outcome], int]:
    cache = RedisAsyncCommands(redis.asyncio.Redis.from_url(cache_url))
    locks = RedisAsyncCommands(redis.asyncio.Redis.from_url(lock_url))
    loader = SleepLoader()
    try:
        strategy = for_asyncio(spec, 60_000)
        driver = AsyncDriver(cache, locks, loader)
        outcomes = await asyncio.gather(*(afetch(strategy, KEY, Probe(), driver)
                                          for _ in range(HERD)))
        again = await afetch(strategy, KEY, Probe(), driver)
        assert again is Outcome.HIT
        return list(outcomes), loader.calls
    finally:
        await cache.close()
        await locks.close()


@pytest.mark.parametrize("spec", ["lock-dc", "lock-dc:wake=notify", "xfetch-lock", "swr",
                                  "lease", "local-lock", "local-lock:distributed=false",
                                  "two-level"])
def test_an_asyncio_herd_fills_once(spec: str, cache: redis.Redis, locks: redis.Redis,
                                    redis_server: Callable[[str], str]) -> None:
    outcomes, calls = asyncio.run(_herd(spec, redis_server("cache"), redis_server("lock-store")))
    assert calls == 1
    assert outcomes.count(Outcome.FILLED) == 1
    assert outcomes.count(Outcome.WAITED) == HERD - 1


def test_an_asyncio_herd_without_a_defence_is_a_herd(cache: redis.Redis, locks: redis.Redis,
                                                     redis_server: Callable[[str], str]) -> None:
    outcomes, calls = asyncio.run(_herd("naive", redis_server("cache"),
                                        redis_server("lock-store")))
    assert calls == HERD
    assert outcomes.count(Outcome.FILLED) == HERD


@pytest.mark.parametrize("spec", ["naive", "lock-dc", "local-lock", "swr", "lease", "two-level"])
def test_a_cache_that_refuses_is_answered_by_the_origin_under_origin(
        spec: str, locks: redis.Redis, redis_server: Callable[[str], str]) -> None:
    """on_cache_error=origin is logic (strategies.core.fallback): on the asyncio driver a
    refused cache is one origin call per request, a fallback row, no error; under fail, the
    cache client's error."""

    async def scenario() -> None:
        cache = RedisAsyncCommands(redis.asyncio.Redis.from_url("redis://127.0.0.1:1/0"))
        locks_ = RedisAsyncCommands(redis.asyncio.Redis.from_url(redis_server("lock-store")))
        loader = SleepLoader()
        try:
            driver = AsyncDriver(cache, locks_, loader)
            falling_back = for_asyncio(f"{spec}:on_cache_error=origin", 60_000)
            probes = [Probe() for _ in range(3)]
            outcomes = await asyncio.gather(*(afetch(falling_back, KEY, p, driver)
                                              for p in probes))
            assert outcomes == [Outcome.FILLED] * 3 and loader.calls == 3
            assert all(p.fallback == 1 and p.version_served > 0 for p in probes)
            with pytest.raises(redis.ConnectionError):
                await afetch(for_asyncio(spec, 60_000), KEY, Probe(), driver)
        finally:
            await cache.close()
            await locks_.close()

    asyncio.run(scenario())


def test_a_strategy_not_ported_is_refused_by_name() -> None:
    with pytest.raises(strategies.InvalidStrategy, match="not ported"):
        for_asyncio("dogpile", 60_000)  # a library adapter: no core


def test_two_level_serves_local_hits_and_drops_a_copy_another_process_invalidates(
        cache: redis.Redis, locks: redis.Redis, redis_server: Callable[[str], str]) -> None:
    """The asyncio listener (strategies.drivers.aio_listen, a redis.asyncio pub/sub task): a
    read keeps a local copy, the next one is a local hit; another process (a plain client here)
    rewrites the key and publishes it: the copy goes, the next read serves the new version."""
    cache.set(KEY, stamp(5, b"value"), px=60_000)

    async def scenario() -> None:
        url = redis_server("cache")
        commands = RedisAsyncCommands(redis.asyncio.Redis.from_url(url))
        locks_ = RedisAsyncCommands(redis.asyncio.Redis.from_url(redis_server("lock-store")))
        strategy = for_asyncio("two-level:local_ttl_ms=60000", 60_000)
        listeners = await aio_listen.start_all([strategy], url)
        assert len(listeners) == 1
        try:
            driver = AsyncDriver(commands, locks_, SleepLoader())
            first, second = Probe(), Probe()
            assert await afetch(strategy, KEY, first, driver) is Outcome.HIT
            assert await afetch(strategy, KEY, second, driver) is Outcome.HIT
            assert (first.local_hit, second.local_hit) == (0, 1) and second.version_served == 5
            cache.set(KEY, stamp(6, b"value"), px=60_000)
            cache.publish(CHANNEL, KEY)
            for _ in range(200):
                if KEY not in strategy.core.local:
                    break
                await asyncio.sleep(0.01)
            assert KEY not in strategy.core.local, "not invalidated within 2 s"
            after = Probe()
            assert await afetch(strategy, KEY, after, driver) is Outcome.HIT
            assert after.local_hit == 0 and after.version_served == 6
            assert listeners[0].down is None and listeners[0].error is None
        finally:
            await aio_listen.close_all(listeners)
            await commands.close()
            await locks_.close()

    asyncio.run(scenario())
