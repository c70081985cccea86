"""local-lock as logic: single flight inside one process, in front of lock-dc (or alone).

Requests of one process that miss the same key elect one leader (Go's singleflight): the first
to put a ``LocalFlight`` in the table. Only the leader goes on (lock-dc against the lock store,
or with ``distributed=false`` a re-read and a fill of its own); the others park on the flight
(``AwaitFlight``) and serve what the leader served. Parking is the driver's business (a thread
on an event, a task on an asyncio event, a simpy process on a simpy event), so the election,
the answer and the failures are written once here.

The table is plain state of the core, shared by every request of the process: the election is
one ``dict.setdefault`` (atomic for str keys, so threads need no lock), and only the leader
removes its flight, before it wakes the followers: a miss after that starts a new flight.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from strategies.base import Clock, LockWaitTimeout, Outcome, Probe, StrategyError
from strategies.core.cacheaside import LockCore
from strategies.core.effects import AwaitFlight, EndFlight, LocalFlight
from strategies.params import LockParams, Ttl


class LocalLockCore(LockCore):
    """lock-dc's logic behind an in-process leader per key; ``distributed=False``: the leader
    fills without the distributed lock."""

    def __init__(self, ttl: Ttl, clock: Clock, params: LockParams, distributed: bool) -> None:
        super().__init__(ttl, clock, params, double_check=True)
        self.distributed = distributed
        self._max_wait_ms = params.max_wait_ms
        self._max_wait_s = params.max_wait_ms / 1000
        self.flights: dict[str, LocalFlight] = {}

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Generator[Any, Any, Outcome]:
        """Lead the key's flight, or follow the one already in the air."""
        flight = self.flights.get(key)
        if flight is None:  # a new flight object only when none is in the air
            new = LocalFlight()
            flight = self.flights.setdefault(key, new)
            if flight is new:
                return (yield from self._lead(key, flight, probe))
        return (yield from self._follow(key, flight, probe))

    def _lead(self, key: str, flight: LocalFlight, probe: Probe,
              ) -> Generator[Any, Any, Outcome]:
        try:
            if self.distributed:
                outcome = yield from self.fill_or_wait(key, probe)
            else:
                outcome = yield from self._alone(key, probe)
            flight.version = probe.version_served
        except Exception as exc:
            flight.error = exc
            self._land(key, flight)
            yield EndFlight(flight)
            raise
        except BaseException as exc:  # closed or cancelled: no effect can be sent any more;
            flight.error = exc  # the followers see it at their deadline
            self._land(key, flight)
            raise
        self._land(key, flight)
        yield EndFlight(flight)
        return outcome

    def _land(self, key: str, flight: LocalFlight) -> None:
        """Out of the table first, then done: a miss from now on starts a flight of its own."""
        del self.flights[key]
        flight.done = True

    def _alone(self, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
        """The leader without the distributed lock: read again (another process, or an
        earlier leader of this one, may have filled since the miss), else fill."""
        if (yield from self.present(key, probe)):
            return Outcome.HIT
        yield from self.fill(key, probe)
        return Outcome.FILLED

    def _follow(self, key: str, flight: LocalFlight, probe: Probe,
                ) -> Generator[Any, Any, Outcome]:
        started = self.clock.now_ns()
        if not flight.done:
            yield AwaitFlight(flight, self._max_wait_s)
        if not flight.done:
            raise LockWaitTimeout(f"in-process leader for {key!r} still busy after "
                                  f"{self._max_wait_ms:g} ms")
        probe.lock_wait_ns = self.clock.now_ns() - started
        if flight.error is not None:
            raise StrategyError(f"in-process leader failed: {type(flight.error).__name__}: "
                                f"{flight.error}")
        probe.version_served = flight.version
        return Outcome.WAITED
