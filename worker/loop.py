"""The request loops: closed (N threads, optional think time) and open (intended instants).

Both pick endpoint, key and bypass from tables precomputed in ``Tables`` (one lookup each),
and both record every failure as an error row. The open loop measures latency from the
intended instant (no coordinated omission) and records a send it gives up as an error row.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from model.origin import Committed
from model.think import ThinkTime
from model.trace import TraceArrivals
from model.workload import Workload
from results.store.schema import DROPPED
from strategies import Loader, Outcome, Probe
from strategies.base import error_text
from worker.recorder import Recorder
from worker.schedule import MASK, Arrivals, Stages, key_table, uniform_table, weighted_table

Fetch = Callable[[str, Probe], Outcome]


class Writer(NamedTuple):
    """One endpoint's write path: the origin change, the strategy's cache step, then the
    origin's record of the commit re-dated to after it (for the servers' own check)."""

    origin: Callable[[str], Committed]
    cache: Callable[[str, Probe], None]
    confirm: Callable[[str, int], None]


SPREAD = 40503  # start offset per client in the tables, so clients do not walk in step


@dataclass(frozen=True)
class Tables:
    """Per-worker choice tables: endpoint, global key code and bypass draw for index ``j``."""

    keys: list[str]
    endpoint: array[int]
    key_codes: list[array[int]]
    draws: array[float]

    @classmethod
    def build(cls, workload: Workload, seed: int) -> Tables:
        if workload.trace is not None:
            return cls.replay(workload, seed)
        rng = random.Random(seed)
        keys: list[str] = []
        codes = []
        for ep in workload.endpoints:
            table = key_table(ep.keys, rng)
            base = len(keys)
            codes.append(array("i", (base + c for c in table)) if base else table)
            keys += ep.key_names()
        weights = [ep.weight for ep in workload.endpoints]
        return cls(keys, weighted_table(weights, rng), codes, uniform_table(rng))

    @classmethod
    def replay(cls, workload: Workload, seed: int) -> Tables:
        """A trace's tables: entry ``i`` is the trace's request ``i`` (one endpoint)."""
        assert workload.trace is not None
        n = len(workload.trace.codes)
        return cls(workload.endpoints[0].key_names(), array("b", bytes(n)),
                   [array("i", workload.trace.codes)], uniform_table(random.Random(seed), n))


@dataclass
class LoopContext:
    """Everything one worker's client threads share during one trial (worker clock)."""

    tables: Tables
    fetchers: Sequence[Fetch]
    loaders: Sequence[Loader]
    stages: Stages
    bypass: Sequence[float]  # per stage, index stage + 1 (index 0: warm-up, as stage 0)
    end_ns: int
    think: ThinkTime | None = None  # the closed loop's pause after each request (model.think)
    seed: int = 1  # each client's think-time generator: seeded by it and the client number
    arrivals: Arrivals | TraceArrivals | None = None
    drop_ns: int = 1_000_000_000
    start_ns: int = 0  # the common start instant (worker clock); 0: at once
    counter: itertools.count[int] = field(default_factory=itertools.count)


Send = Callable[[int, int, int], None]  # table index, intended instant, start instant (ns)


def requester(ctx: LoopContext, rec: Recorder, probe: Probe) -> Send:
    """One client thread's request, its tables bound once: ``send(j, t_intended, t_start)``
    answers the request of table index ``j`` and records its row, latency counted from
    ``t_intended`` (a closed loop sends at once: both instants are its start).

    Everything a request reads is bound here, not looked up through ``ctx`` each time: with 25
    threads a process, every microsecond a thread holds the GIL between two replies is paid
    again in the other threads' hand-offs. Every failure is an error row with its text."""
    tables, stages = ctx.tables, ctx.stages
    endpoint, key_codes, keys, draws = tables.endpoint, tables.key_codes, tables.keys, tables.draws
    fetchers, loaders, bypass_at = ctx.fetchers, ctx.loaders, ctx.bypass
    stage_at, first_ns, one_stage = stages.at, stages.start_ns, stages.count == 1
    reset, add, clock = probe.reset, rec.add, time.perf_counter_ns
    filled, failed = Outcome.FILLED, Outcome.ERROR

    def send(j: int, t_intended: int, t_start: int) -> None:
        ep = endpoint[j]
        code = key_codes[ep][j]
        # Stages.at, inline for one stage: -1 in the warm-up, then stage 0
        stage = (0 if t_intended >= first_ns else -1) if one_stage else stage_at(t_intended)
        bypass = draws[j] < bypass_at[stage + 1]
        reset()
        error = None
        t0 = clock()
        try:
            if bypass:
                loaders[ep].load(keys[code], probe)
                outcome = filled
            else:
                outcome = fetchers[ep](keys[code], probe)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded below as an error row
            outcome = failed
            error = error_text(exc)
        latency = clock() - t0 + (t_start - t_intended)
        add(code, t_start, latency, outcome, probe, error, t_intended, ep, stage, bypass)

    return send


