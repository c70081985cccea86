"""What each library promises, measured through its adapter on real servers (issue 24).

Each test measures the library's own mechanism, and each has a contrast that fails the same
check: python-redis-lock wakes its waiters at the release (redis-py's lock polls instead),
redis-py's waiters wait at least its ``sleep``, memcached's lease gives one fill while the
others see the lease (naive on memcached: everyone fills), dogpile serves the old value while
exactly one creator regenerates. The origin is a loader that sleeps (the thing under test is
the library, on real Redis and memcached).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
import pytest
import redis

import strategies
from adapters.dogpile_cache import Dogpile
from adapters.meta_memcache_lease import MetaMemcache
from model.memcache import Memcache
from strategies import Deps, Loader, Outcome, Probe, close_strategy
from strategies.base import Servers
from strategies.commands import NoCommands, PlainCommands
from strategies.version import version_of
from tests.strategy_helpers import SleepLoader, herd, resume_delays_ns

KEY = "orders:0"
LOAD_S = 0.2
WAITERS = 6
# python-redis-lock: the release pushes one token, the woken waiter takes the lock, finds the
# value and releases (pushing the next token), so the last of 6 waiters is back after 6 links of
# a few round trips each: well under this bound on an idle host, a 300 ms poll far above it.
RESUME_BOUND_NS = 60_000_000
POLL_S = 0.3
TTL_MS = 60_000

MakeDeps = Callable[[Loader], Deps]


@pytest.fixture
def redis_deps(redis_server: Callable[[str], str], cache: redis.Redis,
               locks: redis.Redis) -> MakeDeps:
    """Deps of a library on the session's cache and lock store (flushed), by URL."""
    servers = Servers(redis_server("cache"), redis_server("lock-store"), threads=32)
    return lambda loader: Deps(PlainCommands(cache), PlainCommands(locks), loader, TTL_MS,
                               servers=servers)


@pytest.fixture
def memcached_deps(memcached_url: str, memcache: Memcache,
                   locks: redis.Redis) -> MakeDeps:
    servers = Servers(memcached_url, "redis://127.0.0.1:1/0", threads=32)
    return lambda loader: Deps(NoCommands("memcached"), PlainCommands(locks), loader, 2000,
                               servers=servers)


def ms(values: list[int]) -> list[float]:
    return [round(v / 1e6, 1) for v in values]


# --- python-redis-lock: waiters are woken by the release, redis-py's lock polls ---------------

def test_python_redis_lock_wakes_its_waiters_at_the_release(redis_deps: MakeDeps) -> None:
    delays = resume_delays_ns("python-redis-lock", redis_deps, WAITERS, LOAD_S)
    assert max(delays) < RESUME_BOUND_NS, (
        f"waiters resumed {ms(delays)} ms after a {LOAD_S * 1000:g} ms fill; the release's "
        f"BLPOP token promises < {RESUME_BOUND_NS / 1e6:g} ms")
    assert min(delays) > 0  # no waiter returned before the value existed


def test_the_resume_check_fails_for_redis_py_polling(redis_deps: MakeDeps) -> None:
    """The contrast: redis-py's waiters look again only after ``sleep``."""
    delays = resume_delays_ns(f"redis-py-lock:sleep={POLL_S}", redis_deps, WAITERS, LOAD_S)
    assert not max(delays) < RESUME_BOUND_NS, ms(delays)


def test_redis_py_lock_waiters_wait_at_least_its_sleep(redis_deps: MakeDeps) -> None:
    """A waiter that found the lock taken sleeps ``sleep`` before its next attempt, however
    short the fill: its lock wait is at least that (here 0.2 s against a 20 ms fill)."""
    sleep_s = 0.2
    loader = SleepLoader(0.02)
    strategy = strategies.parse(f"redis-py-lock:sleep={sleep_s}").build(redis_deps(loader))
    try:
        results = herd(lambda p: strategy.fetch(KEY, p), threads=WAITERS + 1)
    finally:
        close_strategy(strategy)
    waits = sorted(p.lock_wait_ns for o, p in results if o is Outcome.WAITED)
    assert loader.calls == 1
    assert len(waits) == WAITERS
    assert min(waits) >= 0.9 * sleep_s * 1e9, (
        f"waiters waited {ms(waits)} ms; redis-py's lock polls every {sleep_s * 1000:g} ms")


