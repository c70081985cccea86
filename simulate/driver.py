"""The simulated-time driver: a ported strategy's core executed as a simpy process.

The third driver beside ``strategies.drivers.sync`` (threads) and ``.aio`` (asyncio), with
the request shape both of them have: the first GET, the core's plain ``hit``, the generator only
on a miss. Each effect becomes simulated time: a command is half a round trip out, its effect
on the modelled store at one instant, half a round trip back; ``Sleep`` a timeout; ``Load`` a
call to the modelled origin; ``Submit`` a process of its own. So the strategy's decisions are
its own code's, taken on the clock it reads (``SimClock``, given as ``Deps.clock``).

Commands never fail here (faults are not modelled yet), so nothing is thrown into the logic;
the logic's own errors (a lock wait timing out) propagate to the client as in the real drivers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from simulate.cpu import Interpreter, RandomOrder
from simulate.store import SimStore
from strategies.base import Outcome, Probe
from strategies.core.effects import (
    CACHE,
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
    subscriber,
)
from strategies.version import stamp

WALL0_NS = 1_800_000_000 * 10**9  # the simulated wall clock's origin (a fixed, plausible epoch)
Proc = Generator[simpy.Event, Any, Any]
# A request answered in process (two-level's local hit) costs the client this much: about the
# threaded driver's local hit (300k a second on one core, simulate.calibrate).
LOCAL_HIT_S = 3e-6


class SimClock:
    """``strategies.base.Clock`` on simpy's time (seconds): what the cores read for waits,
    expiries and XFetch's delta."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env

    def now_ns(self) -> int:
        return int(self.env.now * 1e9)

    def wall_ns(self) -> int:
        return WALL0_NS + int(self.env.now * 1e9)

    def wall_ms(self) -> int:
        return self.wall_ns() // 1_000_000


class Network:
    """One half round trip to a server: ``rtt_s / 2`` scaled by a seeded uniform in [0.5, 1.5],
    so clients that start together drift apart as measured ones do."""

    def __init__(self, rtt_s: float, rng: random.Random) -> None:
        self._half = rtt_s / 2
        self._uniform = rng.random

    @property
    def half_s(self) -> float:
        """The nominal half round trip (``rtt_s / 2``)."""
        return self._half

    def half(self) -> float:
        return self._half * (0.5 + self._uniform())


Curve = tuple[tuple[int, float], ...]  # (queries in flight, median ms), concurrency ascending


class Origin:
    """The origin database: a bounded connection pool per app process and a lognormal service
    time; every call's start and end kept for the herds. The median is ``service_s``, or with a
    ``curve`` (measured, ``simulate.calibrate``) the median at the number of queries in flight
    when the call starts, interpolated between measured levels and held beyond them."""

    def __init__(self, env: simpy.Environment, apps: int, pool: int, service_s: float,
                 sigma: float, rng: random.Random, curve: Curve = ()) -> None:
        self.env = env
        self._pools = [simpy.Resource(env, pool) for _ in range(apps)]
        self._service_s, self._sigma, self._rng = service_s, sigma, rng
        self._levels = [float(k) for k, _ in curve]
        self._medians_s = [ms / 1000 for _, ms in curve]
        self.calls: list[tuple[float, float, bool]] = []  # (start, end, value still cached)
        self._version = 0
        self.inflight = 0

    def median_s(self, inflight: int) -> float:
        """The service time's median for a call that starts with ``inflight`` queries running
        (itself included)."""
        if not self._levels:
            return self._service_s
        return float(np.interp(inflight, self._levels, self._medians_s))

    def load(self, app: int, probe: Probe, cached: bool) -> Proc:
        """One origin call from app process ``app``; ``cached``: the value was still in the
        cache when it began (a refresh, not an expiry's fill)."""
        env = self.env
        probe.origin_calls += 1
        asked = env.now
        with self._pools[app].request() as slot:
            yield slot
            started = env.now
            self.inflight += 1
            median = self.median_s(self.inflight)
            yield env.timeout(median * self._rng.lognormvariate(0.0, self._sigma))
            self.inflight -= 1
        probe.pool_wait_ns += int((started - asked) * 1e9)
        probe.origin_ns += int((env.now - started) * 1e9)
        self.calls.append((started, env.now, cached))
        self._version += 1
        return stamp(self._version, b"value")


