"""One trial on one worker with ``--client-driver asyncio``: the clients are coroutines in one
event loop of the worker process, each with connections of its own to the cache and the lock
store (worker.aio.connection: a lean asyncio protocol parsed by hiredis, no pool, no lock; measured
2.2-2.7x less CPU per GET than redis.asyncio's single-connection client, docs/distributed.md).

What is the threaded driver's, reused rather than copied: the trial's plan on this worker
(worker.build.loop_context: choice tables, stages, bypass, the open loop's ``Arrivals`` of
worker.schedule), the rows (worker.recorder.Recorder, one per client, the same schema), their
shipping while the trial runs (worker.shipper.Shipper), the floor, the refresh rows and the
result. The strategies are the ported cores of strategies.core, run through
strategies.drivers.aio (``for_asyncio`` + ``AsyncDriver``), the logic the threads run.

The origin: the worker's psycopg ``ConnectionPool`` (the same loaders as the threads: the
built-in queries, the user's statement, an HTTP origin), each load on one of ``pool_size``
threads of an executor of its own. With as many threads as pool connections a load never waits
inside the pool; it waits for a thread instead, and that wait is added to the row's
``pool_wait_ns``, so the row says what the threaded driver's says: time waiting for a
connection, then the query.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from model.origins import origin_pool
from model.services import Services
from model.wire import TrialSpec
from strategies import Probe, close_strategy
from strategies.drivers import aio_listen
from worker import heartbeat, metrics
from worker.aio import run_loop
from worker.aio.clients import (
    Client,
    ExecutorLoader,
    TaskBackground,
    arequester,
    closed_client,
    open_client,
    until,
)
from worker.build import AsyncBuilt, build_async
from worker.floor import cache_floor_ns, floor_deadline_ns, trial_cache
from worker.loop import LoopContext
from worker.recorder import Recorder
from worker.selfcheck import SAMPLE_INTERVAL_S, GeneratorLoad
from worker.shipper import Shipper
from worker.trial import JOIN_GRACE_S, SETTLE_NS, Ran, RefreshRows

log = logging.getLogger(__name__)

FD_SLACK = 256  # beyond two connections a client: the origin pool, the broker, logs, the floor
CONNECTS_AT_ONCE = 256  # connections opened concurrently before the start (the listen backlog)


def raise_fd_limit(clients: int) -> int:
    """Raise this process's soft limit on open files to what ``clients`` need (two connections
    each, and some); the hard limit too when allowed (root). Return the soft limit now."""
    need = 2 * clients + FD_SLACK
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return soft
    if hard != resource.RLIM_INFINITY and hard < need:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
            return need
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


class LagMonitor:
    """The event loop watching itself: a coroutine asks to wake every ``interval_s`` and records
    how late it wakes (clients waiting for the loop), beside the process's CPU share."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._interval_ns = int(interval_s * 1e9)
        self._lags: list[int] = []
        self._cpu0, self._wall0 = time.process_time(), time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._sample())

    async def _sample(self) -> None:
        while True:
            asked = time.perf_counter_ns()
            await asyncio.sleep(self._interval_ns / 1e9)
            self._lags.append(max(0, time.perf_counter_ns() - asked - self._interval_ns))

    def stop(self) -> GeneratorLoad:
        cpu, wall = time.process_time() - self._cpu0, time.monotonic() - self._wall0
        self._task.cancel()
        lags = sorted(self._lags)
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else 0
        return GeneratorLoad(cpu / wall if wall > 0 else 0.0, p99, lags[-1] if lags else 0,
                             len(lags))


def in_event_loop(spec: TrialSpec, services: Services, shipper: Shipper) -> Ran:
    """The strategy in each coroutine client, against the cache, lock store and origin."""
    limit = raise_fd_limit(spec.clients)
    kind, cache_url, cache = trial_cache(spec, services)  # the floor's (a threaded client)
    pool = origin_pool(services.origin_dsn, spec.workload_spec().origin, spec.pool_size)
    refreshes = RefreshRows()
    shipper.start()
    try:
        floor = cache_floor_ns(kind, cache_url, cache, floor_deadline_ns(spec))
        built = build_async(spec, pool)
        refreshes.bind(built, -(spec.worker_index + 2))
        shipper.watch(refreshes.recorders)
        metrics.COLLECTOR.watch(spec, built.ops, pool)
        try:
            target, load = run_loop(_run_clients(spec, built, cache_url, services.lock_url,
                                                    shipper, refreshes, limit))
        finally:
            for strategy in built.strategies:
                close_strategy(strategy)
            shipped = shipper.finish()  # what was recorded leaves, whatever failed
            metrics.COLLECTOR.finish(spec)
    finally:
        if pool is not None:
            pool.close()
        cache.close()
    return Ran(floor, target, load, shipped)


