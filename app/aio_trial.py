"""One trial inside one asyncio app process (app.asgi): built in the process's event loop, its
requests served as coroutines of that loop, its origin calls recorded as ``app`` rows.

The trial's strategy is either one of ours ported to strategies.core (run by the asyncio driver,
strategies.drivers.aio, on redis.asyncio) or an asyncio library adapter (adapters/aio: cashews,
aiocache, which bring their own clients). Every coroutine of the loop shares it, as a real
asyncio service's requests share one cache client: cashews' in-process coalescing is then
per process, and the herd is bounded by the processes, not the requests in flight.

All requests run on the loop's one thread, so one recorder holds the request rows and one the
rows of work done off the request path (a ported swr's revalidation, cashews early's refresh);
app.control's thread builds and finishes the trial through the loop, and worker.shipper's
thread sends the rows as it does for the WSGI app.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pyarrow as pa
import redis
import redis.asyncio

from adapters.aio import registry as aio_registry
from adapters.aio.base import AsyncDeps, AsyncStrategy
from app.aio_origin import loaders_for, open_pool
from app.trial import ABANDON_S, Answer, UnknownKey, key_codes
from model.apptier import AppTrialSpec
from model.origin import OriginShape, ValueShaper
from model.services import Services
from results.store import transport
from results.store.schema import APP_OP, REFRESH_OP, WRITE_OP
from strategies import Outcome, Probe
from strategies.base import CacheServer, Servers, error_text
from strategies.drivers import aio_listen
from strategies.drivers.aio import AsyncDriver, AsyncJob, RedisAsyncCommands, for_asyncio
from strategies.params import ExpiryGrid
from worker.build import loop_context
from worker.recorder import Recorder
from worker.shipper import Shipped, Shipper

BUILD_TIMEOUT_S = 25.0  # within the coordinator's 30 s for a trial's build
POOL_SLACK = 4  # connections beyond the requests in flight, as the WSGI app's pools
REDIS_TIMEOUT_S = 2.0  # socket, connect and pool-checkout timeouts: then an error row


class Background:
    """``AsyncBackground``: a ported strategy's off-path job as a task, its row a refresh row."""

    def __init__(self, rows: RowSink) -> None:
        self._rows, self._tasks = rows, set[asyncio.Task[None]]()

    def submit(self, key: str, job: AsyncJob) -> None:
        task = asyncio.get_running_loop().create_task(self._run(key, job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: str, job: AsyncJob) -> None:
        probe, error = Probe(), None
        t_start, t0 = time.time_ns(), time.perf_counter_ns()
        try:
            outcome = await job(probe)
        except Exception as exc:  # noqa: BLE001 - recorded as an error row of its own
            outcome, error = Outcome.ERROR, error_text(exc)
        self._rows.refresh(key, t_start, time.perf_counter_ns() - t0, outcome, probe, error)

    async def close(self) -> None:
        """Wait for the jobs under way (their rows belong to the trial)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10)


class RowSink:
    """The trial's two recorders (requests, off-path work), written from the loop's thread;
    ``record`` is the async adapters' ``Refreshes``."""

    def __init__(self, sender: int, keys: list[str], ops: list[str], shipper: Shipper) -> None:
        names = pa.array(keys, pa.string())
        self.requests = Recorder(-(sender + 2), names, ops)
        self.refreshes = Recorder(-(sender + 2), names, ops)
        self._codes = {k: i for i, k in enumerate(keys)}
        self._refresh_op = ops.index(REFRESH_OP)
        shipper.watch([self.requests, self.refreshes])

    def refresh(self, key: str, t_start_ns: int, latency_ns: int, outcome: Outcome,
                probe: Probe, error: str | None) -> None:
        self.refreshes.add(self._codes[key], t_start_ns, latency_ns, outcome, probe, error,
                           op=self._refresh_op)

    def record(self, key: str, probe: Probe) -> None:
        """A library's own off-path load (cashews early's refresh): one filled refresh row."""
        start = probe.origin_start_ns or time.time_ns()
        self.refresh(key, start, probe.origin_ns, Outcome.FILLED, probe, None)


class AsyncAppTrial:
    """Built with ``open`` inside the loop; ``serve`` from its requests; ``finish`` from the
    control thread (it runs the closing through the loop)."""

    def __init__(self, spec: AppTrialSpec, sender: int, broker: redis.Redis,
                 loop: asyncio.AbstractEventLoop) -> None:
        trial = spec.trial
        self.spec, self.sender, self.loop = spec, sender, loop
        workload = trial.workload_spec()
        self._codes = key_codes(workload)
        ops = [*workload.names, WRITE_OP, REFRESH_OP, APP_OP]
        self._app_op = ops.index(APP_OP)
        self._stages = loop_context(trial, workload, [], []).stages
        self.shipper = Shipper(broker, transport.rows_key(trial.run_id, trial.trial), sender,
                               trial.progress_interval_s)
        self.rows = RowSink(sender, list(self._codes), ops, self.shipper)
        self._background = Background(self.rows)
        # the requests in flight (a WSGI process's threads): the rest wait here, as a request
        # waits for a free thread, and no pool is ever exhausted by requests alone
        self._slots = asyncio.Semaphore(spec.threads)
        self._closers: list[Any] = []
        self._fetch: list[Any] = []
        self._loaders: list[Any] = []

    @classmethod
    async def open(cls, spec: AppTrialSpec, sender: int, services: Services,
                   broker: redis.Redis) -> AsyncAppTrial:
        self = cls(spec, sender, broker, asyncio.get_running_loop())
        try:
            await self._build(services)
        except BaseException:
            await self._close()
            raise
        self.shipper.start()
        return self

    async def _build(self, services: Services) -> None:
        trial, strategy = self.spec.trial, self.spec.trial.strategy_spec()
        workload = trial.workload_spec()
        if strategy.cache_server is not CacheServer.REDIS:
            raise ValueError(f"{strategy.label}: the asgi app tier serves Redis strategies only")
        cache_url = services.cache_url_for(CacheServer.REDIS)
        if cache_url is None:
            raise RuntimeError("this app process has no cache (STAMPEDE_CACHE_URL)")
        in_flight = self.spec.threads
        pool = await open_pool(services.origin_dsn, workload.origin, trial.pool_size)
        self._closers.append(pool.close)
        shaper = ValueShaper(workload.value_bytes, workload.compress)
        shape = OriginShape(trial.origin_span_s, trial.products)
        self._loaders = loaders_for(list(workload.endpoints), pool, shape, shaper)
        if strategy.is_async:  # a library adapter: its own clients, sized for the coroutines
            servers = Servers(cache_url, services.lock_url, in_flight)
            for loader, ep in zip(self._loaders, workload.endpoints, strict=True):
                built: AsyncStrategy = aio_registry.build(
                    strategy.label, AsyncDeps(servers, loader, ep.ttl_ms, self.rows))
                self._closers.append(built.aclose)
                self._fetch.append(built.fetch)
            return
        cache = RedisAsyncCommands(_client(cache_url, in_flight))
        locks = RedisAsyncCommands(_client(services.lock_url, in_flight))
        self._closers += [cache.close, locks.close]
        for loader, ep in zip(self._loaders, workload.endpoints, strict=True):
            ported = for_asyncio(strategy.label, ep.ttl_ms, _grid(trial.expiry_grid_ns,
                                                                  trial.clock_offset_ns, ep.ttl_ms))
            driver = AsyncDriver(cache, locks, loader, self._background)
            self._fetch.append(_bound(driver, ported))
            for listener in await aio_listen.start_all([ported], cache_url):  # two-level's
                self._closers.append(listener.close)

    async def serve(self, key: str, record: bool = True) -> Answer:
        """Answer one request for ``key`` (as app.trial.AppTrial.serve): an origin call it made
        becomes an ``app`` row; failures are answers too (error)."""
        found = self._codes.get(key)
        if found is None:
            raise UnknownKey(key)
        endpoint, code = found
        probe = Probe()
        error, body = None, b""
        async with self._slots:  # at most --app-threads in flight: the pools are sized for them
            t_start, t0 = time.time_ns(), time.perf_counter_ns()
            try:
                outcome = await self._fetch[endpoint](key, probe)
                body = str(probe.version_served).encode()
            except Exception as exc:  # noqa: BLE001 - answered as a 500, recorded as an error row
                outcome, error = Outcome.ERROR, error_text(exc)
            latency = time.perf_counter_ns() - t0
        if record and probe.origin_calls:
            self.rows.requests.add(code, t_start, latency, outcome, probe, error,
                                   op=self._app_op, stage=self._stages.at(t_start))
        return Answer(outcome, probe, body, error)

    def abandoned(self) -> bool:
        end_ns = self.spec.trial.end_ns + self.spec.trial.clock_offset_ns
        return time.time_ns() > end_ns + ABANDON_S * 10**9

    def finish(self) -> Shipped:
        """From the control thread: off-path work ends, the rows and the end marker leave,
        the connections close (in the loop)."""
        try:
            asyncio.run_coroutine_threadsafe(self._background.close(), self.loop).result(15)
        finally:
            shipped = self.shipper.finish()
            asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(15)
        return shipped

    async def _close(self) -> None:
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):  # after the count: nothing left to record
                await close()
        self._closers.clear()


