"""Strategies against the real cache, lock store and PostgreSQL origin: the race on one expired key."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis
from psycopg_pool import ConnectionPool, PoolTimeout

import strategies
from coordinator.origin.counters import origin_db_calls
from model.origin import EndpointLoader, OriginShape
from model.services import make_pool
from model.workload import Query
from strategies import Deps, Outcome, Probe
from strategies.commands import Commands
from tests.strategy_helpers import MakeCommands

THREADS = 50
SPAN_S = 180 * 86400.0  # half the seeded year: about 10 ms per query, a wide race window


@pytest.fixture
def pool(postgres_dsn: str) -> Iterator[ConnectionPool]:
    pool = make_pool(postgres_dsn, 10)
    yield pool
    pool.close()


def orders_loader(pool: ConnectionPool, pool_timeout_s: float = 5.0) -> EndpointLoader:
    """The real origin query of the hot-key workload, as the workers run it."""
    return EndpointLoader(pool, Query.ORDERS, OriginShape(SPAN_S), pool_timeout_s=pool_timeout_s)


def race(name: str, cache: Commands, locks: Commands, pool: ConnectionPool
         ) -> tuple[list[Outcome], int]:
    """Release THREADS clients at once on a missing key; return outcomes and origin calls."""
    spec = strategies.parse(name)
    strategy = spec.build(Deps(cache, locks, orders_loader(pool), ttl_ms=5000))
    barrier = threading.Barrier(THREADS)
    outcomes: list[Outcome] = []
    calls: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        probe = Probe()
        cache.connect()  # as a worker's client thread does before the start instant
        locks.connect()
        barrier.wait()
        outcome = strategy.fetch("orders:0", probe)
        with lock:
            outcomes.append(outcome)
            calls.append(probe.origin_calls)

    threads = [threading.Thread(target=client) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(outcomes) == THREADS
    return outcomes, sum(calls)


def test_naive_sends_the_herd_to_the_origin(cache: redis.Redis, locks: redis.Redis,
                                            pool: ConnectionPool, reset_statements: str,
                                            commands: MakeCommands) -> None:
    outcomes, calls = race("naive", commands(cache), commands(locks), pool)
    assert calls >= 10, f"only {calls} of {THREADS} naive clients reached the origin"
    assert outcomes.count(Outcome.FILLED) == calls
    assert origin_db_calls(reset_statements) == calls  # PostgreSQL saw exactly these


@pytest.mark.parametrize(("name", "most"), [("lock", 3), ("lock-dc", 1)])
def test_lock_lets_few_through(name: str, most: int, cache: redis.Redis, locks: redis.Redis,
                               pool: ConnectionPool, reset_statements: str,
                               commands: MakeCommands) -> None:
    outcomes, calls = race(name, commands(cache), commands(locks), pool)
    assert 1 <= calls <= most
    assert outcomes.count(Outcome.FILLED) == calls
    assert set(outcomes) <= {Outcome.FILLED, Outcome.WAITED, Outcome.HIT}
    assert outcomes.count(Outcome.WAITED) >= 1
    assert origin_db_calls(reset_statements) == calls
    assert locks.keys("lock:*") == []  # the filler released its lock


def test_a_waiter_gives_up_after_its_bounded_wait(cache: redis.Redis, locks: redis.Redis,
                                                  pool: ConnectionPool,
                                                  commands: MakeCommands) -> None:
    locks.set("lock:orders:0", b"someone-else", px=10_000)
    strategy = strategies.parse("lock:max_wait_ms=50,poll_ms=5").build(
        Deps(commands(cache), commands(locks), orders_loader(pool), ttl_ms=5000))
    with pytest.raises(strategies.LockWaitTimeout):
        strategy.fetch("orders:0", Probe())
    assert locks.get("lock:orders:0") == b"someone-else"  # never deleted someone else's lock


def test_origin_records_pool_wait_apart_from_query_time(pool: ConnectionPool) -> None:
    probe = Probe()
    value = orders_loader(pool).load("orders:3", probe)
    assert b'"rows"' in value
    assert probe.origin_calls == 1
    assert probe.origin_ns > 0 and probe.pool_wait_ns > 0
    assert probe.origin_start_ns > 0


def test_origin_failure_is_raised_not_hidden(postgres_dsn: str) -> None:
    small = make_pool(postgres_dsn, 1)
    try:
        with small.connection(), pytest.raises(PoolTimeout, match="couldn't get a connection"):
            orders_loader(small, pool_timeout_s=0.1).load("orders:0", Probe())
    finally:
        small.close()
