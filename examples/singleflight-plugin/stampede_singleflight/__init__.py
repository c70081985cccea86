"""Go's singleflight as a stampede defence: the client threads of one process that miss the
same key share one origin call; the others wait for it in memory, then read the cache.

A stampede-lab plug-in (docs/plugins.md in stampede-lab): ``coordinator launch --plugin
stampede_singleflight --strategies naive,singleflight``, or installed, by its entry point.
The herd of an expiry is at most one call per worker process, not one per client.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import ClassVar

from strategies import Deps, LockWaitTimeout, Outcome, Probe, StrategyError, register, version
from strategies.params import CommonParams, Ttl

__version__ = "0.1.0"


class FlightFailed(StrategyError):
    """The call a waiter shared failed: the waiter fails too (an error row), it does not herd."""


@dataclass(frozen=True)
class SingleFlightParams(CommonParams):
    """``max_wait_ms``: how long a waiter waits for the shared call, then an error row."""

    max_wait_ms: int = 1000

    def __post_init__(self) -> None:
        if not 1 <= self.max_wait_ms <= 60_000:
            raise ValueError(f"max_wait_ms={self.max_wait_ms} is outside [1, 60000]")


@register
class SingleFlight(version.CacheAside):
    name: ClassVar[str] = "singleflight"
    Params = SingleFlightParams

    def __init__(self, deps: Deps, params: SingleFlightParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self._on_write_from(params)
        self._wait_s = params.max_wait_ms / 1000
        self._flights: dict[str, threading.Event] = {}
        self._guard = threading.Lock()

    def fetch(self, key: str, probe: Probe) -> Outcome:
        raw = self._deps.cache.get(key)
        if raw is not None:
            version.served(probe, raw)
            return Outcome.HIT
        with self._guard:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = threading.Event()
        if leader:
            return self._lead(key, flight, probe)
        return self._follow(key, flight, probe)

    def _lead(self, key: str, flight: threading.Event, probe: Probe) -> Outcome:
        """Read again (a flight may have landed since the miss), else fill; wake the others."""
        try:
            raw = self._deps.cache.get(key)
            if raw is not None:
                version.served(probe, raw)
                return Outcome.HIT
            self._fill(key, probe)
            return Outcome.FILLED
        finally:
            with self._guard:
                del self._flights[key]
            flight.set()

    def _follow(self, key: str, flight: threading.Event, probe: Probe) -> Outcome:
        started = time.perf_counter_ns()
        landed = flight.wait(self._wait_s)
        probe.lock_wait_ns += time.perf_counter_ns() - started
        if not landed:
            raise LockWaitTimeout(f"the shared call for {key!r} took more than "
                                  f"{self._wait_s * 1000:g} ms")
        raw = self._deps.cache.get(key)
        if raw is None:
            raise FlightFailed(f"the shared call for {key!r} left no value")
        version.served(probe, raw)
        return Outcome.WAITED

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        self._deps.cache.set(key, value, pxat=expire_at_ms)