def wait_for_start(ctx: LoopContext, gate: threading.Event, stop: threading.Event) -> bool:
    """Each client thread sleeps to the start instant itself; False when the trial was stopped.

    The gate opens early (setup done): no thread has to be woken by another at the instant,
    so the first requests are not queued behind the thread that would have opened it.
    """
    gate.wait()
    left = ctx.start_ns - time.time_ns()
    return not (stop.wait(left / 1e9) if left > 0 else stop.is_set())


def closed_loop(ctx: LoopContext, rec: Recorder, gate: threading.Event,
                stop: threading.Event) -> None:
    """Request after request until the end instant, with the think time between them."""
    probe = Probe()
    send = requester(ctx, rec, probe)
    n = rec.client * SPREAD
    pause = ctx.think.pauses(ctx.seed * 1_000_003 + rec.client) if ctx.think else None
    if not wait_for_start(ctx, gate, stop):
        return
    stopped, now, end_ns = stop.is_set, time.time_ns, ctx.end_ns
    while not stopped():
        t = now()
        if t >= end_ns:
            return
        send(n & MASK, t, t)
        n += 1
        if pause is not None and (wait := pause((now() - t) / 1e9)) > 0:
            stop.wait(wait)


def open_loop(ctx: LoopContext, rec: Recorder, gate: threading.Event,
              stop: threading.Event) -> None:
    """Claim the worker's next send, wait for its instant, send; too late: record it dropped.

    The threads of a worker share one counter, so any free thread takes the next send; a send
    is late only when every thread was busy at its instant (k6's constant-arrival-rate model).
    """
    assert ctx.arrivals is not None
    probe = Probe()
    send = requester(ctx, rec, probe)
    if not wait_for_start(ctx, gate, stop):
        return
    while not stop.is_set():
        k = next(ctx.counter)
        intended = ctx.arrivals.instant(k)
        if intended is None:
            return
        ahead = intended - time.time_ns()
        if ahead > 0:
            if stop.wait(ahead / 1e9):
                return
        elif -ahead > ctx.drop_ns:
            record_dropped(ctx, rec, probe, ctx.arrivals.slot(k), intended)
            continue
        send(ctx.arrivals.slot(k), intended, time.time_ns())


def record_dropped(ctx: LoopContext, rec: Recorder, probe: Probe, j: int, intended: int) -> None:
    tables = ctx.tables
    ep = tables.endpoint[j]
    now = time.time_ns()
    probe.reset()
    rec.add(tables.key_codes[ep][j], now, now - intended, Outcome.ERROR, probe,
            f"{DROPPED}: more than {ctx.drop_ns / 1e6:g} ms behind its intended instant",
            intended, ep, ctx.stages.at(intended), False)


def writer_loop(ctx: LoopContext, rec: Recorder, gate: threading.Event, stop: threading.Event,
                rate: float, writers: Sequence[Writer], op: int, seed: int = 1) -> None:
    """Origin writes at ``rate`` per second, each followed by the strategy's own ``on_write``.

    Writes arrive as a Poisson process (exponential gaps, seeded), as independent updates do:
    at a fixed period a write could never land during the fill its predecessor caused, and the
    stale-set race would be hidden by the schedule.

    A row per write (op ``write``): outcome ``filled`` when the commit and the cache step both
    succeeded, ``error`` with its type otherwise; its version and commit instant when the
    commit happened, and whatever the cache step loaded or stored (``on_write=update``).
    """
    tables = ctx.tables
    probe = Probe()
    gaps = random.Random(seed)
    if not wait_for_start(ctx, gate, stop):
        return
    intended = time.time_ns()
    for k in itertools.count():
        if stop.is_set() or intended >= ctx.end_ns:
            return
        ahead = intended - time.time_ns()
        if ahead > 0 and stop.wait(ahead / 1e9):
            return
        j = (k * SPREAD) & MASK
        ep = tables.endpoint[j]
        code = tables.key_codes[ep][j]
        probe.reset()
        t_start, t0 = time.time_ns(), time.perf_counter_ns()
        outcome, error, commit_ns = _write(writers[ep], tables.keys[code], probe)
        latency = time.perf_counter_ns() - t0 + (t_start - intended)
        rec.add(code, t_start, latency, outcome, probe, error, intended, op,
                ctx.stages.at(intended), False, commit_ns)
        intended += round(gaps.expovariate(rate) * 1e9)


def _write(writer: Writer, key: str, probe: Probe) -> tuple[Outcome, str | None, int]:
    """Commit one origin write, then the cache step; the row's version is the committed one."""
    commit_ns = 0
    try:
        committed = writer.origin(key)
        commit_ns = committed.commit_ns
        writer.cache(key, probe)
        probe.version_served = committed.version
        writer.confirm(key, committed.version)
        return Outcome.FILLED, None, commit_ns
    except Exception as exc:  # noqa: BLE001 - recorded as an error row
        if commit_ns:  # committed, then the cache step failed: the row still says what committed
            probe.version_served = committed.version
        return Outcome.ERROR, error_text(exc), commit_ns
