"""``on_cache_error``: every strategy against a real cache server that is killed, restarted, or
out of memory. Under ``fail`` the request raises the cache client's error (an error row);
under ``origin`` it is answered by the loader, exactly once, and the strategy recovers when the
cache comes back. Lock-store failures stay under ``on_lock_error``."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.exceptions as rex
from redis.backoff import NoBackoff
from redis.retry import Retry

import strategies
from coordinator.stack.processes import ManagedProcess
from coordinator.stack.redis_server import start_redis
from model.services import redis_client
from strategies import Deps, LockStoreDown, Outcome, Probe
from strategies.fallback import CacheFallback, cache_failed
from strategies.twolevel import CHANNEL, TwoLevel
from strategies.version import stamp
from tests.strategy_helpers import MakeCommands, SleepLoader

EVERY = ["naive", "lock", "lock-dc", "local-lock", "xfetch", "xfetch-lock", "swr", "lease",
         "two-level"]


@pytest.fixture(scope="module")
def mortal(service_dir: Path, started: list[ManagedProcess]) -> tuple[ManagedProcess, str]:
    """A cache server of this module's own, which its tests kill and restart."""
    proc, url = start_redis("mortal-cache", service_dir)
    started.append(proc)
    return proc, url


@pytest.fixture
def cache(mortal: tuple[ManagedProcess, str]) -> Iterator[redis.Redis]:
    """The worker's own client (no retries, 2 s timeouts) on a live, empty, unlimited server."""
    proc, url = mortal
    if not proc.alive():
        proc.restart()
    client = redis_client(url, clients=8)
    _until(lambda: _answers(client), "the cache answers")
    client.config_set("maxmemory", 0)
    client.flushdb()
    yield client
    client.close()


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def _until(ready: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"not {what} after {timeout_s} s"
        time.sleep(0.02)


def kill(proc: ManagedProcess) -> None:
    proc.signal(signal.SIGKILL)
    proc.popen.wait(5)


def build(text: str, cache: redis.Redis, locks: redis.Redis, loader: SleepLoader,
          commands: MakeCommands) -> strategies.Strategy:
    """The strategy on the path of ``commands`` (the fixture: each test runs on both)."""
    return strategies.parse(text).build(Deps(commands(cache), commands(locks), loader, 60_000))


@pytest.mark.parametrize("name", EVERY)
def test_a_killed_cache_fails_the_request_or_sends_it_to_the_origin(
        name: str, cache: redis.Redis, locks: redis.Redis,
        mortal: tuple[ManagedProcess, str], commands: MakeCommands) -> None:
    loader = SleepLoader(0.001)
    failing = build(name, cache, locks, loader, commands)
    falling_back = build(f"{name}:on_cache_error=origin", cache, locks, loader, commands)
    assert isinstance(falling_back, CacheFallback) and not isinstance(failing, CacheFallback)
    try:
        falling_back.prime("orders:0", stamp(0, b"primed"), int(time.time() * 1000) + 60_000)
        assert falling_back.fetch("orders:0", Probe()) is Outcome.HIT
        kill(mortal[0])
        before = loader.calls
        with pytest.raises(redis.ConnectionError):
            failing.fetch("orders:1", Probe())
        assert loader.calls == before
        probe = Probe()
        assert falling_back.fetch("orders:1", probe) is Outcome.FILLED
        assert (probe.origin_calls, loader.calls - before) == (1, 1)
        assert probe.version_served == loader.calls  # the value the origin gave
        mortal[0].restart()  # back, empty: the strategy fills and serves from the cache again
        _until(lambda: _answers(cache), "the cache answers")
        assert falling_back.fetch("orders:2", Probe()) is Outcome.FILLED
        assert falling_back.fetch("orders:2", Probe()) is Outcome.HIT
    finally:
        strategies.close_strategy(failing)
        strategies.close_strategy(falling_back)


@pytest.mark.parametrize("name", EVERY)
def test_a_refused_cache_write_serves_the_loaded_value_without_a_second_call(
        name: str, cache: redis.Redis, locks: redis.Redis, commands: MakeCommands) -> None:
    """Out of memory (experiment 004's failure): reads work, writes are refused."""
    loader = SleepLoader(0.001)
    falling_back = build(f"{name}:on_cache_error=origin", cache, locks, loader, commands)
    failing = build(name, cache, locks, loader, commands)
    try:
        cache.config_set("maxmemory-policy", "noeviction")
        cache.config_set("maxmemory", 1)
        probe = Probe()
        assert falling_back.fetch("orders:0", probe) is Outcome.FILLED
        assert probe.origin_calls == 1 and loader.calls == 1
        with pytest.raises(rex.OutOfMemoryError):
            failing.fetch("orders:0", Probe())
    finally:
        cache.config_set("maxmemory", 0)
        strategies.close_strategy(failing)
        strategies.close_strategy(falling_back)


def test_a_dead_lock_store_stays_under_on_lock_error(cache: redis.Redis,
                                                     commands: MakeCommands) -> None:
    """(The other lock-based strategies: tests/integration/test_strategies_redis.py.)"""
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2,
                       retry=Retry(NoBackoff(), 0))  # nothing listens on port 1
    loader = SleepLoader(0.001)
    closed = build("two-level:on_cache_error=origin,on_lock_error=closed", cache, dead, loader, commands)
    try:
        with pytest.raises(LockStoreDown):
            closed.fetch("orders:0", Probe())
        assert loader.calls == 0  # not a cache failure: no fallback to the origin
    finally:
        strategies.close_strategy(closed)


