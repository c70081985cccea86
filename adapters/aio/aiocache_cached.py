"""aiocache 0.12 on Redis: ``@cached(ttl)`` and ``@cached_stampede(ttl, lease=2)``.

``cached`` reads, and on a miss calls the function and sets: no defence. ``cached_stampede``
reads; on a miss it takes ``RedLock(cache, key, lease)`` (``SET key-lock NX PX lease``), reads
again, and only then calls and sets; a caller that finds the lock taken waits on an
``asyncio.Event`` that the holder's release sets, at most ``lease`` seconds. That event lives in
a class-level dict of the process that took the lock: a caller in another process finds no
event (``KeyError``, caught), so it does not wait at all and goes on to the origin (measured in
tests/integration/test_aio_libraries.py).

The decorator builds its own ``RedisCache`` (``cache=Cache.REDIS`` and the connection's
arguments), with one plugin of ours (aiocache's documented ``BasePlugin`` hooks) that records
what each of the current request's reads returned. Values are the loader's bytes as they are (a
serializer that neither encodes nor decodes: aiocache's default, JSON, takes no bytes). Its
defaults stand but the pool, sized one connection per coroutine plus four (its default has no
bound), and the 2 s socket and connect timeouts (its default: none). aiocache logs and swallows
a failed read (``get_from_cache``): a Redis failure reads as a miss and the request loads.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

from aiocache import Cache, cached, cached_stampede
from aiocache.base import BaseCache
from aiocache.plugins import BasePlugin
from aiocache.serializers import BaseSerializer

from adapters.aio.base import TIMEOUT_S, AsyncDeps, pool_size
from adapters.aio.seen import CURRENT, Read, Request
from strategies import version
from strategies.base import HIT, Outcome, Probe

Origin = Callable[[str], Awaitable[bytes]]


class _Bytes(BaseSerializer):  # type: ignore[misc]
    """The loader's bytes as they are, read back as bytes (no text decoding)."""

    DEFAULT_ENCODING = None

    def dumps(self, value: Any) -> Any:
        return value

    def loads(self, value: Any) -> Any:
        return value


class _Seen(BasePlugin):  # type: ignore[misc]
    """What the current request's reads returned, and its write."""

    async def post_get(self, client: BaseCache, key: str, *args: Any, took: float = 0,
                       ret: Any = None, **kwargs: Any) -> None:
        request = CURRENT.get()
        if request is None or request.done:
            return
        ended = time.perf_counter_ns()
        took_ns = round(took * 1e9)
        request.reads.append(Read(ended - took_ns, ended, time.time_ns() - took_ns, ret,
                                  ret is not None))

    async def post_set(self, client: BaseCache, key: str, value: Any, *args: Any,
                       took: float = 0, ret: Any = None, **kwargs: Any) -> None:
        request = CURRENT.get()
        if request is not None and not request.done and request.loads and ret:
            version.stored(request.probe, bytes(value), time.time_ns() - round(took * 1e9))


def connection(url: str, deps: AsyncDeps) -> dict[str, Any]:
    """The ``RedisCache`` arguments for a ``redis://[:password@]host:port/db`` URL."""
    parts = urlsplit(url)
    db = parts.path.strip("/")
    return {"endpoint": parts.hostname or "127.0.0.1", "port": parts.port or 6379,
            "db": int(db) if db else 0, "password": parts.password,
            "pool_max_size": pool_size(deps), "create_connection_timeout": TIMEOUT_S,
            "connection_pool_kwargs": {"socket_timeout": TIMEOUT_S}}


@dataclass(frozen=True)
class AiocacheParams:
    pass


class Aiocache:
    name: ClassVar[str] = "aiocache"
    Params: ClassVar[type[Any]] = AiocacheParams

    def __init__(self, deps: AsyncDeps, params: Any) -> None:
        self._deps = deps
        self._ttl_s = deps.ttl_ms / 1000

        async def origin(key: str) -> bytes:
            return await self._origin(key)

        self._call: Origin = self._decorate(origin, cache=Cache.REDIS, serializer=_Bytes(),
                                            plugins=[_Seen()], ttl=self._ttl_s,
                                            key_builder=lambda _f, key: key,
                                            **connection(deps.servers.cache_url, deps))
        self.cache: BaseCache = self._call.cache  # type: ignore[attr-defined]

    def _decorate(self, origin: Origin, **kwargs: Any) -> Origin:
        wrapped: Origin = cached(**kwargs)(origin)
        return wrapped

    async def _origin(self, key: str) -> bytes:
        request = CURRENT.get()
        if request is None or request.done:  # never: aiocache loads in the caller's task
            return await self._deps.loader.load(key, Probe())
        request.loads += 1
        return await self._deps.loader.load(key, request.probe)

    async def fetch(self, key: str, probe: Probe) -> Outcome:
        request = Request(probe, key)
        token = CURRENT.set(request)
        try:
            value = await self._call(key)
        finally:
            request.done = True
            CURRENT.reset(token)
        version.served(probe, value)
        return self._outcome(request)

    def _outcome(self, request: Request) -> Outcome:
        reads = request.reads
        if len(reads) > 1:  # the lock (taken, waited for, or not found in this process) between
            request.probe.lock_wait_ns = reads[1].started_ns - reads[0].ended_ns
        if request.loads:
            return Outcome.FILLED
        return Outcome.WAITED if len(reads) > 1 else HIT

    async def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        left_s = max(expire_at_ms / 1000 - time.time(), 0.001)
        await self.cache.set(key, value, ttl=float(left_s))

    async def on_write(self, key: str, probe: Probe) -> None:
        await self.cache.delete(key)

    async def cached_version(self, key: str) -> int | None:
        raw = await self.cache.get(key)
        return None if raw is None else version.version_of(raw)

    async def aclose(self) -> None:
        await self.cache.close()


@dataclass(frozen=True)
class AiocacheStampedeParams:
    lease: float = 2.0  # s the lock lives and a waiter waits at most (aiocache's default: 2)

    def __post_init__(self) -> None:
        if not self.lease > 0:
            raise ValueError("lease must be > 0 (0 or None: no lock, which is plain aiocache)")


class AiocacheStampede(Aiocache):
    name: ClassVar[str] = "aiocache-stampede"
    Params: ClassVar[type[Any]] = AiocacheStampedeParams

    def __init__(self, deps: AsyncDeps, params: AiocacheStampedeParams) -> None:
        self._params = params
        super().__init__(deps, params)

    def _decorate(self, origin: Origin, **kwargs: Any) -> Origin:
        wrapped: Origin = cached_stampede(lease=self._params.lease, **kwargs)(origin)
        return wrapped
