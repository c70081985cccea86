"""XFetch: probabilistic early recomputation (Vattani, Chierichetti, Lowenstein, VLDB 2015).

Each reader recomputes early when ``now - delta * beta * ln(rand) >= expiry`` with rand in
(0, 1]: since ln(rand) <= 0 the left side is at or after now, so the chance grows as expiry
nears, as ``exp(-left / (beta * delta))``. Experiment 000 had the sign reversed, so the window
never opened; ``should_recompute`` is a pure function so tests can check it over many draws.
``xfetch-lock`` does the early recompute under the lock: a reader that loses the race serves
the current (still fresh) value.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import ClassVar

from strategies import envelope, version
from strategies.base import Deps, Probe
from strategies.core.xfetch import XFetchCore, XFetchLockCore, draw, should_recompute
from strategies.drivers.sync import Driven, SyncDriver, clock_of
from strategies.lock import prime_under_lock
from strategies.locking import OwnedLock
from strategies.params import CommonParams, LockParams, Ttl
from strategies.registry import register

__all__ = ["DeltaMode", "XFetch", "XFetchLock", "draw", "should_recompute"]


def _draw() -> float:
    """This module's ``draw`` looked up at each call (a test may replace it)."""
    return draw()


class DeltaMode(enum.StrEnum):
    """What delta measures."""

    ORIGIN = "origin"  # the origin query alone
    REFILL = "refill"  # the whole refill as the client sees it: pool wait, scheduling, query


@dataclass(frozen=True)
class XFetchParams(CommonParams):
    beta: float = 1.0
    delta: DeltaMode = DeltaMode.REFILL

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.beta > 0:
            raise ValueError("beta must be > 0")


@dataclass(frozen=True)
class XFetchLockParams(LockParams, XFetchParams):
    """The lock's parameters and XFetch's, each checked once (cooperative ``__post_init__``)."""


@register
class XFetch(Driven, version.CacheAside):
    """Early recompute without a lock: at full expiry every reader misses (like naive).
    Its logic: ``strategies.core.xfetch``."""

    name: ClassVar[str] = "xfetch"
    enveloped: ClassVar[bool] = True
    Params: ClassVar[type[XFetchParams | XFetchLockParams]] = XFetchParams
    core: XFetchCore

    def __init__(self, deps: Deps, params: XFetchParams | XFetchLockParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self._origin_only = params.delta is DeltaMode.ORIGIN
        self.core = self._core(params)
        self.driver = SyncDriver(deps)
        self._on_write_from(params)

    def _core(self, params: XFetchParams | XFetchLockParams) -> XFetchCore:
        return XFetchCore(self._ttl, clock_of(self._deps), params.beta, self._origin_only, _draw)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        """Store ``value`` with a delta measured by one real recompute, so the first expiry
        event already has a true delta (the priming load is outside every trial's counts)."""
        probe = Probe()
        started = time.perf_counter_ns()
        self._deps.loader.load(key, probe)
        delta_ns = probe.origin_ns if self._origin_only else time.perf_counter_ns() - started
        packed = envelope.pack(value, expire_at_ms * 1000, delta_ns / 1e9)
        self._deps.cache.set(key, packed, pxat=expire_at_ms)


@register
class XFetchLock(XFetch):
    """XFetch with the recompute (early or at expiry) under the lock."""

    name: ClassVar[str] = "xfetch-lock"
    Params = XFetchLockParams

    def __init__(self, deps: Deps, params: XFetchLockParams) -> None:
        super().__init__(deps, params)
        self.lock = OwnedLock(deps.locks, params.lock_ttl_ms)  # priming's

    def _core(self, params: XFetchParams | XFetchLockParams) -> XFetchCore:
        assert isinstance(params, XFetchLockParams)
        return XFetchLockCore(self._ttl, clock_of(self._deps), params.beta, self._origin_only, params,
                              _draw)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        prime_under_lock(self.lock, key, lambda: super(XFetchLock, self).prime(
            key, value, expire_at_ms))
