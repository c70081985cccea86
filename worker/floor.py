"""The physical floor a trial's latencies are checked against, measured on the worker before
its clients start: sequential round trips to the cache (a GET of a missing key), or, for an HTTP
trial, GETs of the target's floor path. A p50 below it is a failure posing as a fast success."""

from __future__ import annotations

import time
from collections.abc import Callable

from model.http.target import HttpTarget
from model.memcache import Memcache
from model.services import RedisPath, Services, redis_commands
from model.wire import TrialSpec
from strategies.base import CacheServer
from strategies.commands import Commands, NoCommands
from worker.http_fetch import floor_round_trip

FLOOR_SAMPLES = 200
FLOOR_MIN = 20  # the floor's p5 needs a few samples, however slow the link


def measure_floor_ns(round_trip: Callable[[], object], samples: int = FLOOR_SAMPLES,
                     until_ns: int | None = None) -> list[int]:
    """Sequential round trips to the cache (a GET of a missing key): the physical floor of a
    cache hit. At most until ``until_ns`` (wall clock), at least FLOOR_MIN of them: on a lossy
    link each lost packet costs a retransmission (200 ms or more), and 200 round trips there ate
    the whole lead, so the clients began after the trial's end."""
    times: list[int] = []
    while len(times) < samples and (until_ns is None or len(times) < FLOOR_MIN
                                    or time.time_ns() < until_ns):
        t0 = time.perf_counter_ns()
        round_trip()
        times.append(time.perf_counter_ns() - t0)
    return times


def floor_deadline_ns(spec: TrialSpec) -> int:
    """Half of the time left before the start instant (this host's clock): the rest is the
    clients' set-up."""
    now = time.time_ns()
    return now + max(0, spec.start_ns + spec.clock_offset_ns - now) // 2


def cache_floor_ns(kind: CacheServer, url: str, cache: Commands,
                   until_ns: int | None = None) -> list[int]:
    """The floor on the trial's cache: Redis through the clients' own path, memcached by a
    meta get on a connection of its own."""
    if kind is CacheServer.REDIS:
        return measure_floor_ns(lambda: cache.get("stampede:floor"), until_ns=until_ns)
    memcache = Memcache(url)
    try:
        return measure_floor_ns(memcache.touch_floor, until_ns=until_ns)
    finally:
        memcache.close()


def trial_cache(spec: TrialSpec, services: Services) -> tuple[CacheServer, str, Commands]:
    """The trial's cache: its kind (the strategy's), URL, and the Redis commands of the client
    threads (none for a strategy on memcached: it brings its own client)."""
    kind = spec.strategy_spec().cache_server
    url = services.cache_url_for(kind)
    if url is None:
        raise RuntimeError(f"{spec.strategy} needs a {kind.value} cache; this worker has none "
                           f"(STAMPEDE_CACHE_URL / STAMPEDE_MEMCACHE_URL)")
    if kind is not CacheServer.REDIS:
        return kind, url, NoCommands(f"{spec.strategy} keeps its values on {kind.value}")
    path = RedisPath(spec.redis_client)  # each client thread's own connection unless ``pooled``
    return kind, url, redis_commands(path, url, spec.clients, spec.redis_max_connections)


def http_floor_ns(spec: TrialSpec, services: Services, http: HttpTarget) -> list[int]:
    """An HTTP trial's floor: sequential GETs of the target's floor path when it names one,
    else the cache's round trip when this worker has the trial's cache, else none."""
    until = floor_deadline_ns(spec)
    if http.floor_path is not None:
        conn, request = floor_round_trip(http)
        try:
            conn.connect()
            return measure_floor_ns(lambda: conn.send(request), until_ns=until)
        finally:
            conn.close()
    if services.cache_url_for(spec.strategy_spec().cache_server) is None:
        return []
    kind, url, cache = trial_cache(spec, services)
    try:
        return cache_floor_ns(kind, url, cache, until)
    finally:
        cache.close()
