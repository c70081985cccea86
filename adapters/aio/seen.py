"""What a library did for each request, seen from outside it (neither library reports outcomes).

One ``Request`` per ``fetch``, made current in a ``ContextVar``: the library's own hooks (cashews'
middlewares, aiocache's plugins) append what each cache read and lock attempt returned, and the
decorated function (our loader's door) counts the loads. A task the library starts inherits the
context of the request that started it (asyncio copies it at ``create_task``), so work done on a
request's behalf in another task (cashews' in-process coalescing) lands in that request's record;
a coroutine that joined such a task has no reads of its own. ``Fills`` counts the fills each key
completed in this process, so a joiner can tell whether it waited for a fill or for a read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from strategies.base import HIT, Outcome, Probe


@dataclass
class Read:
    started_ns: int
    ended_ns: int
    at_ns: int  # wall clock at the read's start (the libraries' expiry points are wall clock)
    value: object  # what the library's read returned (its own miss sentinel or None on a miss)
    found: bool


@dataclass
class Request:
    probe: Probe
    key: str
    started_ns: int = field(default_factory=time.perf_counter_ns)
    reads: list[Read] = field(default_factory=list)
    locks: list[tuple[int, int, bool]] = field(default_factory=list)  # started, ended, acquired
    counted: list[int] = field(default_factory=list)  # cashews hit's INCR answers
    loads: int = 0
    load_failed: bool = False
    done: bool = False

    def lock_wait_ns(self) -> int:
        """From the first refused lock attempt to the end of the last attempt (0: never refused)."""
        refused = [started for started, _, acquired in self.locks if not acquired]
        return self.locks[-1][1] - refused[0] if refused else 0


CURRENT: ContextVar[Request | None] = ContextVar("stampede_lab_aio_request", default=None)


class Fills:
    """Fills completed per key in this process, and each key's latest read (a joiner's witness)."""

    def __init__(self) -> None:
        self._done: dict[str, int] = {}
        self.last_read: dict[str, Read] = {}

    def count(self, key: str) -> int:
        return self._done.get(key, 0)

    def completed(self, key: str) -> None:
        self._done[key] = self._done.get(key, 0) + 1


def joined(request: Request, fills_before: int, fills: Fills,
           read_outcome: Callable[[Read, Probe], Outcome]) -> Outcome:
    """A request that neither read nor loaded: it awaited another coroutine's call in flight.
    ``waited`` (its whole call, ``lock_wait_ns``) when a fill of its key completed meanwhile;
    else it was answered by that call's read: that read's outcome (``hit``, or ``stale`` for a
    value past the library's own expiry point)."""
    if fills.count(request.key) > fills_before:
        request.probe.lock_wait_ns = time.perf_counter_ns() - request.started_ns
        return Outcome.WAITED
    read = fills.last_read.get(request.key)
    return HIT if read is None else read_outcome(read, request.probe)
