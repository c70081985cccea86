"""naive, lock and lock-dc as logic: one value per key in the cache, filled on a miss.

Every core here answers a request in two parts. ``hit(key, raw, probe)`` is a plain function of
the first ``GET``'s reply: the answer when the value is there, None when more steps are needed.
``miss(key, raw, probe)`` is the rest, a generator of effects. A driver sends the GET itself and
calls ``hit``, so a hit costs no generator at all (run as one on the sync driver, naive's hit
costs 1.75 us instead of 0.35: docs/plugins.md); ``steps`` is the same request as one generator,
for a driver (or a test) that wants nothing but effects.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from strategies import version
from strategies.base import HIT, Clock, Outcome, Probe
from strategies.core.effects import CACHE, Get, Load, Set
from strategies.core.flight import Flight
from strategies.params import LockParams, Ttl


def steps(core: Any, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
    """A whole request of a hit-then-miss core as one generator (what the drivers' fast path
    does in two parts)."""
    raw = yield Get(CACHE, key)
    outcome: Outcome | None = core.hit(key, raw, probe)
    if outcome is None:
        outcome = yield from core.miss(key, raw, probe)
    return outcome


class NaiveCore:
    """No defence: every request that misses goes to the origin."""

    def __init__(self, ttl: Ttl, clock: Clock) -> None:
        self.ttl = ttl
        self.clock = clock

    def hit(self, key: str, raw: bytes | None, probe: Probe) -> Outcome | None:
        if raw is None:
            return None
        version.served(probe, raw)
        return HIT

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Generator[Any, Any, Outcome]:
        yield from self.fill(key, probe)
        return Outcome.FILLED

    def fill(self, key: str, probe: Probe) -> Generator[Any, Any, None]:
        """Load, then ``SET`` with this strategy's TTL, recorded as this request's write."""
        value = yield Load(key)
        version.served(probe, value)
        sent = self.clock.wall_ns()
        expiry = self.ttl.draw(sent // 1_000_000)
        yield Set(CACHE, key, value, expiry.px, expiry.pxat)
        version.stored(probe, value, sent)


class LockCore(NaiveCore):
    """A miss fills under the distributed lock or waits for the filler; ``double_check``
    (lock-dc) reads the cache again once the lock is taken."""

    def __init__(self, ttl: Ttl, clock: Clock, params: LockParams, double_check: bool) -> None:
        super().__init__(ttl, clock)
        self.flight = Flight(clock, params, double_check)

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Generator[Any, Any, Outcome]:
        return (yield from self.fill_or_wait(key, probe))

    def fill_or_wait(self, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
        return (yield from self.flight.run(key, probe, lambda: self.present(key, probe),
                                           lambda p: self.fill(key, p)))

    def present(self, key: str, probe: Probe) -> Generator[Any, Any, bool]:
        """Is the value in the cache? If so, it is what this request serves."""
        raw = yield Get(CACHE, key)
        if raw is None:
            return False
        version.served(probe, raw)
        return True
