"""xfetch and xfetch-lock as logic: probabilistic early recomputation (Vattani et al., 2015).

Each reader recomputes early when ``now - delta * beta * ln(rand) >= expiry`` with rand in
(0, 1]. The random draw is injected like the clock (``draw``), so a test can force or forbid the
early window; ``should_recompute`` is a pure function so tests can check it over many draws.
``xfetch-lock`` does every recompute under the lock: a reader that loses the early race serves
the current (still fresh) value.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Generator
from typing import Any

from strategies import envelope, version
from strategies.base import HIT, Clock, Outcome, Probe
from strategies.core.cacheaside import NaiveCore
from strategies.core.effects import CACHE, Get, Load, Set
from strategies.core.flight import FAILED_OPEN, Flight
from strategies.params import LockParams, Ttl


def should_recompute(now_s: float, expiry_s: float, delta_s: float, beta: float,
                     rand: float) -> bool:
    """The XFetch test; ``rand`` must be in (0, 1]."""
    return now_s - delta_s * beta * math.log(rand) >= expiry_s


def draw() -> float:
    """Uniform in (0, 1]: ``random()`` is in [0, 1), and ln(0) is undefined."""
    return 1.0 - random.random()


class XFetchCore(NaiveCore):
    """Early recompute without a lock: at full expiry every reader misses (like naive)."""

    def __init__(self, ttl: Ttl, clock: Clock, beta: float, origin_only: bool,
                 rand: Callable[[], float] = draw) -> None:
        super().__init__(ttl, clock)
        self._beta = beta
        self._origin_only = origin_only
        self._rand = rand

    def hit(self, key: str, raw: bytes | None, probe: Probe) -> Outcome | None:
        """A hit unless the value is missing or this reader's draw opens the early window."""
        if raw is None:
            return None
        value = envelope.unpack(raw)
        version.served(probe, value.payload)
        if should_recompute(self.clock.wall_ns() / 1e9, value.expiry_us / 1e6, value.delta_s,
                            self._beta, self._rand()):
            return None
        return HIT

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Generator[Any, Any, Outcome]:
        if raw is None:
            return (yield from self.cold(key, probe))
        return (yield from self.early(key, probe, envelope.unpack(raw)))

    def cold(self, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
        yield from self.fill(key, probe)
        return Outcome.FILLED

    def early(self, key: str, probe: Probe, current: envelope.Envelope,
              ) -> Generator[Any, Any, Outcome]:
        probe.refresh_of_ns = current.expiry_us * 1000
        yield from self.fill(key, probe)
        return Outcome.FILLED

    def fill(self, key: str, probe: Probe) -> Generator[Any, Any, None]:
        """Recompute, measure delta, write the value with its expiry and delta."""
        started, origin_before = self.clock.now_ns(), probe.origin_ns
        payload = yield Load(key)
        version.served(probe, payload)
        delta_ns = (probe.origin_ns - origin_before if self._origin_only
                    else self.clock.now_ns() - started)
        sent = self.clock.wall_ns()
        now_ms = sent // 1_000_000
        expiry = self.ttl.draw(now_ms)
        packed = envelope.pack(payload, expiry.at_ms(now_ms) * 1000, delta_ns / 1e9)
        yield Set(CACHE, key, packed, expiry.px, expiry.pxat)
        version.stored(probe, payload, sent)


class XFetchLockCore(XFetchCore):
    """XFetch with the recompute (early or at expiry) under the lock (double-checked)."""

    def __init__(self, ttl: Ttl, clock: Clock, beta: float, origin_only: bool,
                 params: LockParams, rand: Callable[[], float] = draw) -> None:
        super().__init__(ttl, clock, beta, origin_only, rand)
        self.flight = Flight(clock, params, double_check=True)

    def cold(self, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
        return (yield from self.flight.run(key, probe, lambda: self.present(key, probe),
                                           lambda p: self.fill(key, p)))

    def present(self, key: str, probe: Probe) -> Generator[Any, Any, bool]:
        raw = yield Get(CACHE, key)
        if raw is None:
            return False
        version.served(probe, envelope.unpack(raw).payload)
        return True

    def early(self, key: str, probe: Probe, current: envelope.Envelope,
              ) -> Generator[Any, Any, Outcome]:
        token = yield from self.flight.acquire_or_open(key)
        if token == FAILED_OPEN:
            return (yield from super().early(key, probe, current))
        if token is None:
            return HIT  # another reader recomputes; this one serves the fresh value
        probe.refresh_of_ns = current.expiry_us * 1000
        outcome = yield from self.flight.fill_locked(
            key, token, probe, lambda: self.renewed(key, current, probe),
            lambda p: self.fill(key, p))
        return HIT if outcome is Outcome.WAITED else outcome  # renewed meanwhile

    def renewed(self, key: str, current: envelope.Envelope, probe: Probe,
                ) -> Generator[Any, Any, bool]:
        """Has someone recomputed since this reader looked? (the early refresh's double check)
        If so, this reader serves the renewed value."""
        raw = yield Get(CACHE, key)
        if raw is None:
            return False
        value = envelope.unpack(raw)
        if value.expiry_us == current.expiry_us:
            return False
        version.served(probe, value.payload)
        return True
