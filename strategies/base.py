"""The strategy contract: pure cache logic, given its connections explicitly.

A strategy answers one request for one key. It knows the cache, the lock store and a loader
for the origin; it knows nothing of Celery, threads or Parquet. What it measures on the way
(origin time, pool wait, lock wait, stale age) it writes into the caller's ``Probe``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from strategies.commands import Commands
from strategies.params import ExpiryGrid


class CacheServer(enum.StrEnum):
    """The kind of cache server a strategy speaks to (its class's ``cache_server``)."""

    REDIS = "redis"
    MEMCACHED = "memcached"


class Outcome(enum.IntEnum):
    """How one request was answered (BRIEF section 3)."""

    HIT = 0
    STALE = 1
    FILLED = 2
    WAITED = 3
    ERROR = 4
    # A value came back and the server did not say how (an HTTP target that sends no outcome
    # header: a static or black-box service): neither a hit nor a fill can be claimed.
    ANSWERED = 5


# The hit path's answer, bound once: reading ``Outcome.HIT`` goes through the Enum class's
# attribute lookup, 160 ns on CPython 3.11, paid on every request that hits.
HIT = Outcome.HIT


class Probe:
    """Measurements of one request, filled in by strategy and loader.

    One instance per client thread, reset before each request, so the hot loop allocates
    nothing per request.
    """

    __slots__ = (
        "age_s",
        "cache_status",
        "fallback",
        "http_bytes",
        "http_status",
        "local_hit",
        "lock_wait_ns",
        "origin_calls",
        "origin_ns",
        "origin_start_ns",
        "pool_wait_ns",
        "refresh_of_ns",
        "set_ns",
        "stale_age_ns",
        "version_served",
        "version_set",
    )

    def __init__(self) -> None:
        self.reset()
        # HTTP clients (model.http): the response's status and body bytes (0: not HTTP), the
        # HTTP cache's word (model.http.CacheStatus, 0: none) and its Age header (-1: none).
        # Not cleared by ``reset``: only an HTTP trial's request sets them, and it sets all four
        # on every request, failed ones too (worker.http_fetch); the other trials' stay as here,
        # and their requests pay nothing for them.
        self.http_status = 0
        self.http_bytes = 0
        self.cache_status = 0
        self.age_s = -1

    def reset(self) -> None:
        self.origin_calls = 0
        self.origin_start_ns = 0
        self.origin_ns = 0
        self.pool_wait_ns = 0
        self.lock_wait_ns = 0
        self.stale_age_ns = 0
        self.local_hit = 0
        self.fallback = 0  # 1: the cache failed and the origin answered (on_cache_error=origin)
        # A refresh of a value that had not expired yet: that value's expiry stamp (ns). It names
        # the refresh cycle the origin call belongs to (results.figures.events); 0 for any other call.
        self.refresh_of_ns = 0
        # Versions (strategies.version): what this request answered with and wrote (-1: none),
        # and when that cache write was sent (0: none).
        self.version_served = -1
        self.version_set = -1
        self.set_ns = 0


class Loader(Protocol):
    """Computes a key's value from the origin and records the cost in ``probe``."""

    def load(self, key: str, probe: Probe) -> bytes: ...


Job = Callable[[Probe], "Outcome"]


class Background(Protocol):
    """Runs work off the request path (swr's refresh) and records it as its own row.

    Every origin call a job makes must land in a row, so the client count of origin calls
    still equals PostgreSQL's own counter.
    """

    def submit(self, key: str, job: Job) -> None: ...


class Clock(Protocol):
    """The time a strategy's logic reads (strategies.core): a monotonic clock for waits, the
    wall clock for expiries and version stamps. The drivers give the system's; a test or a
    simulation gives its own (``Deps.clock``)."""

    def now_ns(self) -> int: ...

    def wall_ns(self) -> int: ...


@dataclass(frozen=True)
class Servers:
    """Where the cache and the lock store are, for strategies that bring a client of their own
    (the third-party libraries in ``adapters/``): URLs, and how many threads share the strategy
    (its client's pool is sized for them, as ours are)."""

    cache_url: str
    lock_url: str
    threads: int = 1


@dataclass(frozen=True)
class Deps:
    """What every strategy is built with: explicit connections and the cache TTL.

    ``cache`` and ``locks`` are the commands to the two servers (strategies.commands): the
    worker gives its client threads the lean path, the coordinator the plain pooled one.

    ``background`` is optional: without it, work a strategy would run in the background runs
    inline in the request that triggered it (and is counted there).
    """

    cache: Commands
    locks: Commands
    loader: Loader
    ttl_ms: int
    background: Background | None = None
    expiry_grid: ExpiryGrid | None = None  # --expiry aligned; None: each value lives one TTL
    servers: Servers | None = None  # for strategies with clients of their own (adapters/)
    clock: Clock | None = None  # the ported strategies' clock (strategies.core); None: the system's
    sleep: Callable[[float], None] | None = None  # how their threaded driver waits; None: time.sleep
    # How their threaded driver parks a request until a condition holds (local-lock's flight
    # ended) or a timeout; None: on a threading.Event. A scripted scheduler's in tests.
    park: Callable[[Callable[[], bool], float], None] | None = None
    # A core that subscribes to a channel (two-level's invalidations): True, the threaded
    # driver's listener thread (strategies.drivers.listen) starts with the strategy; False,
    # whoever runs it listens (the asyncio driver's task, the simulator's store).
    listen: bool = True


class Strategy(Protocol):
    """A stampede defence."""

    name: ClassVar[str]

    def fetch(self, key: str, probe: Probe) -> Outcome:
        """Answer one request; raise on failure (the caller records an error row)."""
        ...

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        """Store ``value`` in this strategy's own format so that it expires at ``expire_at_ms``."""
        ...

    def on_write(self, key: str, probe: Probe) -> None:
        """The origin row behind ``key`` changed and committed: bring the cache in line, this
        strategy's way (its ``on_write`` parameter: delete, or write the new value through)."""
        ...

    def cached_version(self, key: str) -> int | None:
        """The origin version the cache server holds for ``key`` in this strategy's format
        (None: nothing): the servers' own word at the end of a trial."""
        ...


class StrategyError(Exception):
    """A request a strategy could not answer (recorded as an error row with this type)."""


class LockWaitTimeout(StrategyError):
    """A waiter gave up: the value did not appear within the bounded wait."""


class LockStoreDown(StrategyError):
    """The lock store failed; under ``on_lock_error=closed`` the request fails with this type."""


def close_strategy(strategy: object) -> None:
    """Stop what a strategy runs on its own (two-level's invalidation listener), if anything."""
    close = getattr(strategy, "close", None)
    if callable(close):
        close()


def error_text(exc: BaseException) -> str:
    """An error row's text: the type and message, and what caused it when a library wraps
    the real failure (meta-memcache raises ``MemcacheServerError: Memcache error`` for any)."""
    text = f"{type(exc).__name__}: {exc}"
    if (cause := exc.__cause__) is not None:
        text += f" (from {type(cause).__name__}: {cause})"
    return text[:200]