# --- meta-memcache: the server's lease, one fill per expiry ------------------------------------

FAST_RETRY = "miss_retry_wait=0.05,miss_retries=20"  # retry within the test's time


def test_meta_memcache_lease_gives_one_fill_while_the_others_see_the_lease(
        memcached_deps: MakeDeps, memcache: Memcache) -> None:
    loader = SleepLoader(LOAD_S)
    strategy = strategies.parse(f"meta-memcache:{FAST_RETRY}").build(memcached_deps(loader))
    before = memcache.stats()
    results = herd(lambda p: strategy.fetch(KEY, p), threads=20)
    outcomes = [o for o, _ in results]
    assert loader.calls == 1, f"{loader.calls} fills with the lease ({outcomes})"
    assert outcomes.count(Outcome.FILLED) == 1
    assert outcomes.count(Outcome.WAITED) == 19  # each saw the lease (Z), waited, got the value
    assert all(p.lock_wait_ns >= 0.05e9 for o, p in results if o is Outcome.WAITED)
    sets = memcache.stats()["cmd_set"] - before["cmd_set"]
    assert sets == 1  # one write-back, with the lease's CAS token


def test_without_the_lease_every_memcached_client_fills(memcached_deps: MakeDeps,
                                                        memcache: Memcache) -> None:
    """The contrast (naive on memcached, through the same library): a plain get misses for
    every client of the herd, so every one of them loads."""
    loader = SleepLoader(LOAD_S)
    strategy = MetaMemcache(memcached_deps(loader), MetaMemcache.Params())
    def naive(probe: Probe) -> Outcome:
        if strategy.client.get(KEY) is not None:
            return Outcome.HIT
        strategy.client.set(KEY, loader.load(KEY, probe), ttl=2)
        return Outcome.FILLED

    outcomes = [o for o, _ in herd(naive, threads=20)]
    assert loader.calls == 20, outcomes


LIVE = b"\x00" * 7 + b"\x07" + b"live"  # version 7, 10 s left on memcached


def _recache_herd(recache: str, memcached_deps: MakeDeps) -> tuple[SleepLoader, list[tuple[Outcome, Probe]]]:
    """20 clients at once on a live value with 10 s left, through meta-memcache ``recache``."""
    loader = SleepLoader(LOAD_S)
    strategy = strategies.parse(f"meta-memcache{recache}").build(memcached_deps(loader))
    assert isinstance(strategy, MetaMemcache)
    strategy.client.set(KEY, LIVE, ttl=10)
    return loader, herd(lambda p: strategy.fetch(KEY, p), threads=20)


def test_meta_memcache_recache_refreshes_once_while_the_others_keep_the_value(
        memcached_deps: MakeDeps) -> None:
    """``recache_ttl=30``: with fewer seconds left, memcached hands one reader the win (``W``)
    and the others the live value at once (``Z``): one refresh, named by the value's expiry
    (now + the 10 s the server reports left), no waits."""
    loader, results = _recache_herd(":recache_ttl=30", memcached_deps)
    assert loader.calls == 1, [o for o, _ in results]
    (refresh,) = [p for o, p in results if o is Outcome.FILLED]
    assert abs(refresh.refresh_of_ns - (time.time_ns() + 10e9)) < 2.5e9, refresh
    kept = [(o, p) for o, p in results if o is not Outcome.FILLED]
    assert [o for o, _ in kept] == [Outcome.HIT] * 19
    assert all(p.lock_wait_ns == 0 and p.version_served == 7 for _, p in kept)


def test_without_recache_a_live_value_is_never_refreshed(memcached_deps: MakeDeps) -> None:
    """The pair: the same herd on the same value with recache off (the default): all hits."""
    loader, results = _recache_herd("", memcached_deps)
    assert loader.calls == 0 and [o for o, _ in results] == [Outcome.HIT] * 20


