"""The threaded driver: a strategy's logic executed on ``Commands`` in the client's own thread.

Each effect maps to one call on today's ``Commands`` (the worker's lean path or the pooled
one: the driver does not know which), ``Sleep`` to ``time.sleep``, ``Load`` to the loader,
``Submit`` to ``Deps.background``. A command that raises is thrown back into the logic at the
yield that asked for it, so a failure means what the logic says it means.

``Driven`` is what a ported strategy class mixes in: its ``fetch`` sends the first GET itself
and asks the core's plain ``hit``; only a miss starts a generator. So the hit path costs one
extra Python call over the hand-written strategy (about 80 ns), not a generator (1.4 us more;
the figures: docs/plugins.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from typing import Any, ClassVar

from strategies.base import Clock, Deps, Outcome, Probe
from strategies.commands import Commands, Script
from strategies.core.effects import (
    AwaitFlight,
    Blpop,
    Delete,
    EndFlight,
    Eval,
    Get,
    Load,
    Pipeline,
    Rpush,
    Set,
    Sleep,
    Submit,
)


class SystemClock:
    """The system's clocks: ``perf_counter_ns`` for waits, ``time_ns`` for expiries."""

    now_ns = staticmethod(time.perf_counter_ns)
    wall_ns = staticmethod(time.time_ns)


SYSTEM_CLOCK = SystemClock()


def clock_of(deps: Deps) -> Clock:
    """The clock a ported strategy's logic reads: ``deps.clock``, else the system's."""
    return SYSTEM_CLOCK if deps.clock is None else deps.clock
Handler = Callable[[Any, Probe], Any]


class SyncDriver:
    """Runs effect generators to their answer, blocking the calling thread on each effect."""

    def __init__(self, deps: Deps) -> None:
        """A ``Sleep`` waits by ``deps.sleep`` (a scripted scheduler's in tests), else
        ``time.sleep``."""
        self._stores: tuple[Commands, Commands] = (deps.cache, deps.locks)
        self._loader = deps.loader
        self._background = deps.background
        self._sleep = time.sleep if deps.sleep is None else deps.sleep
        self._park = deps.park
        self._flights = threading.Lock()  # a follower's look at ``done`` against the leader's wake
        self._scripts: dict[tuple[int, str], Script] = {}
        self._handlers: dict[type, Handler] = {
            Get: self._get, Set: self._set, Delete: self._delete, Rpush: self._rpush,
            Blpop: self._blpop, Pipeline: self._pipeline, Eval: self._eval,
            Sleep: self._sleep_for, Load: self._load, Submit: self._submit,
            AwaitFlight: self._await_flight, EndFlight: self._end_flight,
        }

    def run(self, steps: Generator[Any, Any, Any], probe: Probe) -> Any:
        """Execute ``steps``'s effects in order; return what it returns, raise what it raises."""
        handlers, send = self._handlers, steps.send
        try:
            effect = send(None)
            while True:
                try:
                    result = handlers[type(effect)](effect, probe)
                except Exception as exc:  # noqa: BLE001 - the logic's to handle or raise
                    effect = steps.throw(exc)
                else:
                    effect = send(result)
        except StopIteration as stop:
            return stop.value

    def _get(self, e: Get, probe: Probe) -> bytes | None:
        return self._stores[e.store].get(e.key)

    def _set(self, e: Set, probe: Probe) -> bool:
        return self._stores[e.store].set(e.key, e.value, px=e.px, pxat=e.pxat, nx=e.nx)

    def _delete(self, e: Delete, probe: Probe) -> int:
        return self._stores[e.store].delete(*e.keys)

    def _rpush(self, e: Rpush, probe: Probe) -> int:
        return self._stores[e.store].rpush(e.key, e.value)

    def _blpop(self, e: Blpop, probe: Probe) -> bytes | None:
        return self._stores[e.store].blpop(e.key, e.timeout_s)

    def _pipeline(self, e: Pipeline, probe: Probe) -> None:
        self._stores[e.store].pipeline(*e.commands, transaction=e.transaction)

    def _eval(self, e: Eval, probe: Probe) -> Any:
        script = self._scripts.get((e.store, e.source))
        if script is None:
            script = self._scripts[e.store, e.source] = self._stores[e.store].script(e.source)
        return script(list(e.keys), list(e.args))

    def _sleep_for(self, e: Sleep, probe: Probe) -> None:
        self._sleep(e.seconds)

    def _load(self, e: Load, probe: Probe) -> bytes:
        return self._loader.load(e.key, probe)

    def _await_flight(self, e: AwaitFlight, probe: Probe) -> None:
        """Block on the flight's event, made by its first follower. Looking at ``done`` and
        hanging the event under one mutex, as ``_end_flight`` reads it, loses no wake-up."""
        flight = e.flight
        if self._park is not None:
            self._park(lambda: flight.done, e.timeout_s)
            return
        with self._flights:
            if flight.done:
                return
            event = flight.waiter
            if event is None:
                event = flight.waiter = threading.Event()
        event.wait(e.timeout_s)

    def _end_flight(self, e: EndFlight, probe: Probe) -> None:
        with self._flights:
            event = e.flight.waiter
        if event is not None:
            event.set()

    def _submit(self, e: Submit, probe: Probe) -> bool:
        background = self._background
        if background is None:
            return False
        job = e.job

        def run_job(job_probe: Probe) -> Outcome:
            outcome: Outcome = self.run(job(job_probe), job_probe)
            return outcome

        background.submit(e.key, run_job)
        return True


class Driven:
    """The threaded ``fetch`` of a ported strategy: ``core`` holds its logic (``hit`` and
    ``miss``), ``driver`` runs the steps, ``_deps.cache`` answers the first GET."""

    core: Any
    driver: SyncDriver
    _deps: Deps
    # The whole request is the core's (so the asyncio driver may run it); a subclass with a
    # threaded layer of its own in front, not in its core, says False.
    sans_io: ClassVar[bool] = True

    def fetch(self, key: str, probe: Probe) -> Outcome:
        raw = self._deps.cache.get(key)
        outcome: Outcome | None = self.core.hit(key, raw, probe)
        if outcome is None:
            outcome = self.miss(key, raw, probe)
        return outcome

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Outcome:
        """The rest of a request ``hit`` did not answer (a subclass may put a layer of its
        own in front: local-lock's in-process leader)."""
        outcome: Outcome = self.driver.run(self.core.miss(key, raw, probe), probe)
        return outcome

    def _fill(self, key: str, probe: Probe) -> None:
        """The core's fill, on its own (``on_write=update`` writes a value through with it)."""
        self.driver.run(self.core.fill(key, probe), probe)
