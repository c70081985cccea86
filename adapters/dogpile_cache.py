"""dogpile.cache 1.5 on its Redis backend: ``region.get_or_create(key, creator)``.

dogpile's own defence: one creator per key regenerates an expired value while every other
reader gets the old value at once; with no value at all the readers block on the creator's
mutex. That mutex is a ``threading.Lock`` per process unless ``distributed_lock=True`` (then a
redis-py lock on the cache server itself, polled every ``lock_sleep``). Expiry is dogpile's
own (``expiration_time``, here the trial's TTL, against the creation time stored with the
value); Redis keeps the key for ever unless ``redis_expiration_time`` is set, so the events are
refresh cycles named by the replaced value's expiry (creation time + TTL), not expiries the
server reports.

Values are the loader's bytes as they are, behind dogpile's own metadata
(``{"ct": ..., "v": 2}|bytes``): the region's serializer is the identity, not its default pickle.
What each request did is read from what the backend served it (``_Seen``, a ``ProxyBackend``,
dogpile's own extension point): a creator that ran is ``filled``; an expired value served
without creating is ``stale``; a miss that returned without creating waited for another
creator (``waited``, from the first read to the last); anything else is a ``hit``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import orjson
from dogpile.cache import make_region
from dogpile.cache.api import NO_VALUE
from dogpile.cache.proxy import ProxyBackend
from dogpile.cache.region import CacheRegion, value_version

from adapters.recipe import check_timeout, own_expiry, seconds_or_none, servers_of
from model.services import redis_client
from strategies import version
from strategies.base import HIT, Deps, Outcome, Probe
from strategies.params import OnWrite, WriteParams


@dataclass(frozen=True)
class DogpileParams(WriteParams):
    distributed_lock: bool = False  # False: a threading.Lock per process (dogpile's default)
    lock_timeout: float = -1.0  # seconds the distributed lock lives; -1: None, for ever
    lock_sleep: float = 0.1  # seconds between a blocked reader's lock attempts (distributed)
    thread_local_lock: bool = True  # dogpile warns when distributed_lock is on with it
    redis_expiration_time: int = 0  # seconds Redis keeps a key; 0: no Redis TTL (the default)

    def __post_init__(self) -> None:
        check_timeout("lock_timeout", self.lock_timeout)
        if not self.lock_sleep > 0:
            raise ValueError("lock_sleep must be > 0")
        if self.redis_expiration_time < 0:
            raise ValueError("redis_expiration_time must be >= 0")


@dataclass
class _Request:
    """What the backend did for the current request of one thread."""

    probe: Probe
    reads: list[tuple[int, int, float | None]] = field(default_factory=list)  # start, end, ct
    created: bool = False


def _created_at(raw: bytes) -> float:
    """The creation time in dogpile's stored metadata (``{"ct": ..., "v": 2}|payload``)."""
    return float(orjson.loads(raw.partition(b"|")[0])["ct"])


def _payload(raw: bytes) -> bytes:
    return raw.partition(b"|")[2]


class _Seen(ProxyBackend):
    """Records, per thread, every read (with the creation time it found) and every write."""

    def __init__(self, current: threading.local) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._current = current

    def get_serialized(self, key: Any) -> Any:
        started = time.time_ns()
        raw = self.proxied.get_serialized(key)
        request: _Request | None = getattr(self._current, "request", None)
        if request is not None:
            ct = None if raw is NO_VALUE or raw is None else _created_at(raw)
            request.reads.append((started, time.time_ns(), ct))
        return raw

    def set_serialized(self, key: Any, value: bytes) -> None:
        sent = time.time_ns()
        self.proxied.set_serialized(key, value)
        request: _Request | None = getattr(self._current, "request", None)
        if request is not None:
            version.stored(request.probe, _payload(value), sent)


class Dogpile:
    name: ClassVar[str] = "dogpile"
    Params = DogpileParams

    def __init__(self, deps: Deps, params: DogpileParams) -> None:
        servers = servers_of(deps, self.name)
        self._deps = deps
        self._client = redis_client(servers.cache_url, servers.threads)
        self._expire_s = deps.ttl_ms / 1000
        self._current = threading.local()
        self.region: CacheRegion = make_region(serializer=bytes, deserializer=bytes).configure(
            "dogpile.cache.redis", expiration_time=self._expire_s,
            arguments={"connection_pool": self._client.connection_pool,
                       "distributed_lock": params.distributed_lock,
                       "lock_timeout": seconds_or_none(params.lock_timeout),
                       "lock_sleep": params.lock_sleep,
                       "thread_local_lock": params.thread_local_lock,
                       "redis_expiration_time": params.redis_expiration_time})
        self.region.wrap(_Seen(self._current))
        self._update = params.on_write is OnWrite.UPDATE

    def fetch(self, key: str, probe: Probe) -> Outcome:
        request = self._current.request = _Request(probe)
        try:
            value = self.region.get_or_create(key, lambda: self._create(key, request))
        finally:
            self._current.request = None
        version.served(probe, value)
        return self._outcome(request)

    def _create(self, key: str, request: _Request) -> bytes:
        """dogpile's creator: this request computes the value (of the value it replaces, if any:
        that value's refresh cycle)."""
        request.created = True
        ct = request.reads[-1][2] if request.reads else None
        if ct is not None:
            request.probe.refresh_of_ns = round((ct + self._expire_s) * 1e9)
        return self._deps.loader.load(key, request.probe)

    def _outcome(self, request: _Request) -> Outcome:
        if request.created:
            return Outcome.FILLED
        first_start, first_end, ct = request.reads[0]
        if ct is None:  # nothing there: dogpile blocked on another creator's mutex, read again
            request.probe.lock_wait_ns = request.reads[-1][0] - first_end
            return Outcome.WAITED
        late_ns = first_start - round((ct + self._expire_s) * 1e9)
        if late_ns > 0:  # expired, and another creator held the mutex: the old value, at once
            request.probe.stale_age_ns = late_ns
            return Outcome.STALE
        return HIT

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        """Stored as dogpile stores it, created one TTL before the first expiry."""
        created = expire_at_ms / 1000 - self._expire_s
        self.region.backend.set_serialized(key, self.region._serialized_payload(
            value, {"ct": created, "v": value_version}))

    def on_write(self, key: str, probe: Probe) -> None:
        """dogpile's own: ``region.delete``, or ``region.set`` of the new value."""
        if not self._update:
            self.region.delete(key)
            return
        request = self._current.request = _Request(probe)
        try:
            value = self._deps.loader.load(key, probe)
            self.region.set(key, value)
        finally:
            self._current.request = None
        version.served(request.probe, value)

    def cached_version(self, key: str) -> int | None:
        raw = cast("bytes | None", self._client.get(key))
        return None if raw is None else version.version_of(_payload(raw))

    def close(self) -> None:
        self._client.close()

    @staticmethod
    def check_run(ttl_ms: int, aligned: bool) -> None:
        own_expiry("dogpile", aligned)
