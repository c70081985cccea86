"""The run's cache servers as the coordinator sees them, by kind (Redis, memcached).

For each kind the run's strategies use: the client that primes and reads the servers' word at
a trial's end, the flush between trials, the commands the server counted (what each defence
costs it: Redis's ``INFO commandstats``, memcached's ``stats``) and the listener of the
expiries it reports. The lock store is always Redis.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from typing import Any

import orjson
import redis

from coordinator.expiry import ExpiryListener
from model.memcache import Memcache, counters_of
from model.services import Services, redis_client
from strategies.base import CacheServer
from strategies.commands import Commands, NoCommands, PlainCommands

# The harness's own commands, not the strategy's: the counter reads themselves.
OWN_COMMANDS = frozenset({"info"})


def redis_counters(client: redis.Redis) -> dict[str, int]:
    """Calls per command the server counted (``INFO commandstats``), ours left out."""
    stats: dict[str, Any] = client.info("commandstats")
    counts = {name.removeprefix("cmdstat_"): int(value.get("calls", 0))
              for name, value in stats.items()}
    return {name: calls for name, calls in counts.items() if name not in OWN_COMMANDS}


class RunCaches:
    """Connections to the caches of ``kinds``; ``start`` the listeners, ``close`` everything."""

    def __init__(self, services: Services, kinds: Collection[CacheServer]) -> None:
        self.services = services
        self.urls = {kind: self._url(kind) for kind in kinds}
        self.redis = (redis_client(self.urls[CacheServer.REDIS], 4, retries=3)
                      if CacheServer.REDIS in kinds else None)
        self.memcache = (Memcache(self.urls[CacheServer.MEMCACHED])
                         if CacheServer.MEMCACHED in kinds else None)
        self.listeners = {kind: ExpiryListener(url, self.redis if kind is CacheServer.REDIS else None,
                                               kind) for kind, url in self.urls.items()}

    def _url(self, kind: CacheServer) -> str:
        url = self.services.cache_url_for(kind)
        if url is None:
            raise ValueError(f"the run has no {kind.value} cache")
        return url

    def start(self) -> None:
        for listener in self.listeners.values():
            listener.start()

    def commands(self, kind: CacheServer) -> Commands:
        """What the coordinator's strategies send as ``Deps.cache`` (priming, the end check)."""
        if kind is CacheServer.REDIS and self.redis is not None:
            return PlainCommands(self.redis)
        return NoCommands(f"the {kind.value} cache is reached by its strategy's own client")

    def flush(self, kind: CacheServer) -> None:
        """Clear what the last trial left."""
        if kind is CacheServer.REDIS and self.redis is not None:
            self.redis.flushdb()
        elif self.memcache is not None:
            self.memcache.flush()

    def counters(self, kind: CacheServer) -> dict[str, int]:
        """Commands the cache of ``kind`` counted so far, by command."""
        if kind is CacheServer.REDIS and self.redis is not None:
            return redis_counters(self.redis)
        assert self.memcache is not None
        return counters_of(self.memcache.stats())

    def watcher_skipped(self) -> int:
        """memcached's count of log lines it could not send to a slow watcher (0: Redis)."""
        return self.memcache.stats().get("log_watcher_skipped", 0) if self.memcache else 0

    def ttl_left_ms(self, kind: CacheServer, key: str) -> int:
        """The server's remaining TTL of ``key`` as PTTL says it (-1 none, -2 no key)."""
        if kind is CacheServer.REDIS and self.redis is not None:
            return int(self.redis.pttl(key))
        assert self.memcache is not None
        return self.memcache.ttl_left_ms(key)

    def close(self) -> None:
        for listener in self.listeners.values():
            listener.close()
        if self.redis is not None:
            self.redis.close()
        if self.memcache is not None:
            self.memcache.close()


Counts = dict[str, int]


def _read_or_none(read: Callable[[], Counts]) -> Counts | None:
    """The server's counters, or None when it cannot say (killed or paused by a fault)."""
    try:
        return read()
    except (redis.RedisError, OSError):
        return None


def spent_between(before: Counts | None, after: Counts | None) -> Counts | None:
    """Calls per command from ``before`` to ``after`` (those called only); None when either
    read failed or a counter went back (the server restarted in between: a fault)."""
    if before is None or after is None:
        return None
    if any(after.get(name, 0) < calls for name, calls in before.items()):
        return None
    return {name: calls - before.get(name, 0) for name, calls in after.items()
            if calls > before.get(name, 0)}


class CommandCounts:
    """The commands the trial's cache and the lock store counted over one trial: read just
    before its start instant (the workers' floor round trips and connection set-up are done by
    then) and again once its rows are in. A server that could not be read, or restarted in
    between, has no count for the trial (None), never a wrong one."""

    LEAD_S = 0.01  # the first read, this long before the start instant

    def __init__(self, caches: RunCaches, kind: CacheServer, locks: redis.Redis,
                 start_ns: int, front: tuple[str, Callable[[], Counts]] | None = None) -> None:
        """``front``: the HTTP cache in front of the app tier, its name and its counters (the
        server ``front`` in commands.parquet: Varnish's varnishstat, nginx's stub_status)."""
        self._read: dict[str, Callable[[], Counts]] = {
            "cache": lambda: caches.counters(kind), "lock-store": lambda: redis_counters(locks)}
        self._kinds = {"cache": kind.value, "lock-store": CacheServer.REDIS.value}
        if front is not None:
            self._read["front"], self._kinds["front"] = front[1], front[0]
        self.kind = kind
        self._before: dict[str, Counts | None] = dict.fromkeys(self._read)
        self.spent: dict[str, Counts | None] = dict.fromkeys(self._read)
        self._timer = threading.Timer(max(0.0, (start_ns - time.time_ns()) / 1e9 - self.LEAD_S),
                                      self._take_before)
        self._timer.start()

    def _take_before(self) -> None:
        self._before = {server: _read_or_none(read) for server, read in self._read.items()}

    def finish(self) -> None:
        """Read again: calls per command and server over the trial."""
        self._timer.cancel()  # a trial that ended before its start (a failed dispatch): unknown
        self._timer.join()
        self.spent = {server: spent_between(self._before[server], _read_or_none(read))
                      for server, read in self._read.items()}

    def rows(self, run_id: str, trial: int) -> list[dict[str, Any]]:
        """``commands.parquet``'s rows of the trial (none for a server without a count)."""
        return [{"run_id": run_id, "trial": trial, "server": server, "kind": self._kinds[server],
                 "command": name, "calls": calls}
                for server, counts in self.spent.items() for name, calls in sorted((counts or {}).items())]

    def columns(self, requests: int) -> dict[str, Any]:
        """The trial's columns: totals, and per client request of the whole trial (None and NaN
        for a server without a count)."""
        totals = {s: None if c is None else sum(c.values()) for s, c in self.spent.items()}

        def per_request(total: int | None) -> float:
            return total / requests if total is not None and requests else float("nan")

        return {"cache_commands": totals["cache"], "lock_commands": totals["lock-store"],
                "cache_commands_per_request": per_request(totals["cache"]),
                "lock_commands_per_request": per_request(totals["lock-store"]),
                "cache_server": self.kind.value,
                "front_counters": orjson.dumps(self.spent.get("front") or {}).decode()
                if "front" in self.spent else ""}