def _bound(driver: AsyncDriver, strategy: Any) -> Any:
    async def fetch(key: str, probe: Probe) -> Outcome:
        return await driver.fetch(strategy, key, probe)
    return fetch


def _client(url: str, in_flight: int) -> redis.asyncio.Redis:
    """A redis.asyncio client whose pool holds one connection per request in flight (plus
    slack); an exhausted pool is an error after ``REDIS_TIMEOUT_S``, never a hang."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=in_flight + POOL_SLACK, timeout=REDIS_TIMEOUT_S,
        socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)
    return redis.asyncio.Redis(connection_pool=pool)


def _grid(grid_ns: int, offset_ns: int, ttl_ms: int) -> ExpiryGrid | None:
    """``--expiry aligned``: boundaries every TTL from the first expiry, on this host's clock."""
    return ExpiryGrid((grid_ns + offset_ns) // 1_000_000, ttl_ms) if grid_ns else None


def open_trial(spec: AppTrialSpec, sender: int, services: Services, broker: redis.Redis,
               loop: asyncio.AbstractEventLoop) -> AsyncAppTrial:
    """From app.control's thread: the trial built inside ``loop`` (blocking until it is)."""
    future = asyncio.run_coroutine_threadsafe(
        AsyncAppTrial.open(spec, sender, services, broker), loop)
    return future.result(BUILD_TIMEOUT_S)
