"""Cache commands per request checked against a known count (issue 31): a trial of hits only
costs exactly one command a request on Redis (naive's ``GET``) and on memcached (meta-memcache's
``mg``), as the servers themselves count them (``INFO commandstats``, ``stats``: the counters a
trial's ``cache_commands`` come from, coordinator.caches). The pair: lease's hit is one
``EVALSHA`` whose ``GET`` inside the script Redis counts too, two a request (and the script's
loads, one a client at most, counted apart).

The counters are read just before and after the worker's trial, so the worker's floor round trips
(a GET each, before the start instant) are in the count: they are counted as they are sent and
taken off. A read timed to the start instant instead (as a launch does, from another process)
came late on a loaded machine, with the clients already under way (3,850 GETs for 3,950 hits).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import strategies
from coordinator.caches import RunCaches, spent_between
from model.services import Services
from strategies import Deps
from strategies.base import CacheServer, Servers
from strategies.commands import NoCommands, PlainCommands
from tests.helpers import sent_rows, trial_spec
from tests.strategy_helpers import SleepLoader
from worker import floor as worker_floor
from worker import trial as worker_trial

KEY = "orders:0"
VALUE = b"\x00" * 7 + b"\x07" + b"cached"  # version 7, as the origin's values carry one
TTL_MS = 120_000  # nothing expires during the trial: every request is a hit
SET_UP = {"hello", "client|setinfo"}  # each client connection's handshake, before the start


@pytest.fixture
def services(redis_server: Callable[[str], str], postgres_dsn: str, cache: redis.Redis,
             locks: redis.Redis, memcached_url: str, memcache: object) -> Services:
    return Services(redis_server("cache"), redis_server("lock-store"), redis_server("broker"),
                    postgres_dsn, memcache_url=memcached_url)


@pytest.fixture
def caches(services: Services) -> Iterator[RunCaches]:
    run = RunCaches(services, [CacheServer.REDIS, CacheServer.MEMCACHED])
    yield run
    run.close()


@dataclasses.dataclass
class Spent:
    requests: int
    floor: int  # the worker's floor round trips
    commands: dict[str, int]

    def per_request(self, command: str) -> float:
        return (self.commands.get(command, 0) - (self.floor if command == "get" else 0)) / self.requests


def all_hit_trial(services: Services, caches: RunCaches, locks: redis.Redis, strategy: str,
                  monkeypatch: pytest.MonkeyPatch) -> Spent:
    """One worker's 1 s trial of 4 clients on a value that outlives it."""
    spec = trial_spec(clients=4, seconds=1.0, strategy=strategy, progress_interval_s=0.1)
    start = time.time_ns() + 1_000_000_000
    spec = dataclasses.replace(spec, ttl_ms=TTL_MS, start_ns=start, end_ns=start + 1_000_000_000)
    parsed = strategies.parse(strategy)
    kind = parsed.cache_server
    own = Servers(services.cache_url_for(kind) or "", services.lock_url, threads=1)
    deps = Deps(caches.commands(kind) if kind is CacheServer.REDIS else NoCommands("memcached"),
                PlainCommands(locks), SleepLoader(0.0), TTL_MS, servers=own)
    primer = parsed.build(deps)
    primer.prime(KEY, VALUE, int(time.time() * 1000) + TTL_MS)
    strategies.close_strategy(primer)
    floors: list[int] = []
    measure = worker_floor.measure_floor_ns

    def counted(*args: Any, **kwargs: Any) -> list[int]:
        times = measure(*args, **kwargs)
        floors.append(len(times))
        return times

    monkeypatch.setattr(worker_floor, "measure_floor_ns", counted)
    before = caches.counters(kind)
    result = worker_trial.run_trial(spec, services)
    spent = spent_between(before, caches.counters(kind))
    sent_rows(services.broker_url, spec)  # its rows read and dropped: the next trial "t" 1 starts afresh
    assert spent is not None and result.origin_calls == 0, (spent, result)  # hits only
    return Spent(result.requests, sum(floors), {k: v for k, v in spent.items() if k not in SET_UP})


@pytest.mark.parametrize("strategy", ["naive", "meta-memcache"])
def test_a_hit_is_one_cache_command(services: Services, caches: RunCaches, locks: redis.Redis,
                                    strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spent = all_hit_trial(services, caches, locks, strategy, monkeypatch)
    assert spent.requests > 100 and spent.floor >= 20
    assert set(spent.commands) == {"get"} and spent.per_request("get") == 1.0, spent


def test_a_lease_hit_is_two_as_redis_counts_a_script(services: Services, caches: RunCaches,
                                                      locks: redis.Redis,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A client whose first ``EVALSHA`` found no script loads it (``SCRIPT LOAD``) and sends
    it again."""
    spent = all_hit_trial(services, caches, locks, "lease", monkeypatch)
    loads = spent.commands.get("script|load", 0)
    assert set(spent.commands) <= {"get", "evalsha", "script|load"} and loads <= 4, spent
    assert spent.per_request("get") == 1.0, spent  # inside the script
    assert spent.commands["evalsha"] == spent.requests + loads, spent
    assert spent.per_request("get") + spent.per_request("evalsha") == pytest.approx(
        2 + loads / spent.requests), spent