def test_a_delete_during_the_fill_makes_the_lease_write_fail(memcached_deps: MakeDeps,
                                                             memcache: Memcache) -> None:
    """The lease's CAS write-back: a value computed before a delete is not stored after it."""
    deleted = False

    class DeletingLoader(SleepLoader):
        def load(self, key: str, probe: Probe) -> bytes:
            nonlocal deleted
            value = super().load(key, probe)
            strategy.client.delete(KEY)  # the origin changed meanwhile: its invalidation
            deleted = True
            return value

    strategy = strategies.parse("meta-memcache").build(memcached_deps(DeletingLoader(0.01)))
    probe = Probe()
    assert strategy.fetch(KEY, probe) is Outcome.FILLED
    assert deleted and probe.version_set == -1  # the write was refused: no stale set
    assert strategy.cached_version(KEY) is None


# --- dogpile: one creator regenerates, everyone else gets the old value at once --------------

def _expired_dogpile(text: str, deps: MakeDeps, loader: Loader) -> strategies.Strategy:
    strategy = strategies.parse(text).build(deps(loader))
    old = b"\x00" * 7 + b"\x07" + b"old"  # version 7
    strategy.prime(KEY, old, int(time.time() * 1000) - 500)  # dogpile's expiry 0.5 s ago
    return strategy


@pytest.mark.parametrize("text", ["dogpile", "dogpile:distributed_lock=true,thread_local_lock=false"])
def test_dogpile_serves_the_old_value_while_exactly_one_regenerates(
        text: str, redis_deps: MakeDeps) -> None:
    loader = SleepLoader(LOAD_S)
    strategy = _expired_dogpile(text, redis_deps, loader)
    try:
        results = herd(lambda p: strategy.fetch(KEY, p), threads=20)
    finally:
        close_strategy(strategy)
    outcomes = [o for o, _ in results]
    stale = [p for o, p in results if o is Outcome.STALE]
    filled = [p for o, p in results if o is Outcome.FILLED]
    assert loader.calls == 1 and len(filled) == 1, f"{loader.calls} creators ({outcomes})"
    assert len(stale) == 19, outcomes
    assert all(p.version_served == 7 and p.stale_age_ns >= 0.5e9 for p in stale)
    assert filled[0].refresh_of_ns > 0  # the refresh of the old value's cycle


def test_without_dogpile_s_lock_every_reader_of_the_expired_value_regenerates(
        redis_deps: MakeDeps, cache: redis.Redis) -> None:
    """The contrast: the same expired value read by a naive cache-aside (no creator lock)."""
    loader = SleepLoader(LOAD_S)
    strategy = _expired_dogpile("dogpile", redis_deps, loader)
    assert isinstance(strategy, Dogpile)

    def naive(probe: Probe) -> Outcome:
        raw = cache.get(KEY)
        assert raw is not None
        created = orjson.loads(raw.partition(b"|")[0])["ct"]  # dogpile's metadata
        if time.time() - created <= TTL_MS / 1000:
            return Outcome.HIT
        value = loader.load(KEY, probe)
        strategy.region.set(KEY, value)
        return Outcome.FILLED

    try:
        outcomes = [o for o, _ in herd(naive, threads=20)]
    finally:
        close_strategy(strategy)
    assert loader.calls == 20, outcomes


def test_dogpile_keeps_the_loader_s_bytes_readable(redis_deps: MakeDeps,
                                                   cache: redis.Redis) -> None:
    """The region's serializer is the identity: Redis holds dogpile's metadata and our bytes."""
    strategy = strategies.parse("dogpile").build(redis_deps(SleepLoader(0.001)))
    try:
        probe = Probe()
        assert strategy.fetch(KEY, probe) is Outcome.FILLED
        raw = cache.get(KEY)
        assert raw is not None and raw.startswith(b'{"ct":')
        assert version_of(raw.partition(b"|")[2]) == probe.version_set == 1
        assert strategy.cached_version(KEY) == 1
    finally:
        close_strategy(strategy)