class SimDriver:
    """Runs a ported strategy's effects on simulated time for one app process; with ``cpu``
    (``simulate.cpu``) each reply from a store waits for the process's interpreter, and a
    local hit holds it. An origin call takes no turn of its own: its calibrated time is the
    client thread's own measurement of it, its wait for the interpreter included."""

    def __init__(self, env: simpy.Environment, stores: tuple[SimStore, SimStore],
                 origin: Origin, net: Network, app: int,
                 cpu: Interpreter | RandomOrder | None = None) -> None:
        self.env, self._stores, self._origin, self._net, self._app = env, stores, origin, net, app
        self.cpu = cpu
        self._handlers: dict[type, Callable[[Any, Probe], Proc]] = {
            Get: self._get, Set: self._set, Delete: self._delete, Rpush: self._rpush,
            Blpop: self._blpop, Pipeline: self._pipeline, Eval: self._eval,
            Sleep: self._sleep, Load: self._load, Submit: self._submit,
            AwaitFlight: self._await_flight, EndFlight: self._end_flight,
        }

    @property
    def cache(self) -> SimStore:
        return self._stores[CACHE]

    @property
    def net(self) -> Network:
        return self._net

    def fetch(self, strategy: Any, key: str, probe: Probe) -> Proc:
        """One request with ``strategy``'s logic (``strategy.core``), as the other drivers do."""
        core = strategy.core
        if not hasattr(core, "hit"):  # a core whose first command is not a GET (lease)
            whole: Outcome = yield from self.run(core.steps(key, probe), probe)
            if probe.local_hit:  # answered in process (two-level): no round trip, some CPU
                yield from self._turn(LOCAL_HIT_S) if self.cpu else self._pause(LOCAL_HIT_S)
            return whole
        raw = yield from self._command(CACHE, lambda s: s.get(key))
        outcome: Outcome | None = core.hit(key, raw, probe)
        if outcome is None:
            outcome = yield from self.run(core.miss(key, raw, probe), probe)
        return outcome

    def listen(self, strategy: Any) -> None:
        """Subscribe the strategy's core if it subscribes (two-level's invalidations): the
        store delivers each publish to this app process half a round trip after it."""
        core = subscriber(strategy.core)
        if core is not None:
            self._stores[CACHE].subscribe(core.channel, core.heard, self._net.half)

    def run(self, steps: Generator[Any, Any, Any], probe: Probe) -> Proc:
        """Execute ``steps``'s effects in order on simulated time; return what it returns."""
        handlers, send = self._handlers, steps.send
        try:
            effect = send(None)
            while True:
                effect = send((yield from handlers[type(effect)](effect, probe)))
        except StopIteration as stop:
            return stop.value

    def _command(self, store: int, op: Callable[[SimStore], Any]) -> Proc:
        env, half = self.env, self._net.half
        yield env.timeout(half())
        result = op(self._stores[store])
        yield env.timeout(half())
        if self.cpu is not None:
            yield from self._turn()
        return result

    def _turn(self, hold_s: float | None = None) -> Proc:
        """Wait for the interpreter and hold it (``simulate.cpu``): a reply is handled then."""
        assert self.cpu is not None
        yield self.cpu.wait(hold_s)

    def _pause(self, seconds: float) -> Proc:
        yield self.env.timeout(seconds)

    def _get(self, e: Get, probe: Probe) -> Proc:
        return (yield from self._command(e.store, lambda s: s.get(e.key)))

    def _set(self, e: Set, probe: Probe) -> Proc:
        return (yield from self._command(
            e.store, lambda s: s.set(e.key, e.value, px=e.px, pxat=e.pxat, nx=e.nx)))

    def _delete(self, e: Delete, probe: Probe) -> Proc:
        return (yield from self._command(e.store, lambda s: s.delete(*e.keys)))

    def _rpush(self, e: Rpush, probe: Probe) -> Proc:
        return (yield from self._command(e.store, lambda s: s.rpush(e.key, e.value)))

    def _pipeline(self, e: Pipeline, probe: Probe) -> Proc:
        return (yield from self._command(e.store, lambda s: s.pipeline(*e.commands)))

    def _eval(self, e: Eval, probe: Probe) -> Proc:
        return (yield from self._command(
            e.store, lambda s: s.script(e.source)(list(e.keys), list(e.args))))

    def _blpop(self, e: Blpop, probe: Probe) -> Proc:
        """Block at the server until a push or the timeout, whichever comes first."""
        env, store = self.env, self._stores[e.store]
        yield env.timeout(self._net.half())
        popped = store.wait_pop(e.key)
        yield popped | env.timeout(e.timeout_s)
        value: bytes | None = popped.value if popped.triggered else None
        if not popped.triggered:
            store.give_up(e.key, popped)
        yield env.timeout(self._net.half())
        if self.cpu is not None:
            yield from self._turn()
        return value

    def _sleep(self, e: Sleep, probe: Probe) -> Proc:
        yield self.env.timeout(e.seconds)

    def _await_flight(self, e: AwaitFlight, probe: Probe) -> Proc:
        """Park on the flight's simpy event (made by its first follower) or the timeout; in
        process, so no round trip."""
        flight = e.flight
        if flight.done:
            return
        if flight.waiter is None:
            flight.waiter = self.env.event()
        yield flight.waiter | self.env.timeout(e.timeout_s)

    def _end_flight(self, e: EndFlight, probe: Probe) -> Proc:
        if e.flight.waiter is not None:
            e.flight.waiter.succeed()
        return
        yield  # a generator like every handler

    def _load(self, e: Load, probe: Probe) -> Proc:
        cached = self._stores[CACHE].live(e.key) is not None
        return (yield from self._origin.load(self._app, probe, cached))

    def _submit(self, e: Submit, probe: Probe) -> Proc:
        """A background job (swr's refresh) as a process of its own, off the request path."""
        job_probe = Probe()
        self.env.process(self.run(e.job(job_probe), job_probe))
        return True
        yield  # a generator like every handler; the job runs on
