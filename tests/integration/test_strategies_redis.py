"""Strategies against real Redis: herd sizes, lock ownership, leases, swr, lock-store policy."""

from __future__ import annotations

import dataclasses
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import strategies
from strategies import Deps, LockStoreDown, Outcome, Probe
from strategies.background import BackgroundWorker
from strategies.commands import Commands
from strategies.lease import Lease
from strategies.locking import OwnedLock
from strategies.version import stamp
from tests.strategy_helpers import MakeCommands, SleepLoader, herd

KEY = "orders:0"


def build(text: str, cache: Commands, locks: Commands, loader: SleepLoader,
          ttl_ms: int = 2000, background: BackgroundWorker | None = None) -> strategies.Strategy:
    return strategies.parse(text).build(Deps(cache, locks, loader, ttl_ms, background))


# Generous bounds: a shared, loaded machine must not turn a slow waiter into a failure.
SLOW_OK = "max_wait_ms=20000,lock_ttl_ms=20000"
SLOW_LEASE_OK = "max_wait_ms=20000,lease_ms=20000"


@pytest.mark.parametrize("text", [
    f"lock-dc:{SLOW_OK}", f"lock-dc:wake=notify,{SLOW_OK}", f"lease:{SLOW_LEASE_OK}",
    f"lease:wake=notify,{SLOW_LEASE_OK}", f"local-lock:{SLOW_OK}", f"xfetch-lock:{SLOW_OK}",
    f"swr:{SLOW_OK}", f"two-level:{SLOW_OK}"])
@pytest.mark.parametrize("on_cache_error", ["fail", "origin"])
def test_fifty_threads_on_an_expired_key_make_one_origin_call(
        text: str, on_cache_error: str, cache: redis.Redis, locks: redis.Redis,
        commands: MakeCommands) -> None:
    """With a healthy cache the cache-error policy changes nothing."""
    loader = SleepLoader(0.02)
    both = (commands(cache), commands(locks))
    strategy = build(f"{text},on_cache_error={on_cache_error}", *both, loader)
    try:
        results = herd(lambda probe: strategy.fetch(KEY, probe), connect=both)
    finally:
        strategies.close_strategy(strategy)
    assert loader.calls == 1
    outcomes = [o for o, _ in results]
    assert outcomes.count(Outcome.FILLED) == 1
    assert set(outcomes) <= {Outcome.FILLED, Outcome.WAITED, Outcome.HIT}
    assert sum(p.origin_calls for _, p in results) == 1


@pytest.mark.parametrize("on_cache_error", ["fail", "origin"])
def test_naive_herd_makes_many_origin_calls(on_cache_error: str, cache: redis.Redis,
                                            locks: redis.Redis, commands: MakeCommands) -> None:
    loader = SleepLoader(0.05)
    both = (commands(cache), commands(locks))
    strategy = build(f"naive:on_cache_error={on_cache_error}", *both, loader)
    results = herd(lambda probe: strategy.fetch(KEY, probe), connect=both)
    assert loader.calls >= 10  # 50 released together on a 50 ms origin: most miss
    assert sum(p.origin_calls for _, p in results) == loader.calls


def test_lock_is_released_only_by_its_owner(locks: redis.Redis, commands: MakeCommands) -> None:
    lock = OwnedLock(commands(locks), 5000)
    token = lock.try_acquire("lock:k")
    assert token is not None
    assert lock.try_acquire("lock:k") is None
    assert not lock.release("lock:k", b"someone-else")
    assert locks.get("lock:k") == token
    assert lock.release("lock:k", token)
    assert locks.get("lock:k") is None


def test_slow_holder_cannot_delete_the_next_holders_lock(locks: redis.Redis,
                                                         commands: MakeCommands) -> None:
    lock = OwnedLock(commands(locks), 50)
    slow = lock.try_acquire("lock:k")
    assert slow is not None
    time.sleep(0.2)  # longer than the lock TTL: the lock expired under the slow holder
    fast = lock.try_acquire("lock:k")
    assert fast is not None
    assert not lock.release("lock:k", slow)
    assert locks.get("lock:k") == fast


