"""Stale-while-revalidate: after the soft TTL the value is served at once as ``stale`` while
exactly one background refresh (holder of the lock) recomputes it; the hard TTL bounds the age.

The refresh runs through ``Deps.background``, which records it as its own ``refresh`` row, so
no reader pays for the origin and every origin call is still counted. Without a background
executor the refresh runs inline in the triggering request (outcome ``filled``).
A cold miss (nothing at all, or past the hard TTL) falls back to lock-dc: fill or wait.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from strategies import envelope, version
from strategies.base import HIT, Deps, Job, LockStoreDown, Outcome, Probe
from strategies.flight import SingleFlight
from strategies.lock import prime_under_lock
from strategies.locking import lock_key
from strategies.params import LockErrorPolicy, LockParams, Ttl
from strategies.registry import register


@dataclass(frozen=True)
class SwrParams(LockParams):
    hard_factor: float = 3.0  # hard TTL = hard_factor x soft TTL (the trial's TTL)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.hard_factor > 1.0:
            raise ValueError("hard_factor must be > 1")


@register
class StaleWhileRevalidate(version.CacheAside):
    name: ClassVar[str] = "swr"
    Params = SwrParams
    enveloped: ClassVar[bool] = True

    def __init__(self, deps: Deps, params: SwrParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self._hard_factor = params.hard_factor
        self._open = params.on_lock_error is LockErrorPolicy.OPEN
        self.flight = SingleFlight(deps, params, double_check=True)
        self._on_write_from(params)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        raw = self._deps.cache.get(key)
        if raw is None:
            return self.flight.run(key, probe, lambda: self._fresh(key, probe),
                                   lambda p: self._fill(key, p))
        value = envelope.unpack(raw)
        version.served(probe, value.payload)
        late_us = -value.left_us(envelope.now_us())
        if late_us < 0:
            return HIT
        probe.stale_age_ns = late_us * 1000
        return self._revalidate(key, probe, value.expiry_us * 1000)

    def _revalidate(self, key: str, probe: Probe, soft_expiry_ns: int) -> Outcome:
        """Start the one refresh if nobody has; this reader is served stale either way."""
        try:
            token = self.flight.lock.try_acquire(lock_key(key))
        except LockStoreDown:
            if not self._open:
                raise
            token = b""  # fail open: refresh without the lock
        if token is None:
            return Outcome.STALE
        refresh = self._refresh_job(key, token, soft_expiry_ns)
        background = self._deps.background
        if background is None:
            return refresh(probe)
        try:
            background.submit(key, refresh)
        except BaseException:
            if token:
                self.flight.lock.release(lock_key(key), token)
            raise
        return Outcome.STALE

    def _refresh_job(self, key: str, token: bytes, soft_expiry_ns: int) -> Job:
        """The refresh, as a job: under the lock held by ``token`` (none when failing open).
        Its origin call belongs to the refresh cycle of the value it replaces."""

        def refresh(probe: Probe) -> Outcome:
            probe.refresh_of_ns = soft_expiry_ns
            if not token:
                self._fill(key, probe)
                return Outcome.FILLED
            return self.flight.fill_locked(key, token, probe, lambda: self._fresh(key, probe),
                                           lambda q: self._fill(key, q))

        return refresh

    def _fresh(self, key: str, probe: Probe) -> bool:
        """Is a fresh value in the cache? If so, it is what this request serves."""
        raw = self._deps.cache.get(key)
        if raw is None:
            return False
        value = envelope.unpack(raw)
        if value.left_us(envelope.now_us()) <= 0:
            return False
        version.served(probe, value.payload)
        return True

    def _fill(self, key: str, probe: Probe) -> None:
        payload = self._deps.loader.load(key, probe)
        version.served(probe, payload)
        sent = time.time_ns()
        self._store(key, payload, self._ttl.draw().at_ms(), self._ttl.base_ms)
        version.stored(probe, payload, sent)

    def _store(self, key: str, payload: bytes, soft_at_ms: int, soft_ms: int) -> None:
        hard_at_ms = soft_at_ms + round(soft_ms * (self._hard_factor - 1.0))
        self._deps.cache.set(key, envelope.pack(payload, soft_at_ms * 1000), pxat=hard_at_ms)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        prime_under_lock(self.flight, key,
                         lambda: self._store(key, value, expire_at_ms, self._ttl.base_ms))