def test_two_level_listener_subscribes_again_after_a_restart(
        cache: redis.Redis, locks: redis.Redis, mortal: tuple[ManagedProcess, str],
        commands: MakeCommands) -> None:
    loader = SleepLoader(0.001)
    wrapper = build("two-level:on_cache_error=origin", cache, locks, loader, commands)
    assert isinstance(wrapper, CacheFallback) and isinstance(wrapper.inner, TwoLevel)
    inner = wrapper.inner
    listener = inner._invalidations
    try:
        kill(mortal[0])
        _until(lambda: listener.down is not None, "seeing the cache gone")
        mortal[0].restart()
        _until(lambda: listener.down is None, "subscribed again")
        assert listener.error is None
        assert wrapper.fetch("orders:0", Probe()) is Outcome.FILLED
        assert wrapper.fetch("orders:0", Probe()) is Outcome.HIT
        assert "orders:0" in inner.local
        cache.publish(CHANNEL, "orders:0")  # a rewrite elsewhere: the local copy must go
        _until(lambda: "orders:0" not in inner.local, "invalidated after the restart", 2.0)
    finally:
        strategies.close_strategy(wrapper)


def test_only_the_cache_failing_is_a_cache_failure() -> None:
    assert cache_failed(rex.ConnectionError("refused"))
    assert cache_failed(rex.TimeoutError("timed out"))
    assert cache_failed(rex.OutOfMemoryError("OOM"))
    assert not cache_failed(rex.MaxConnectionsError("Too many connections"))  # our pool's size
    assert not cache_failed(rex.ResponseError("WRONGTYPE"))  # our bug
    assert not cache_failed(LockStoreDown("lock store"))


def test_two_levels_asyncio_listener_subscribes_again_after_a_restart(
        cache: redis.Redis, mortal: tuple[ManagedProcess, str]) -> None:
    """strategies.drivers.aio_listen as the threaded listener above: the cache killed, the
    task sees it (``down``, the core's ``outage``), subscribes again once it is back, and a
    publish after the restart drops the local copy."""
    import asyncio

    from strategies.drivers import aio_listen
    from strategies.drivers.aio import for_asyncio

    proc, url = mortal
    strategy = for_asyncio("two-level:local_ttl_ms=60000", 60_000)
    core = strategy.core

    async def until(ready: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert time.monotonic() < deadline, f"not {what} after {timeout_s} s"
            await asyncio.sleep(0.02)

    async def scenario() -> None:
        (listener,) = await aio_listen.start_all([strategy], url)
        try:
            generation = core.generation
            await asyncio.to_thread(kill, proc)
            await until(lambda: listener.down is not None, "seeing the cache gone")
            assert core.generation > generation  # outage: a racing read stores no copy
            await asyncio.to_thread(proc.restart)
            await until(lambda: listener.down is None, "subscribed again")
            core.local["orders:0"] = (core.clock.now_ns() + 10**12, stamp(1, b"v"))
            publisher = redis.Redis.from_url(url)
            await until(lambda: _answers(publisher), "the cache answers")
            publisher.publish(CHANNEL, "orders:0")
            publisher.close()
            await until(lambda: "orders:0" not in core.local, "invalidated after the restart", 2)
        finally:
            await aio_listen.close_all([listener])

    asyncio.run(scenario())
