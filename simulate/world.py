"""The simulated world: N app processes x M clients on one hot key, run for K expiries.

Each app process holds its own instance of the registered strategy (``strategies.parse(spec)
.build(deps)``, as a worker does) and its own origin pool; its clients are simpy processes that
run the strategy through ``SimDriver``. Load is closed loop (each client asks again after an
exponential think time, 0: at once) or open loop Poisson (``rate`` requests/s over all app
processes, each arrival waiting for one of its app's M request slots, its latency counted from
the arrival: no coordinated omission). The key is primed at time 0 to expire one TTL later;
each later expiry comes one TTL after its fill (drift), so a run lasts as long as its K herds.
With ``cpu_us`` each app process has an interpreter (``simulate.cpu``) that its clients queue
for after every reply: the load generator's own CPU.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import simpy

from simulate import bulk
from simulate.cpu import closed_wait_s, interpreter
from simulate.driver import Curve, Network, Origin, Proc, SimClock, SimDriver
from simulate.latency import Counted
from simulate.metrics import herds
from simulate.store import SimStore
from strategies import registry
from strategies.base import Deps, Outcome, Probe, StrategyError
from strategies.version import stamp

KEY = "hot"
# closed loop with a CPU queue: hits stop being counted in bulk this many client cycles before
# an expiry, so the queue the expiry meets is built by the per-request path (simulate.bulk)
SETTLE_CYCLES = 5


@dataclass(frozen=True)
class WorldSpec:
    """What one simulated trial is: topology, load, the hot key, the modelled services."""

    strategy: str
    app_servers: int = 8
    clients: int = 25  # per app process (its concurrency)
    ttl_s: float = 2.0
    origin_ms: float = 3.43  # the origin's median service time
    origin_sigma: float = 0.25  # its lognormal spread
    pool: int = 4  # origin connections per app process
    rtt_us: float = 200.0  # one cache / lock-store round trip
    think_ms: float = 0.0  # closed loop: mean think time between a client's requests
    rate: float | None = None  # open loop: requests/s over all app processes (None: closed)
    expiries: int = 3
    origin_curve: Curve = ()  # origin median against concurrency (--from); (): origin_ms flat
    bulk_hits: bool = True  # closed loop: hits that decide nothing counted in bulk (simulate.bulk)
    cpu_us: float = 0.0  # an app process's interpreter held per reply (simulate.cpu); 0: none
    cpu_order: str = "fifo"  # the order it serves waiting replies in: fifo or random (simulate.cpu)


@dataclass
class Recorded:
    """What one replication's requests and origin calls were."""

    # flat arrays, not lists of floats: 17 bytes a request instead of about 90
    starts: array[float] = field(default_factory=lambda: array("d"))  # start (open loop: intended), s
    latencies: array[float] = field(default_factory=lambda: array("d"))  # seconds
    outcomes: array[int] = field(default_factory=lambda: array("b"))
    bulk: Counted = field(default_factory=Counted)  # the hits counted in bulk (simulate.bulk)
    errors: dict[str, int] = field(default_factory=dict)
    calls: list[tuple[float, float, bool]] = field(default_factory=list)  # origin (start, end, cached)
    seconds: float = 0.0  # simulated time the run lasted
    commands: int = 0  # commands the two stores applied

    def add(self, start: float, end: float, outcome: Outcome) -> None:
        self.starts.append(start)
        self.latencies.append(end - start)
        self.outcomes.append(int(outcome))


class PrimeLoader:
    """The loader priming calls (xfetch's prime measures one recompute): the origin's median,
    at no simulated time; the calls it makes are outside every count, as in a real run."""

    def __init__(self, origin_ms: float) -> None:
        self._origin_ns = int(origin_ms * 1e6)

    def load(self, key: str, probe: Probe) -> bytes:
        probe.origin_ns += self._origin_ns
        return stamp(0, b"value")


def build(spec: str, ttl_ms: int, clock: SimClock, cache: SimStore, locks: SimStore,
          origin_ms: float) -> Any:
    """The registered strategy ``spec``, built on the modelled stores (priming writes through
    them at once); refused when its logic is not in ``strategies.core``."""
    stores: Any = (cache, locks)  # SimStore has the commands the cores and priming use
    strategy = registry.parse(spec).build(Deps(stores[0], stores[1], PrimeLoader(origin_ms),
                                               ttl_ms, clock=clock, listen=False))
    if not getattr(strategy, "sans_io", False):
        raise registry.InvalidStrategy(f"strategy {spec!r} is not ported to strategies.core: "
                                       "the model cannot run it yet")
    return strategy


