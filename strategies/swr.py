"""Stale-while-revalidate: after the soft TTL the value is served at once as ``stale`` while
exactly one background refresh (holder of the lock) recomputes it; the hard TTL bounds the age.

The refresh runs through ``Deps.background``, which records it as its own ``refresh`` row, so
no reader pays for the origin and every origin call is still counted. Without a background
executor the refresh runs inline in the triggering request (outcome ``filled``).
A cold miss (nothing at all, or past the hard TTL) falls back to lock-dc: fill or wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from strategies import version
from strategies.base import Deps
from strategies.core.swr import SwrCore, stored_value
from strategies.drivers.sync import Driven, SyncDriver, clock_of
from strategies.lock import prime_under_lock
from strategies.locking import OwnedLock
from strategies.params import LockParams, Ttl
from strategies.registry import register


@dataclass(frozen=True)
class SwrParams(LockParams):
    hard_factor: float = 3.0  # hard TTL = hard_factor x soft TTL (the trial's TTL)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.hard_factor > 1.0:
            raise ValueError("hard_factor must be > 1")


@register
class StaleWhileRevalidate(Driven, version.CacheAside):
    """Its logic: ``strategies.core.swr``; the threaded driver submits the refresh to
    ``Deps.background``."""

    name: ClassVar[str] = "swr"
    Params = SwrParams
    enveloped: ClassVar[bool] = True
    core: SwrCore

    def __init__(self, deps: Deps, params: SwrParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self._hard_factor = params.hard_factor
        self.core = SwrCore(self._ttl, clock_of(deps), params, params.hard_factor)
        self.driver = SyncDriver(deps)
        self.lock = OwnedLock(deps.locks, params.lock_ttl_ms)  # priming's
        self._on_write_from(params)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        def write() -> None:
            packed, hard_at_ms = stored_value(value, expire_at_ms, self._ttl.base_ms,
                                              self._hard_factor)
            self._deps.cache.set(key, packed, pxat=hard_at_ms)

        prime_under_lock(self.lock, key, write)
