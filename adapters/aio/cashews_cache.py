"""cashews 7 on Redis: ``@cache(ttl, protected=..., lock=...)``, ``@cache.locked(...)`` over
``@cache``, and ``@cache.hit(...)`` (its README's recipes); ``early`` and ``soft`` are in
adapters.aio.cashews_early.

Each strategy owns a ``cashews.Cache()`` set up on the cache server's URL with one middleware
of ours (cashews' documented extension point) that records, for the current request, what each
read (``GET``), lock attempt (``SET_LOCK``) and hit counter (``INCR``) returned; the decorated
function is our loader's door. cashews' own defaults stand except the client's pool and
timeouts: ``max_connections`` one per coroutine plus four (cashews' 10 would queue the
coroutines on its ``BlockingConnectionPool`` for up to 10 s) and 2 s socket and connect timeouts
(cashews' 1 s and none). Its ``suppress=True`` default stays: a Redis failure reads as a miss,
so the request goes to the origin (a ``filled`` row, not an error). Values are the loader's
bytes, pickled by cashews' Redis serializer.

``protected`` (default on) is one ``asyncio.Task`` per key per process: the coroutines that call
while it runs await it. ``lock=True`` takes cashews' lock (``SET lock:KEY NX PX ttl``) around the
whole cached call, hits included, its waiters looping ``SET NX``, ``PING``, ``sleep(0)``;
``cashews-locked`` is the README's other way, ``@cache.locked(lock_ttl, check_interval=...)``
over ``@cache``, in the same order (a waiter that gets the lock reads the cache first) with the
lock's knobs. (The other order, the lock under ``@cache``, only serialises the herd: nothing
reads the cache again under the lock, so every waiter loads in turn.)
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from cashews import Cache, Command

from adapters.aio.base import TIMEOUT_S, AsyncDeps, pool_size
from adapters.aio.seen import CURRENT, Fills, Read, Request, joined
from strategies import version
from strategies.base import HIT, Outcome, Probe

Origin = Callable[[str], Awaitable[bytes]]
_WATCHED = frozenset({Command.GET, Command.SET, Command.SET_LOCK, Command.INCR})


def _until_s(expire_at_ms: int) -> float:
    return expire_at_ms / 1000 - time.time()


class CashewsStrategy:
    """What every cashews decorator shares: the client, the middleware, the loader's door."""

    name: ClassVar[str]
    prefix: ClassVar[str] = ""  # the decorator's key prefix (its ``prefix`` default)

    def __init__(self, deps: AsyncDeps) -> None:
        self._deps = deps
        self._ttl_s = deps.ttl_ms / 1000
        self._fills = Fills()
        self.cache = Cache()
        self.cache.setup(deps.servers.cache_url, middlewares=(self._seen,),
                         max_connections=pool_size(deps), socket_timeout=TIMEOUT_S,
                         socket_connect_timeout=TIMEOUT_S)

        async def origin(key: str) -> bytes:
            return await self._origin(key)

        self._call: Origin = self._decorate(origin)

    def _decorate(self, origin: Origin) -> Origin:
        raise NotImplementedError

    def cache_key(self, key: str) -> str:
        return f"{self.prefix}:{key}" if self.prefix else key

    def _payload(self, stored: Any) -> bytes:
        """Our bytes inside what the decorator stores (early and soft: ``[expire_at, bytes]``)."""
        return bytes(stored)

    def _refresh(self, request: Request) -> bool:
        """Whether a load made now runs off the request path (the request serves what it read)."""
        return False

    async def _origin(self, key: str) -> bytes:
        request = CURRENT.get()
        if request is None or request.done or self._refresh(request):
            return await self._refresh_load(key, request)
        request.loads += 1
        try:
            value = await self._deps.loader.load(key, request.probe)
        except Exception:
            request.load_failed = True
            raise
        self._fills.completed(key)
        return value

    async def _refresh_load(self, key: str, request: Request | None) -> bytes:
        probe = Probe()
        if request is not None and request.reads:
            probe.refresh_of_ns = self._refresh_of_ns(request.reads[-1])
        value = await self._deps.loader.load(key, probe)
        version.served(probe, value)
        if self._deps.refreshes is not None:
            self._deps.refreshes.record(key, probe)
        return value

    def _refresh_of_ns(self, read: Read) -> int:
        return 0

    async def _seen(self, call: Callable[..., Awaitable[Any]], cmd: Command, backend: Any,
                    *args: Any, **kwargs: Any) -> Any:
        """cashews middleware: what this request's commands returned."""
        request = CURRENT.get()
        if request is None or request.done or cmd not in _WATCHED:
            return await call(*args, **kwargs)
        at_ns, started = time.time_ns(), time.perf_counter_ns()
        result = await call(*args, **kwargs)
        ended = time.perf_counter_ns()
        if cmd is Command.GET:
            read = Read(started, ended, at_ns, result, result is not kwargs.get("default"))
            request.reads.append(read)
            self._fills.last_read[request.key] = read
        elif cmd is Command.SET_LOCK:  # a waiter's attempt (early's SET NX never waits: not one)
            request.locks.append((started, ended, bool(result)))
        elif cmd is Command.INCR:
            request.counted.append(int(result))
        elif cmd is Command.SET and request.loads and result and kwargs.get("exist") is None:
            version.stored(request.probe, self._payload(kwargs["value"]), at_ns)
        return result

    async def fetch(self, key: str, probe: Probe) -> Outcome:
        request = Request(probe, key)
        token = CURRENT.set(request)
        fills_before = self._fills.count(key)
        try:
            value = await self._call(key)
        finally:
            request.done = True
            CURRENT.reset(token)
        version.served(probe, value)
        return self._outcome(request, fills_before)

    def _outcome(self, request: Request, fills_before: int) -> Outcome:
        probe = request.probe
        probe.lock_wait_ns = request.lock_wait_ns()
        if request.loads and not request.load_failed:
            return Outcome.FILLED
        if request.loads:  # soft served the value it read because the recompute raised
            self._read_outcome(request.reads[-1], probe)  # its stale_age_ns
            return Outcome.STALE
        if not request.reads:  # joined another coroutine's task (protected)
            return joined(request, fills_before, self._fills, self._read_outcome)
        if probe.lock_wait_ns:
            return Outcome.WAITED
        return self._read_outcome(request.reads[-1], probe)

    def _read_outcome(self, read: Read, probe: Probe) -> Outcome:
        return HIT

    async def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        await self.cache.set(self.cache_key(key), value, expire=max(_until_s(expire_at_ms), 0.001))

    async def on_write(self, key: str, probe: Probe) -> None:
        await self.cache.delete(self.cache_key(key))

    async def cached_version(self, key: str) -> int | None:
        stored = await self.cache.get(self.cache_key(key))
        return None if stored is None else version.version_of(self._payload(stored))

    async def aclose(self) -> None:
        await self.cache.close()


