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
import math
import random
import time
from dataclasses import dataclass
from typing import ClassVar

from strategies import envelope, version
from strategies.base import HIT, Deps, LockStoreDown, Outcome, Probe
from strategies.flight import SingleFlight
from strategies.lock import prime_under_lock
from strategies.locking import lock_key
from strategies.params import CommonParams, LockErrorPolicy, LockParams, Ttl
from strategies.registry import register


def should_recompute(now_s: float, expiry_s: float, delta_s: float, beta: float,
                     rand: float) -> bool:
    """The XFetch test; ``rand`` must be in (0, 1]."""
    return now_s - delta_s * beta * math.log(rand) >= expiry_s


def draw() -> float:
    """Uniform in (0, 1]: ``random()`` is in [0, 1), and ln(0) is undefined."""
    return 1.0 - random.random()


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
class XFetch(version.CacheAside):
    """Early recompute without a lock: at full expiry every reader misses (like naive)."""

    name: ClassVar[str] = "xfetch"
    enveloped: ClassVar[bool] = True
    Params: ClassVar[type[XFetchParams | XFetchLockParams]] = XFetchParams

    def __init__(self, deps: Deps, params: XFetchParams | XFetchLockParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self._beta = params.beta
        self._origin_only = params.delta is DeltaMode.ORIGIN
        self._on_write_from(params)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        raw = self._deps.cache.get(key)
        if raw is None:
            return self.miss(key, probe)
        value = envelope.unpack(raw)
        version.served(probe, value.payload)
        if should_recompute(time.time(), value.expiry_us / 1e6, value.delta_s, self._beta, draw()):
            return self.early(key, probe, value)
        return HIT

    def miss(self, key: str, probe: Probe) -> Outcome:
        self.fill(key, probe)
        return Outcome.FILLED

    def early(self, key: str, probe: Probe, current: envelope.Envelope) -> Outcome:
        probe.refresh_of_ns = current.expiry_us * 1000
        self.fill(key, probe)
        return Outcome.FILLED

    def _fill(self, key: str, probe: Probe) -> None:
        self.fill(key, probe)

    def fill(self, key: str, probe: Probe) -> None:
        """Recompute, measure delta, write the value with its expiry and delta."""
        started, origin_before = time.perf_counter_ns(), probe.origin_ns
        payload = self._deps.loader.load(key, probe)
        version.served(probe, payload)
        delta_ns = (probe.origin_ns - origin_before if self._origin_only
                    else time.perf_counter_ns() - started)
        expiry = self._ttl.draw()
        packed = envelope.pack(payload, expiry.at_ms() * 1000, delta_ns / 1e9)
        sent = time.time_ns()
        self._deps.cache.set(key, packed, px=expiry.px, pxat=expiry.pxat)
        version.stored(probe, payload, sent)

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
        self.flight = SingleFlight(deps, params, double_check=True)
        self._open = params.on_lock_error is LockErrorPolicy.OPEN

    def miss(self, key: str, probe: Probe) -> Outcome:
        return self.flight.run(key, probe, lambda: self._present(key, probe),
                               lambda p: self.fill(key, p))

    def _present(self, key: str, probe: Probe) -> bool:
        raw = self._deps.cache.get(key)
        if raw is None:
            return False
        version.served(probe, envelope.unpack(raw).payload)
        return True

    def early(self, key: str, probe: Probe, current: envelope.Envelope) -> Outcome:
        try:
            token = self.flight.lock.try_acquire(lock_key(key))
        except LockStoreDown:
            if not self._open:
                raise
            return super().early(key, probe, current)
        if token is None:
            return HIT  # another reader recomputes; this one serves the fresh value
        probe.refresh_of_ns = current.expiry_us * 1000
        outcome = self.flight.fill_locked(key, token, probe,
                                          lambda: self._renewed(key, current, probe),
                                          lambda p: self.fill(key, p))
        return Outcome.HIT if outcome is Outcome.WAITED else outcome  # renewed meanwhile

    def _renewed(self, key: str, current: envelope.Envelope, probe: Probe) -> bool:
        """Has someone recomputed since this reader looked? (double check for early refresh)
        If so, this reader serves the renewed value."""
        raw = self._deps.cache.get(key)
        if raw is None:
            return False
        value = envelope.unpack(raw)
        if value.expiry_us == current.expiry_us:
            return False
        version.served(probe, value.payload)
        return True

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        prime_under_lock(self.flight, key, lambda: super(XFetchLock, self).prime(
            key, value, expire_at_ms))
