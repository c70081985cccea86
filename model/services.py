"""Where the services are (URLs from the command line or the environment, masked when written),
and the connection factories both sides use to reach them."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from psycopg_pool import ConnectionPool
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from model.lean import LeanCommands
from model.memcache import SCHEME as MEMCACHE_SCHEME
from strategies.base import CacheServer
from strategies.commands import Commands, PlainCommands

ENV = {
    "cache_url": "STAMPEDE_CACHE_URL",
    "lock_url": "STAMPEDE_LOCK_URL",
    "broker_url": "STAMPEDE_BROKER_URL",
    "origin_dsn": "STAMPEDE_ORIGIN_DSN",
}
NO_DSN = ("origin_dsn",)  # may be unset: the origin is an HTTP service (--origin-url)
# A memcached cache beside a Redis one (a run that mixes meta-memcache with Redis strategies);
# optional everywhere, and empty when unset.
OPTIONAL_ENV = {"memcache_url": "STAMPEDE_MEMCACHE_URL"}
REDIS_SCHEMES = ("redis", "rediss", "unix")

# A process's metrics endpoint (worker or coordinator): port and listen address.
METRICS_PORT_ENV, METRICS_ADDR_ENV = "STAMPEDE_METRICS_PORT", "STAMPEDE_METRICS_ADDR"

# application_name of the two kinds of origin connections (the origin:exhaust fault tells them apart)
WORKER_APP = "stampede-worker"
COORDINATOR_APP = "stampede-coordinator"


@dataclass(frozen=True)
class Services:
    """The four services of an experiment. Workers read theirs from the environment."""

    cache_url: str  # Redis, or memcached (memcache://HOST:PORT)
    lock_url: str
    broker_url: str
    origin_dsn: str
    memcache_url: str = ""  # a memcached cache beside a Redis cache_url ("": none)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Services:
        """The services from ``STAMPEDE_*``; the origin DSN may be absent (an HTTP origin)."""
        env = os.environ if environ is None else environ
        missing = [var for name, var in ENV.items() if not env.get(var) and name not in NO_DSN]
        if missing:
            raise KeyError(f"environment variables not set: {', '.join(missing)}")
        optional = {name: env.get(var, "") for name, var in OPTIONAL_ENV.items()}
        return cls(**{name: env.get(var, "") for name, var in ENV.items()}, **optional)

    def to_env(self) -> dict[str, str]:
        names = {**ENV, **OPTIONAL_ENV}
        return {names[f.name]: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}

    def cache_url_for(self, kind: CacheServer) -> str | None:
        """The URL of the cache of ``kind`` (None: the run has no such cache)."""
        if cache_kind(self.cache_url) is kind:
            return self.cache_url
        if kind is CacheServer.MEMCACHED and self.memcache_url:
            return self.memcache_url
        return None

    def masked(self) -> dict[str, str]:
        return {f.name: mask_url(getattr(self, f.name)) for f in fields(self)}


def cache_kind(url: str) -> CacheServer:
    """Which cache server a URL names, by its scheme."""
    scheme = urlsplit(url).scheme
    if scheme == MEMCACHE_SCHEME:
        return CacheServer.MEMCACHED
    if scheme in REDIS_SCHEMES:
        return CacheServer.REDIS
    raise ValueError(f"not a cache URL (redis:// or {MEMCACHE_SCHEME}://): {mask_url(url)}")


def mask_url(url: str) -> str:
    """Replace the password in ``url`` with ``***`` (also a ``password=`` keyword)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user_info, _, host = netloc.rpartition("@")
        user = user_info.split(":", 1)[0]
        netloc = f"{user}:***@{host}"
    query = "&".join(
        "password=***" if item.lower().startswith("password=") else item
        for item in parts.query.split("&")
    ) if parts.query else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def make_pool(dsn: str, size: int, timeout_s: float = 10.0, app_name: str = WORKER_APP,
              check: bool = False, read_only: bool = False) -> ConnectionPool:
    """A fixed-size pool, opened and filled before it is returned.

    ``check``: test each connection before use (one extra round trip), so a pool outside the
    measured path survives its server dropping connections (the origin:exhaust fault).
    ``read_only``: every session refuses writes (``default_transaction_read_only``), for a
    user's database measured with a statement of theirs.
    """
    kwargs: dict[str, Any] = {"autocommit": True, "application_name": app_name,
                              "connect_timeout": 5}
    if read_only:
        kwargs["options"] = "-c default_transaction_read_only=on"
    pool = ConnectionPool(
        dsn,
        min_size=size,
        max_size=size,
        kwargs=kwargs,
        check=ConnectionPool.check_connection if check else None,
        open=False,
        timeout=timeout_s,
        name="origin",
    )
    pool.open(wait=True, timeout=timeout_s)
    return pool


class RedisPath(enum.StrEnum):
    """How client threads reach the cache and the lock store (``--redis-client``; docs/redis-client.md)."""

    LEAN = "lean"  # a connection owned by each client thread, commands packed once (model.lean)
    POOLED = "pooled"  # redis.Redis over a shared pool: the reference, and the fallback


class ClientDriver(enum.StrEnum):
    """What runs a trial's clients on a worker (``--client-driver``; docs/distributed.md)."""

    THREADS = "threads"  # one thread per client (worker.trial): the default
    ASYNCIO = "asyncio"  # one coroutine per client in one event loop per worker (worker.aio.trial)


def _client_kwargs(retries: int) -> dict[str, Any]:
    """No retries by default: redis-py would otherwise retry a dead server 10 times with backoff,
    hiding the failure for seconds; in the measured path a failed command is an error row,
    bounded by the 2 s socket timeouts."""
    return {"socket_timeout": 2.0, "socket_connect_timeout": 2.0,
            "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), retries)}


def connection_bound(clients: int, max_connections: int | None = None) -> int:
    """Connections per server: one per client thread plus a few (floor, refresh, writer)."""
    return max_connections or clients + 4


def redis_client(url: str, clients: int, max_connections: int | None = None,
                 retries: int = 0) -> redis.Redis:
    """A client whose pool holds one connection per thread plus a few; exhaustion raises."""
    return redis.Redis.from_url(url, max_connections=connection_bound(clients, max_connections),
                                **_client_kwargs(retries))


def redis_commands(path: RedisPath, url: str, clients: int,
                   max_connections: int | None = None) -> Commands:
    """The client threads' commands to one server, by ``path``, with the same timeouts, the same
    bound on connections (one per thread plus a few) and the same exceptions either way."""
    if path is RedisPath.POOLED:
        return PlainCommands(redis_client(url, clients, max_connections))
    return LeanCommands.from_url(url, connection_bound(clients, max_connections),
                                 **_client_kwargs(0))
