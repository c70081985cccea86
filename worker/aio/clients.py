"""The coroutine clients of ``--client-driver asyncio`` (worker.aio.trial runs them): one
client's connections and drivers, the origin awaited on an executor, the background jobs on a
task, and the closed and open loops, each ``worker.loop``'s loop awaited rather than copied in
spirit: the same tables, stages, bypass, send times and rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

from strategies import Loader, Outcome, Probe
from strategies.background import BackgroundFull, Record
from strategies.base import error_text
from strategies.drivers.aio import AsyncDriver, AsyncJob
from worker.aio.connection import LeanAsyncCommands
from worker.loop import SPREAD, LoopContext, record_dropped
from worker.recorder import Recorder
from worker.schedule import MASK


class ExecutorLoader:
    """A threaded loader awaited: each load on one of the executor's threads (as many as the
    pool's connections); the wait for a thread is the row's pool wait."""

    def __init__(self, loader: Loader, executor: ThreadPoolExecutor) -> None:
        self._loader = loader
        self._executor = executor

    async def load(self, key: str, probe: Probe) -> bytes:
        asked = time.perf_counter_ns()

        def run() -> bytes:
            probe.pool_wait_ns += time.perf_counter_ns() - asked
            return self._loader.load(key, probe)

        return await asyncio.get_running_loop().run_in_executor(self._executor, run)


class TaskBackground:
    """``AsyncBackground``: the jobs (swr's refresh) in order on one task, each a row of its own,
    as the threads' ``BackgroundWorker`` runs them on one thread."""

    def __init__(self, record: Record, capacity: int = 1024) -> None:
        self._record = record
        self._queue: asyncio.Queue[tuple[str, AsyncJob] | None] = asyncio.Queue(capacity)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, key: str, job: AsyncJob) -> None:
        try:
            self._queue.put_nowait((key, job))
        except asyncio.QueueFull:
            raise BackgroundFull(f"{self._queue.maxsize} background jobs pending") from None

    async def close(self, timeout_s: float = 10.0) -> None:
        await asyncio.wait_for(self._queue.put(None), timeout_s)
        await asyncio.wait_for(self._task, timeout_s)

    async def _run(self) -> None:
        while (item := await self._queue.get()) is not None:
            key, job = item
            probe = Probe()
            t_start, t0 = time.time_ns(), time.perf_counter_ns()
            error = None
            try:
                outcome = await job(probe)
            except Exception as exc:  # noqa: BLE001 - recorded below as an error row
                outcome = Outcome.ERROR
                error = error_text(exc)
            self._record(key, t_start, time.perf_counter_ns() - t0, outcome, probe, error)


class Client:
    """One coroutine client: its connections, its recorder, one driver per endpoint."""

    def __init__(self, rec: Recorder, cache_url: str, lock_url: str,
                 loaders: Sequence[ExecutorLoader], background: TaskBackground) -> None:
        self.rec = rec
        self.cache = LeanAsyncCommands(cache_url)
        self.locks = LeanAsyncCommands(lock_url)
        self.drivers = [AsyncDriver(self.cache, self.locks, loader, background)
                        for loader in loaders]

    async def connect(self, gate: asyncio.Semaphore, locks_too: bool) -> bool:
        """Open the connections before the start instant (a synchronized start must not pay a
        connect per request); False when one failed. A server that does not answer now: the
        first request connects again, and its failure is an error row."""
        done = True
        async with gate:
            for commands in (self.cache, self.locks) if locks_too else (self.cache,):
                try:
                    await commands.connect()
                except (redis.RedisError, OSError):
                    done = False
        return done

    async def close(self) -> None:
        for commands in (self.cache, self.locks):
            with contextlib.suppress(redis.RedisError, OSError):
                await commands.close()


Send = Callable[[int, int, int], Awaitable[None]]


def arequester(ctx: LoopContext, rec: Recorder, probe: Probe, drivers: Sequence[Any],
               strategies: Sequence[Any], loaders: Sequence[ExecutorLoader]) -> Send:
    """``worker.loop.requester`` awaited: the same table lookups, stage, bypass and row; every
    failure an error row with its text."""
    tables, stages = ctx.tables, ctx.stages
    endpoint, key_codes, keys, draws = tables.endpoint, tables.key_codes, tables.keys, tables.draws
    bypass_at = ctx.bypass
    stage_at, first_ns, one_stage = stages.at, stages.start_ns, stages.count == 1
    reset, add, clock = probe.reset, rec.add, time.perf_counter_ns
    filled, failed = Outcome.FILLED, Outcome.ERROR

    async def send(j: int, t_intended: int, t_start: int) -> None:
        ep = endpoint[j]
        code = key_codes[ep][j]
        stage = (0 if t_intended >= first_ns else -1) if one_stage else stage_at(t_intended)
        bypass = draws[j] < bypass_at[stage + 1]
        reset()
        error = None
        t0 = clock()
        try:
            if bypass:
                await loaders[ep].load(keys[code], probe)
                outcome = filled
            else:
                outcome = await drivers[ep].fetch(strategies[ep], keys[code], probe)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded below as an error row
            outcome = failed
            error = error_text(exc)
        latency = clock() - t0 + (t_start - t_intended)
        add(code, t_start, latency, outcome, probe, error, t_intended, ep, stage, bypass)

    return send


async def until(t_ns: int) -> None:
    if (left := t_ns - time.time_ns()) > 0:
        await asyncio.sleep(left / 1e9)


async def closed_client(ctx: LoopContext, send: Send, rec: Recorder) -> None:
    """``worker.loop.closed_loop``: request after request until the end, think time between."""
    n = rec.client * SPREAD
    pause = ctx.think.pauses(ctx.seed * 1_000_003 + rec.client) if ctx.think else None
    await until(ctx.start_ns)
    now, end_ns = time.time_ns, ctx.end_ns
    while (t := now()) < end_ns:
        await send(n & MASK, t, t)
        n += 1
        if pause is not None and (wait := pause((now() - t) / 1e9)) > 0:
            await asyncio.sleep(wait)


async def open_client(ctx: LoopContext, send: Send, rec: Recorder, probe: Probe) -> None:
    """``worker.loop.open_loop``: claim the worker's next send of the plan (worker.schedule's
    ``Arrivals``), wait for its intended instant, send; too late: a dropped-send error row.
    Latency from the intended instant (no coordinated omission)."""
    arrivals = ctx.arrivals
    assert arrivals is not None
    await until(ctx.start_ns)
    while True:
        k = next(ctx.counter)
        intended = arrivals.instant(k)
        if intended is None:
            return
        ahead = intended - time.time_ns()
        if ahead > 0:
            await asyncio.sleep(ahead / 1e9)
        elif -ahead > ctx.drop_ns:
            record_dropped(ctx, rec, probe, arrivals.slot(k), intended)
            continue
        await send(arrivals.slot(k), intended, time.time_ns())