@dataclass(frozen=True)
class CashewsParams:
    protected: bool = True  # one task per key per process (cashews' default)
    lock: bool = False  # cashews' lock around the whole call, check_interval=0


class Cashews(CashewsStrategy):
    name: ClassVar[str] = "cashews"
    Params = CashewsParams

    def __init__(self, deps: AsyncDeps, params: CashewsParams) -> None:
        self._params = params
        super().__init__(deps)

    def _decorate(self, origin: Origin) -> Origin:
        p = self._params
        wrapped: Origin = self.cache(ttl=self._ttl_s, key="{key}", protected=p.protected,
                                     lock=p.lock)(origin)
        return wrapped


@dataclass(frozen=True)
class CashewsLockedParams:
    lock_ttl: float = 10.0  # s the lock lives (cashews needs one; its README's example: 10s)
    check_interval: float = 0.0  # s a waiter sleeps between attempts (cashews' default: 0)

    def __post_init__(self) -> None:
        if not self.lock_ttl > 0:
            raise ValueError("lock_ttl must be > 0")
        if self.check_interval < 0:
            raise ValueError("check_interval must be >= 0")


class CashewsLocked(CashewsStrategy):
    """``@cache.locked`` over ``@cache``: the order ``lock=True`` uses, with the lock's knobs."""

    name: ClassVar[str] = "cashews-locked"
    Params = CashewsLockedParams

    def __init__(self, deps: AsyncDeps, params: CashewsLockedParams) -> None:
        self._params = params
        super().__init__(deps)

    def _decorate(self, origin: Origin) -> Origin:
        p = self._params
        cached: Origin = self.cache(ttl=self._ttl_s, key="{key}")(origin)
        locked: Origin = self.cache.locked(ttl=p.lock_ttl, key="{key}",
                                           check_interval=p.check_interval)(cached)
        return locked


@dataclass(frozen=True)
class CashewsHitParams:
    cache_hits: int = 100  # hits before the value is dropped (no library default; its README's)
    update_after: int = 0  # refresh in the background at this hit; 0: never (its default)

    def __post_init__(self) -> None:
        if self.cache_hits < 1 or self.update_after < 0:
            raise ValueError("cache_hits must be >= 1 and update_after >= 0")


class CashewsHit(CashewsStrategy):
    name: ClassVar[str] = "cashews-hit"
    Params = CashewsHitParams
    prefix: ClassVar[str] = "hit"

    def __init__(self, deps: AsyncDeps, params: CashewsHitParams) -> None:
        self._params = params
        super().__init__(deps)

    def _decorate(self, origin: Origin) -> Origin:
        p = self._params
        wrapped: Origin = self.cache.hit(ttl=self._ttl_s, cache_hits=p.cache_hits,
                                         update_after=p.update_after, key="{key}")(origin)
        return wrapped

    def _refresh(self, request: Request) -> bool:
        """A load while serving a counted hit is ``update_after``'s background refresh."""
        return bool(request.reads and request.reads[-1].found and request.counted
                    and request.counted[-1] <= self._params.cache_hits)