@contextmanager
def seeded_global_random(seed: int) -> Iterator[None]:
    """XFetch draws from the module ``random`` (strategies.core.xfetch.draw): seeded for the
    replication, the caller's state restored after, so a seed gives one run."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def client(env: simpy.Environment, driver: SimDriver, strategy: Any, rec: Recorded,
           think_s: float, rng: random.Random, chunk_s: float,
           ahead: bulk.Lead | None, handled_s: float = 0.0) -> Proc:
    """A closed-loop client: ask, record, think, ask again; with ``ahead`` (simulate.bulk),
    the hits that decide nothing counted in bulk up to ``chunk_s`` at a time, each taking
    ``handled_s`` after its reply (the interpreter's steady wait and hold, simulate.cpu)."""
    yield env.timeout(rng.random() * max(think_s, 0.001))  # start spread over one think time
    probe = Probe()
    draws = (bulk.Draws(driver.net.half_s, think_s, rng.getrandbits(64), rec.bulk.enrol(),
                        handled_s) if ahead is not None else None)
    while True:
        if ahead is not None and draws is not None:
            next_start = bulk.hits(driver, KEY, rec.bulk, draws, chunk_s, ahead)
            if next_start > env.now:
                yield env.timeout(next_start - env.now)
                continue
        probe.reset()
        started = env.now
        outcome = yield from request(driver, strategy, probe, rec)
        rec.add(started, env.now, outcome)
        if think_s > 0:
            yield env.timeout(rng.expovariate(1 / think_s))


def request(driver: SimDriver, strategy: Any, probe: Probe, rec: Recorded) -> Proc:
    """One request's outcome; a strategy's own failure is an error row of its type. Anything
    else (``NotModelled``, a bug of the model) stops the run: it must not pose as a row."""
    try:
        outcome: Outcome = yield from driver.fetch(strategy, KEY, probe)
    except StrategyError as exc:  # a lock wait timing out: an error row, never a success
        rec.errors[type(exc).__name__] = rec.errors.get(type(exc).__name__, 0) + 1
        return Outcome.ERROR
    return outcome


def arrivals(env: simpy.Environment, driver: SimDriver, strategy: Any, rec: Recorded,
             rate: float, slots: simpy.Resource, rng: random.Random) -> Proc:
    """Open loop for one app process: Poisson arrivals, each a request of its own."""
    while True:
        yield env.timeout(rng.expovariate(rate))
        env.process(_arrival(env, driver, strategy, rec, slots))


def _arrival(env: simpy.Environment, driver: SimDriver, strategy: Any, rec: Recorded,
             slots: simpy.Resource) -> Proc:
    intended = env.now
    with slots.request() as slot:
        yield slot
        outcome = yield from request(driver, strategy, Probe(), rec)
    rec.add(intended, env.now, outcome)


def replicate(spec: WorldSpec, seed: int) -> Recorded:
    """One replication of ``spec``: a seeded world, run until its K-th herd is over."""
    with seeded_global_random(seed):
        return _run(spec, random.Random(seed))


def _run(spec: WorldSpec, rng: random.Random) -> Recorded:
    """Every draw of the world comes from ``rng``, one sub-generator per role, so adding a
    client does not shift the draws of the origin."""
    env = simpy.Environment()
    clock = SimClock(env)
    cache, locks = SimStore(env, clock.wall_ms), SimStore(env, clock.wall_ms)
    origin = Origin(env, spec.app_servers, spec.pool, spec.origin_ms / 1000, spec.origin_sigma,
                    random.Random(rng.random()), spec.origin_curve)
    rec = Recorded(calls=origin.calls)
    ttl_ms = round(spec.ttl_s * 1000)
    for app in range(spec.app_servers):
        strategy = build(spec.strategy, ttl_ms, clock, cache, locks, spec.origin_ms)
        if app == 0:
            strategy.prime(KEY, stamp(0, b"value"), clock.wall_ms() + ttl_ms)
        cpu = (interpreter(env, spec.cpu_us / 1e6, spec.cpu_order, random.Random(rng.random()))
               if spec.cpu_us > 0 else None)
        driver = SimDriver(env, (cache, locks), origin,
                           Network(spec.rtt_us / 1e6, random.Random(rng.random())), app, cpu)
        driver.listen(strategy)
        _start_app(env, spec, driver, strategy, rec, random.Random(rng.random()))
    _run_until_herds(env, spec, origin)
    rec.seconds, rec.commands = env.now, cache.commands + locks.commands
    return rec


def _start_app(env: simpy.Environment, spec: WorldSpec, driver: SimDriver, strategy: Any,
               rec: Recorded, rng: random.Random) -> None:
    if spec.rate is not None:
        slots = simpy.Resource(env, spec.clients)
        env.process(arrivals(env, driver, strategy, rec, spec.rate / spec.app_servers, slots, rng))
        return
    rtt_s, think_s, hold_s = spec.rtt_us / 1e6, spec.think_ms / 1000, spec.cpu_us / 1e6
    handled_s = hold_s + closed_wait_s(spec.clients, hold_s, rtt_s + think_s) if hold_s else 0.0
    settle_s = SETTLE_CYCLES * (rtt_s + handled_s + think_s) if hold_s else 0.0
    ahead = (bulk.lead(strategy, spec.strategy, spec.origin_ms / 1000, settle_s)
             if spec.bulk_hits else None)
    chunk_s = bulk.chunk_s(spec.ttl_s, rtt_s, think_s + handled_s)
    for _ in range(spec.clients):
        env.process(client(env, driver, strategy, rec, think_s, random.Random(rng.random()),
                           chunk_s, ahead, handled_s))


def _run_until_herds(env: simpy.Environment, spec: WorldSpec, origin: Origin) -> None:
    """Run past the K-th expiry until its herd is over (no origin call running, none begun for
    half a TTL), at most 3 (K + 1) TTLs: the herds drift by their fill times, so their instants
    are not known ahead."""
    gap = spec.ttl_s / 2
    limit = spec.ttl_s * 3 * (spec.expiries + 1)
    env.run(until=spec.ttl_s * spec.expiries + gap)
    while env.now < limit:
        if origin.inflight == 0 and len(herds(origin.calls, gap)) >= spec.expiries and (
                origin.calls and env.now - origin.calls[-1][0] >= gap):
            return
        env.run(until=env.now + gap / 2)
