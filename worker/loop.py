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

from model.workload import Workload
from results.schema import DROPPED
from strategies import Loader, Outcome, Probe
from worker.recorder import Recorder
from worker.schedule import MASK, Arrivals, Stages, key_table, uniform_table, weighted_table

Fetch = Callable[[str, Probe], Outcome]
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


@dataclass
class LoopContext:
    """Everything one worker's client threads share during one trial (worker clock)."""

    tables: Tables
    fetchers: Sequence[Fetch]
    loaders: Sequence[Loader]
    stages: Stages
    bypass: Sequence[float]  # per stage, index stage + 1 (index 0: warm-up, as stage 0)
    end_ns: int
    think_s: float = 0.0
    arrivals: Arrivals | None = None
    drop_ns: int = 1_000_000_000
    start_ns: int = 0  # the common start instant (worker clock); 0: at once
    counter: itertools.count[int] = field(default_factory=itertools.count)


def request(ctx: LoopContext, rec: Recorder, probe: Probe, j: int, t_intended: int,
            t_start: int = 0) -> None:
    """One request chosen by table index ``j``; latency counts from ``t_intended``.

    A closed loop sends at once: it passes its start as ``t_start`` too, so the two are equal.
    """
    tables = ctx.tables
    ep = tables.endpoint[j]
    code = tables.key_codes[ep][j]
    t_start = t_start or time.time_ns()
    stage = ctx.stages.at(t_intended)
    bypass = tables.draws[j] < ctx.bypass[stage + 1]
    probe.reset()
    error = None
    t0 = time.perf_counter_ns()
    try:
        if bypass:
            ctx.loaders[ep].load(tables.keys[code], probe)
            outcome = Outcome.FILLED
        else:
            outcome = ctx.fetchers[ep](tables.keys[code], probe)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded below as an error row
        outcome = Outcome.ERROR
        error = f"{type(exc).__name__}: {exc}"[:200]
    latency = time.perf_counter_ns() - t0 + (t_start - t_intended)
    rec.add(code, t_start, latency, outcome, probe, error, t_intended, ep, stage, bypass)


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
    n = rec.client * SPREAD
    think = ctx.think_s
    if not wait_for_start(ctx, gate, stop):
        return
    while not stop.is_set():
        t = time.time_ns()
        if t >= ctx.end_ns:
            return
        request(ctx, rec, probe, n & MASK, t, t)
        n += 1
        if think:
            stop.wait(think)


def open_loop(ctx: LoopContext, rec: Recorder, gate: threading.Event,
              stop: threading.Event) -> None:
    """Claim the worker's next send, wait for its instant, send; too late: record it dropped.

    The threads of a worker share one counter, so any free thread takes the next send; a send
    is late only when every thread was busy at its instant (k6's constant-arrival-rate model).
    """
    assert ctx.arrivals is not None
    probe = Probe()
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
            _dropped(ctx, rec, probe, k & MASK, intended)
            continue
        request(ctx, rec, probe, k & MASK, intended)


def _dropped(ctx: LoopContext, rec: Recorder, probe: Probe, j: int, intended: int) -> None:
    tables = ctx.tables
    ep = tables.endpoint[j]
    now = time.time_ns()
    probe.reset()
    rec.add(tables.key_codes[ep][j], now, now - intended, Outcome.ERROR, probe,
            f"{DROPPED}: more than {ctx.drop_ns / 1e6:g} ms behind its intended instant",
            intended, ep, ctx.stages.at(intended), False)


def writer_loop(ctx: LoopContext, rec: Recorder, gate: threading.Event, stop: threading.Event,
                rate: float, writes: Sequence[Callable[[str], None]],
                invalidate: Callable[[str], object], op: int) -> None:
    """Write-driven invalidation: at ``rate`` per second change an origin row, delete its key.

    Rows carry ``op`` (the "invalidate" op): outcome ``filled`` when the write and the delete
    both succeeded, ``error`` with its type otherwise. They make no origin read calls.
    """
    tables = ctx.tables
    probe = Probe()
    period_ns = round(1e9 / rate)
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
        t_start, t0, error = time.time_ns(), time.perf_counter_ns(), None
        try:
            writes[ep](tables.keys[code])
            invalidate(tables.keys[code])
            outcome = Outcome.FILLED
        except Exception as exc:  # noqa: BLE001 - recorded as an error row
            outcome, error = Outcome.ERROR, f"{type(exc).__name__}: {exc}"[:200]
        probe.reset()
        latency = time.perf_counter_ns() - t0 + (t_start - intended)
        rec.add(code, t_start, latency, outcome, probe, error, intended, op,
                ctx.stages.at(intended), False)
        intended += period_ns
