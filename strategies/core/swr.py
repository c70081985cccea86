"""swr as logic: stale-while-revalidate with one refresh (the lock holder) per soft expiry.

After the soft TTL the value is served at once as ``stale`` while exactly one refresh, under the
lock, recomputes it; the hard TTL bounds the age. The refresh is a job handed to the driver
(``Submit``): the driver's background executor records it as its own row, so no reader pays for
the origin and every origin call is still counted; a driver without one answers False and the
refresh runs inline in the triggering request (outcome ``filled``). A cold miss (nothing at all,
or past the hard TTL) falls back to lock-dc: fill or wait.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from strategies import envelope, version
from strategies.base import HIT, Clock, Outcome, Probe
from strategies.core.cacheaside import NaiveCore
from strategies.core.effects import CACHE, Get, JobSteps, Load, Set, Submit
from strategies.core.flight import Flight
from strategies.params import LockParams, Ttl


def stored_value(payload: bytes, soft_at_ms: int, soft_ms: int, hard_factor: float,
                 ) -> tuple[bytes, int]:
    """What swr writes for ``payload``: the envelope with its soft expiry, and the hard expiry
    (ms since the epoch) the server drops it at."""
    hard_at_ms = soft_at_ms + round(soft_ms * (hard_factor - 1.0))
    return envelope.pack(payload, soft_at_ms * 1000), hard_at_ms


class SwrCore(NaiveCore):
    def __init__(self, ttl: Ttl, clock: Clock, params: LockParams, hard_factor: float) -> None:
        super().__init__(ttl, clock)
        self._hard_factor = hard_factor
        self.flight = Flight(clock, params, double_check=True)

    def _late_us(self, value: envelope.Envelope) -> int:
        return -value.left_us(self.clock.wall_ns() // 1000)

    def hit(self, key: str, raw: bytes | None, probe: Probe) -> Outcome | None:
        """A hit while the soft TTL lasts; None when missing or soft-expired."""
        if raw is None:
            return None
        value = envelope.unpack(raw)
        version.served(probe, value.payload)
        if self._late_us(value) < 0:
            return HIT
        return None

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Generator[Any, Any, Outcome]:
        if raw is None:
            return (yield from self.flight.run(key, probe, lambda: self.fresh(key, probe),
                                               lambda p: self.fill(key, p)))
        value = envelope.unpack(raw)
        probe.stale_age_ns = max(0, self._late_us(value)) * 1000
        return (yield from self.revalidate(key, probe, value.expiry_us * 1000))

    def revalidate(self, key: str, probe: Probe, soft_expiry_ns: int,
                   ) -> Generator[Any, Any, Outcome]:
        """Start the one refresh if nobody has; this reader is served stale either way."""
        token = yield from self.flight.acquire_or_open(key)  # FAILED_OPEN: refresh without it
        if token is None:
            return Outcome.STALE
        refresh = self.refresh_job(key, token, soft_expiry_ns)
        try:
            submitted = yield Submit(key, refresh)
        except BaseException:
            if token:
                yield from self.flight.release(key, token)
            raise
        if not submitted:
            return (yield from refresh(probe))
        return Outcome.STALE

    def refresh_job(self, key: str, token: bytes, soft_expiry_ns: int) -> JobSteps:
        """The refresh, as a job: under the lock held by ``token`` (none when failing open).
        Its origin call belongs to the refresh cycle of the value it replaces."""

        def refresh(probe: Probe) -> Generator[Any, Any, Outcome]:
            probe.refresh_of_ns = soft_expiry_ns
            if not token:
                yield from self.fill(key, probe)
                return Outcome.FILLED
            return (yield from self.flight.fill_locked(key, token, probe,
                                                       lambda: self.fresh(key, probe),
                                                       lambda q: self.fill(key, q)))

        return refresh

    def fresh(self, key: str, probe: Probe) -> Generator[Any, Any, bool]:
        """Is a fresh value in the cache? If so, it is what this request serves."""
        raw = yield Get(CACHE, key)
        if raw is None:
            return False
        value = envelope.unpack(raw)
        if self._late_us(value) >= 0:
            return False
        version.served(probe, value.payload)
        return True

    def fill(self, key: str, probe: Probe) -> Generator[Any, Any, None]:
        payload = yield Load(key)
        version.served(probe, payload)
        sent = self.clock.wall_ns()
        now_ms = sent // 1_000_000
        packed, hard_at_ms = stored_value(payload, self.ttl.draw(now_ms).at_ms(now_ms),
                                          self.ttl.base_ms, self._hard_factor)
        yield Set(CACHE, key, packed, pxat=hard_at_ms)
        version.stored(probe, payload, sent)