async def _run_clients(spec: TrialSpec, built: AsyncBuilt, cache_url: str, lock_url: str,
                       shipper: Shipper, refreshes: RefreshRows,
                       fd_limit: int) -> tuple[int, GeneratorLoad]:
    """The strategy's clients: connect, release at the start instant, follow to the end."""
    executor = ThreadPoolExecutor(spec.pool_size, thread_name_prefix="origin")
    loaders = [ExecutorLoader(loader, executor) for loader in built.loaders]
    background = TaskBackground(refreshes)
    recorders = [Recorder(spec.client_base + i, built.key_names, built.ops)
                 for i in range(spec.clients)]
    clients = [Client(r, cache_url, lock_url, loaders, background) for r in recorders]
    shipper.watch(recorders)
    # Both connections of every client before the start when the file limit holds them; else
    # the cache's only, and a client's lock-store connection opens at its first lock command.
    locks_too = fd_limit >= 2 * spec.clients + FD_SLACK
    if not locks_too:
        log.warning("asyncio driver: %d clients, open-file limit %d: lock-store connections "
                    "open at first use", spec.clients, fd_limit)
    listeners: list[aio_listen.AsyncInvalidations] = []

    async def listen() -> None:  # two-level's invalidations, once the clients are connected
        listeners.extend(await aio_listen.start_all(built.strategies, cache_url))

    try:
        return await drive(spec, built.ctx, clients, built.strategies, loaders, locks_too,
                           connected=listen, finished=background.close)
    finally:
        executor.shutdown(wait=True)
        await aio_listen.close_all(listeners)


class Driven(Protocol):
    """A coroutine client as ``drive`` runs it (worker.aio.clients.Client, an HTTP client)."""

    @property
    def rec(self) -> Recorder: ...

    @property
    def drivers(self) -> Sequence[Any]: ...

    async def connect(self, gate: asyncio.Semaphore, locks_too: bool) -> bool: ...

    async def close(self) -> None: ...


async def drive(spec: TrialSpec, ctx: LoopContext, clients: Sequence[Driven],
                strategies: Sequence[Any], loaders: Sequence[ExecutorLoader], locks_too: bool,
                connected: Callable[[], Awaitable[None]] | None = None,
                finished: Callable[[], Awaitable[None]] | None = None) -> tuple[int, GeneratorLoad]:
    """Connect every client, release them at the start instant, follow them to the end (then
    ``finished``: what must end while the connections are open); the clients are closed
    whatever happened. Return the start on this host's clock and the loop's load."""
    tasks: list[asyncio.Task[None]] = []
    try:
        await _connect(clients, locks_too)
        if connected is not None:
            await connected()
        for client in clients:
            probe = Probe()
            send = arequester(ctx, client.rec, probe, client.drivers, strategies, loaders)
            run = (open_client(ctx, send, client.rec, probe) if ctx.arrivals is not None
                   else closed_client(ctx, send, client.rec))
            tasks.append(asyncio.create_task(run, name=f"client-{client.rec.client}"))
        target = spec.start_ns + spec.clock_offset_ns
        await until(target + SETTLE_NS)
        monitor = LagMonitor()
        try:
            await _follow(spec, tasks, [c.rec for c in clients])
        finally:
            load = monitor.stop()
        if finished is not None:
            await finished()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in clients))
    return target, load


async def _connect(clients: Sequence[Driven], locks_too: bool) -> None:
    """Every client's connections, ``CONNECTS_AT_ONCE`` at a time; those that failed (a connect
    timed out while the loop was busy with the others) once more, a few at a time."""
    started = time.monotonic()
    gate = asyncio.Semaphore(CONNECTS_AT_ONCE)
    done = await asyncio.gather(*(c.connect(gate, locks_too) for c in clients))
    failed = [c for c, ok in zip(clients, done, strict=True) if not ok]
    if failed:
        gate = asyncio.Semaphore(CONNECTS_AT_ONCE // 8)
        again = await asyncio.gather(*(c.connect(gate, locks_too) for c in failed))
        log.warning("asyncio driver: %d of %d clients failed to connect, %d again", len(failed),
                    len(clients), again.count(False))
    log.info("asyncio driver: %d clients connected in %.2f s", len(clients),
             time.monotonic() - started)


async def _follow(spec: TrialSpec, tasks: list[asyncio.Task[None]],
                  recorders: Sequence[Recorder]) -> None:
    """Wait for the clients, bounded (a stuck client fails the trial), publishing what they
    sent for the coordinator's progress line; a client that crashed fails the trial."""
    start_ns = spec.start_ns + spec.clock_offset_ns
    end_ns = spec.end_ns + spec.clock_offset_ns
    deadline = time.monotonic() + max(end_ns - time.time_ns(), 0) / 1e9 + JOIN_GRACE_S
    pending: set[asyncio.Task[None]] = set(tasks)
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"client coroutines still running {JOIN_GRACE_S}s after the "
                               "trial end")
        heartbeat.publish(spec.start_ns, sum(len(r) for r in recorders), time.time_ns() - start_ns)
        _, pending = await asyncio.wait(pending, timeout=heartbeat.BEAT_S)
    heartbeat.publish(spec.start_ns, sum(len(r) for r in recorders),
                      min(time.time_ns(), end_ns) - start_ns)
    failures = [e for t in tasks if (e := t.exception()) is not None]
    if failures:
        raise RuntimeError(f"{len(failures)} client coroutines crashed") from failures[0]