def test_lease_set_after_invalidation_is_rejected(cache: redis.Redis, locks: redis.Redis,
                                                  commands: MakeCommands) -> None:
    lease = Lease(Deps(commands(cache), commands(locks), SleepLoader(), 2000), Lease.Params())
    token = lease.lease(KEY)
    assert token is not None
    assert lease.lease(KEY) is None  # one lease per key per interval
    lease.invalidate(KEY)
    assert not lease.set_with_lease(KEY, token, stamp(1, b"computed before the invalidation"))
    assert cache.get(KEY) is None
    fresh = lease.lease(KEY)
    assert fresh is not None
    assert lease.set_with_lease(KEY, fresh, stamp(2, b"new"))
    assert cache.get(KEY) == stamp(2, b"new")


def test_dead_lease_holder_frees_the_key_after_the_interval(cache: redis.Redis,
                                                            locks: redis.Redis,
                                                            commands: MakeCommands) -> None:
    deps = Deps(commands(cache), commands(locks), SleepLoader(), 2000)
    lease = Lease(deps, Lease.Params(lease_ms=100, stale_ms=0))
    assert lease.lease(KEY) is not None  # this holder "dies": it never sets
    assert lease.lease(KEY) is None
    time.sleep(0.25)
    loader = SleepLoader(0.001)
    strategy = Lease(dataclasses.replace(deps, loader=loader), Lease.Params(lease_ms=100, stale_ms=0))
    assert strategy.fetch(KEY, Probe()) is Outcome.FILLED
    assert loader.calls == 1


def test_swr_readers_never_wait_for_the_origin(cache: redis.Redis, locks: redis.Redis,
                                               commands: MakeCommands) -> None:
    loader = SleepLoader(0.3)
    rows: list[tuple[Outcome, Probe]] = []
    background = BackgroundWorker(lambda key, t, lat, outcome, probe, err: rows.append(
        (outcome, probe)))
    ttl_ms, hard_factor = 1000, 3.0
    both = (commands(cache), commands(locks))
    strategy = build(f"swr:hard_factor={hard_factor:g}", *both, loader, ttl_ms, background)
    strategy.prime(KEY, stamp(0, b"primed"), int(time.time() * 1000) - 50)  # soft-expired 50 ms ago
    try:
        results = herd(lambda probe: strategy.fetch(KEY, probe), threads=30, connect=both)
    finally:
        background.close()
    waited = [(o, p.origin_calls, p.lock_wait_ns) for o, p in results
              if p.origin_calls or p.lock_wait_ns]
    assert waited == []
    assert {o for o, _ in results} <= {Outcome.STALE, Outcome.HIT}
    stale = [p.stale_age_ns for o, p in results if o is Outcome.STALE]
    assert stale and min(stale) >= 50 * 10**6
    assert max(stale) <= ttl_ms * hard_factor * 10**6
    assert [o for o, _ in rows] == [Outcome.FILLED]  # exactly one background refresh
    assert loader.calls == 1
    assert strategy.fetch(KEY, Probe()) is Outcome.HIT


@pytest.mark.parametrize("text", ["lock-dc", "xfetch-lock", "local-lock", "swr"])
@pytest.mark.parametrize("on_cache_error", ["fail", "origin"])
def test_failing_lock_store_follows_the_policy(text: str, on_cache_error: str,
                                               cache: redis.Redis, commands: MakeCommands) -> None:
    """A lock-store failure is on_lock_error's, whatever on_cache_error says."""
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2,
                       retry=Retry(NoBackoff(), 0))  # nothing listens on port 1
    loader = SleepLoader(0.001)
    text = f"{text}:on_cache_error={on_cache_error},on_lock_error"
    deps = Deps(commands(cache), commands(dead), loader, 2000)
    open_ = strategies.parse(f"{text}=open").build(deps)
    assert open_.fetch(KEY, Probe()) is Outcome.FILLED
    assert loader.calls == 1
    cache.flushdb()
    closed = strategies.parse(f"{text}=closed").build(deps)
    with pytest.raises(LockStoreDown):
        closed.fetch(KEY, Probe())
    assert loader.calls == 1
