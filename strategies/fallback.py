"""``on_cache_error=origin``: a request whose cache read or write fails is answered by the origin.

Production code around a cache mostly reads ``try: cache.get() except: db()``, so when the cache
goes down the database takes the whole load: the question experiment 003 asked. Rather than a
``try`` in every code path of every strategy, one wrapper is put around the strategy where it is
built (``StrategySpec.build``), and only under ``origin``: under ``fail`` (the default) the
strategy is built bare and behaves exactly as before.

What counts as a cache failure: a ``redis.RedisError`` that leaves the strategy and says the
server is unreachable, slow or refusing writes (``cache_failed``). Lock-store failures never
leave it raw (``strategies.locking.lock_store`` turns them into ``LockStoreDown``, which
``on_lock_error`` handles), so such an error came from the cache client (lease and two-level
keep all their state on the cache, so theirs are cache failures too). Errors that are ours, not
the cache's, stay error rows under both policies: an exhausted client pool (experiment 000's
defect b, which a fallback would hide as origin load), bad credentials, a wrong command.

The fallback goes through the strategy's own loader: the same pool and the same pool timeout
bound it, and every call lands in the probe, so the clients' origin count still equals
PostgreSQL's. A request that already had its value from the origin when the cache write failed
is answered with that value: no second origin call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import redis

from strategies import version
from strategies.base import Background, Deps, Job, Loader, Outcome, Probe, Strategy, close_strategy
from strategies.core.fallback import (
    FallbackCore,
    FallbackSteps,
    answered,
    cache_failed,
    from_origin,
)
from strategies.params import CacheErrorPolicy, WriteParams

__all__ = ["CacheFallback", "PortedFallback", "answered", "build", "cache_failed"]


class CacheFallback:
    """A Strategy that answers from the origin when the one it wraps meets a failing cache: the
    threaded wrapper, for strategies whose logic is not a core (the adapters)."""

    name: ClassVar[str] = "on_cache_error=origin"  # the wrapped strategy keeps its own name

    def __init__(self, inner: Strategy, loader: Loader) -> None:
        self.inner = inner
        self._loader = loader

    def fetch(self, key: str, probe: Probe) -> Outcome:
        try:
            return self.inner.fetch(key, probe)
        except redis.RedisError as exc:
            if not cache_failed(exc):
                raise
            if not answered(probe):
                probe.fallback = 1  # not a miss: no expiry's herd (results.figures.events)
                version.served(probe, self._loader.load(key, probe))
            return Outcome.FILLED

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        """Priming is set-up, not a request: a cache that fails here fails the trial."""
        self.inner.prime(key, value, expire_at_ms)

    def on_write(self, key: str, probe: Probe) -> None:
        """Not caught: an invalidation that did not reach the cache cannot be made good by
        reading the origin, so the write's row says it failed."""
        self.inner.on_write(key, probe)

    def cached_version(self, key: str) -> int | None:
        return self.inner.cached_version(key)

    def close(self) -> None:
        close_strategy(self.inner)


class PortedFallback(CacheFallback):
    """The fallback around a ported strategy: its logic is ``strategies.core.fallback`` over
    the inner's core, so the asyncio driver and the simulator run it too (``sans_io``)."""

    sans_io: ClassVar[bool] = True

    def __init__(self, inner: Any, loader: Loader) -> None:
        super().__init__(inner, loader)
        whole = not hasattr(inner.core, "hit")  # one generator (lease)
        self.core: Any = FallbackSteps(inner.core) if whole else FallbackCore(inner.core)
        self.driver = inner.driver
        self._cache = inner._deps.cache

    def fetch(self, key: str, probe: Probe) -> Outcome:
        """The threaded driver's request shape (``Driven.fetch``), with the first GET's
        failure handed to the core. A core that is one generator (lease, no background jobs)
        keeps its inner's fast path, the same policy (``from_origin``) after it: a hit starts
        no generator here either."""
        core, run = self.core, self.driver.run
        if type(core) is FallbackSteps:
            try:
                inner: Outcome = self.inner.fetch(key, probe)
                return inner
            except redis.RedisError as exc:
                fell: Outcome = run(from_origin(key, exc, probe), probe)
                return fell
        try:
            raw = self._cache.get(key)
        except redis.RedisError as exc:
            failed: Outcome = run(core.get_failed(key, exc, probe), probe)
            return failed
        outcome: Outcome | None = core.hit(key, raw, probe)
        if outcome is None:
            outcome = run(core.miss(key, raw, probe), probe)
        return outcome


class _GuardedBackground:
    """Background jobs (swr's refresh) whose value was loaded before the cache write failed
    are ``filled`` rows, not errors; a refresh that failed before it loaded stays an error."""

    def __init__(self, inner: Background) -> None:
        self._inner = inner

    def submit(self, key: str, job: Job) -> None:
        def guarded(probe: Probe) -> Outcome:
            try:
                return job(probe)
            except redis.RedisError as exc:
                if cache_failed(exc) and answered(probe):
                    return Outcome.FILLED
                raise

        self._inner.submit(key, guarded)


def build(make: Callable[[Deps, Any], Strategy], deps: Deps, params: WriteParams) -> Strategy:
    """``make(deps, params)``, wrapped when ``params.on_cache_error`` is ``origin`` (the
    libraries' strategies take no such parameter: built bare)."""
    if getattr(params, "on_cache_error", CacheErrorPolicy.FAIL) is CacheErrorPolicy.FAIL:
        return make(deps, params)
    if getattr(make, "sans_io", False):  # its core guards its own jobs
        return PortedFallback(make(deps, params), deps.loader)
    if deps.background is not None:
        deps = dataclasses.replace(deps, background=_GuardedBackground(deps.background))
    return CacheFallback(make(deps, params), deps.loader)
