"""The asyncio driver's own Redis connection (worker.aio.connection) on a real server: each ported
strategy's herd as on redis.asyncio (tests/integration/test_async_driver.py), and redis-py's
exceptions for the server's errors, a refused connection and a reply that does not come."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis

from strategies import Outcome, Probe
from strategies.drivers.aio import AsyncDriver, afetch, for_asyncio
from tests.integration.test_async_driver import HERD, KEY, SleepLoader
from worker.aio.connection import LeanAsyncCommands, pack


async def _herd(spec: str, cache_url: str, lock_url: str) -> tuple[list[Outcome], int]:
    """HERD clients, each on connections of its own (as the driver's), one expired key."""
    loader = SleepLoader()
    strategy = for_asyncio(spec, 60_000)
    conns = [(LeanAsyncCommands(cache_url), LeanAsyncCommands(lock_url)) for _ in range(HERD)]
    try:
        drivers = [AsyncDriver(c, lk, loader) for c, lk in conns]
        outcomes = await asyncio.gather(*(afetch(strategy, KEY, Probe(), d) for d in drivers))
        assert await afetch(strategy, KEY, Probe(), drivers[0]) is Outcome.HIT
        return list(outcomes), loader.calls
    finally:
        for c, lk in conns:
            await c.close()
            await lk.close()


@pytest.mark.parametrize("spec", ["lock-dc", "lock-dc:wake=notify", "xfetch-lock", "swr", "lease",
                                  "local-lock", "local-lock:wake=notify", "two-level"])
def test_a_herd_on_own_connections_fills_once(spec: str, cache: redis.Redis, locks: redis.Redis,
                                              redis_server: Callable[[str], str]) -> None:
    outcomes, calls = asyncio.run(_herd(spec, redis_server("cache"), redis_server("lock-store")))
    assert calls == 1
    assert outcomes.count(Outcome.FILLED) == 1
    assert outcomes.count(Outcome.WAITED) == HERD - 1


def test_without_a_defence_every_client_fills(cache: redis.Redis, locks: redis.Redis,
                                              redis_server: Callable[[str], str]) -> None:
    outcomes, calls = asyncio.run(_herd("naive", redis_server("cache"),
                                        redis_server("lock-store")))
    assert calls == HERD and outcomes.count(Outcome.FILLED) == HERD


def test_failures_are_redis_py_exceptions(cache: redis.Redis,
                                          redis_server: Callable[[str], str]) -> None:
    url = redis_server("cache")

    async def scenario() -> None:
        conn = LeanAsyncCommands(url)
        await conn.set("aio:n", b"x")
        with pytest.raises(redis.ResponseError, match="not an integer"):
            await conn.call("INCR", "aio:n")
        assert await conn.get("aio:n") == b"x"  # the connection goes on after an error reply
        with pytest.raises(redis.TimeoutError):
            await conn.call("BLPOP", "aio:empty", 1, timeout_s=0.1)
        assert await conn.get("aio:n") == b"x"  # a new connection after the timeout
        script = conn.script("return redis.call('GET', KEYS[1])")
        assert await script(["aio:n"], []) == b"x"  # EVAL the first time, EVALSHA after
        assert await script(["aio:n"], []) == b"x"
        await conn.pipeline(("SET", "aio:p", "1"), ("PEXPIRE", "aio:p", 5000), transaction=True)
        assert await conn.get("aio:p") == b"1"
        await conn.close()
        with pytest.raises(redis.ConnectionError):
            await LeanAsyncCommands("redis://127.0.0.1:1/0").get("k")

    asyncio.run(scenario())


def test_commands_are_packed_as_resp() -> None:
    assert pack(["SET", "k", b"v", 5, 0.5]) == (b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
                                               b"$1\r\n5\r\n$3\r\n0.5\r\n")
