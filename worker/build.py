"""Turn a trial spec into the loop context of this worker: loaders, strategies, tables, clock."""

from __future__ import annotations

import contextlib
import functools
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import redis
from psycopg_pool import ConnectionPool

from model.origin import OriginShape, ValueShaper
from model.origins import loader_for
from model.trace import TraceArrivals
from model.wire import TrialSpec
from model.workload import Workload
from results.store.schema import APP_OP, REFRESH_OP, WRITE_OP
from strategies import Background, Deps, ExpiryGrid, Loader, version
from strategies.base import Servers
from strategies.commands import Commands
from worker.http_fetch import HttpFetch
from worker.loop import Fetch, LoopContext, Tables, Writer, closed_loop, open_loop, writer_loop
from worker.recorder import Recorder
from worker.schedule import Arrivals, Stages, segments

Loop = Callable[[LoopContext, Recorder, threading.Event, threading.Event], None]
WRITER_CLIENT = -1  # client number of the origin writer's rows


@dataclass
class Built:
    ctx: LoopContext
    loop: Loop
    key_names: pa.Array
    ops: list[str]
    writer: Callable[[Recorder, threading.Event, threading.Event], None] | None
    strategies: Sequence[object]  # what the trial's end closes (close_strategy): strategies, HTTP
    connect: Callable[[], None]  # a client thread's connections, opened before the gate

    def refresh_recorder(self, client: int) -> Recorder:
        """Where background jobs (swr's refresh) are recorded, as ``refresh`` rows."""
        return Recorder(client, self.key_names, self.ops)


def build(spec: TrialSpec, cache: Commands, locks: Commands, pool: ConnectionPool | None,
          background: Background | None = None, servers: Servers | None = None) -> Built:
    """Everything the client threads of this worker share, on this worker's clock."""
    workload = spec.workload_spec()
    version.decode_with(zlib.decompress if workload.compress else None)  # every answer's cost
    shape = OriginShape(spec.origin_span_s, spec.products)
    shaper = ValueShaper(workload.value_bytes, workload.compress)
    loaders = [loader_for(ep, workload.origin, pool, shape, shaper, spec.pool_size)
               for ep in workload.endpoints]
    strategy = spec.strategy_spec()
    built = [strategy.build(Deps(cache, locks, loader, ep.ttl_ms, background,
                                 _grid(spec, ep.ttl_ms), servers))
             for loader, ep in zip(loaders, workload.endpoints, strict=True)]
    ctx = loop_context(spec, workload, [s.fetch for s in built], loaders)
    ops = _ops(workload)
    writer = None
    if workload.invalidate_rate > 0 and spec.worker_index == 0:
        writers = [Writer(loader.write, s.on_write, loader.confirm)
                   for loader, s in zip(loaders, built, strict=True)]

        def writer(rec: Recorder, gate: threading.Event, stop: threading.Event) -> None:
            writer_loop(ctx, rec, gate, stop, workload.invalidate_rate, writers,
                        ops.index(WRITE_OP), workload.seed * 104_729 + spec.trial)

    return Built(ctx, _loop(workload), pa.array(ctx.tables.keys, pa.string()), ops, writer, built,
                 functools.partial(connect_thread, cache, locks))


@dataclass
class AsyncBuilt:
    """What the coroutine clients of this worker share (worker.aio.trial): the same loop state
    as the threads', the ported strategies (one per endpoint, for ``AsyncDriver``) and the
    threaded loaders the driver awaits through an executor."""

    ctx: LoopContext
    key_names: pa.Array
    ops: list[str]
    loaders: Sequence[Loader]
    strategies: Sequence[Any]

    def refresh_recorder(self, client: int) -> Recorder:
        return Recorder(client, self.key_names, self.ops)


def build_async(spec: TrialSpec, pool: ConnectionPool | None) -> AsyncBuilt:
    """``build`` for the asyncio driver: the loaders and the loop context as the threads have
    them, each endpoint's strategy through ``for_asyncio`` (its core; its threaded path refuses
    to run). The spec was checked to have no writer and a ported strategy (TrialSpec.check)."""
    from strategies.drivers.aio import for_asyncio  # noqa: PLC0415 - redis.asyncio: only here

    workload = spec.workload_spec()
    version.decode_with(zlib.decompress if workload.compress else None)
    shape = OriginShape(spec.origin_span_s, spec.products)
    shaper = ValueShaper(workload.value_bytes, workload.compress)
    loaders = [loader_for(ep, workload.origin, pool, shape, shaper, spec.pool_size)
               for ep in workload.endpoints]
    strategy = spec.strategy_spec()
    built = [for_asyncio(strategy, ep.ttl_ms, _grid(spec, ep.ttl_ms)) for ep in workload.endpoints]
    ctx = loop_context(spec, workload, [], loaders)
    return AsyncBuilt(ctx, pa.array(ctx.tables.keys, pa.string()), _ops(workload), loaders, built)


def build_async_http(spec: TrialSpec) -> AsyncBuilt:
    """``build_http`` for the asyncio driver: the same tables, stages and arrivals; no strategy
    and no loader on the worker (the GETs are worker.aio.http's)."""
    workload = spec.workload_spec()
    ctx = loop_context(spec, workload, [], [])
    return AsyncBuilt(ctx, pa.array(ctx.tables.keys, pa.string()), _ops(workload), [], [])


def build_http(spec: TrialSpec, fetch: HttpFetch) -> Built:
    """An HTTP trial's loop state: the same tables, stages and arrivals, every endpoint's
    request a GET of the target (worker.http_fetch); no loader (no bypass, no writer: the
    trial spec refuses both), nothing in the thread but the client."""
    workload = spec.workload_spec()
    ctx = loop_context(spec, workload, [fetch] * len(workload.endpoints), [])
    return Built(ctx, _loop(workload), pa.array(ctx.tables.keys, pa.string()), _ops(workload),
                 None, [fetch], fetch.connect)


def _ops(workload: Workload) -> list[str]:
    """The rows' op dictionary: the endpoints' names, then the writer's, refresh and app rows."""
    return [*workload.names, WRITE_OP, REFRESH_OP, APP_OP]


def loop_context(spec: TrialSpec, workload: Workload, fetchers: Sequence[Fetch],
                 loaders: Sequence[Loader]) -> LoopContext:
    """The loop state of ``fetchers``: tables, stages, bypass and arrivals on this worker's clock."""
    offset = spec.clock_offset_ns
    stage0 = (spec.stage_start_ns or spec.start_ns) + offset
    stages = Stages(stage0, round(workload.stage_s * 1e9), workload.stages)
    bypass = [workload.bypass_at(0)] + [workload.bypass_at(s) for s in range(workload.stages)]
    arrivals: Arrivals | TraceArrivals | None = None
    if workload.trace is not None:  # the recorded pace from the start instant (model.trace)
        arrivals = TraceArrivals(workload.trace, spec.start_ns + offset, spec.end_ns + offset,
                                 spec.worker_index % spec.workers, spec.workers)
    elif workload.open_loop:
        rates = [workload.rate_at(s) for s in range(workload.stages)]
        segs = segments(spec.start_ns + offset, spec.end_ns + offset, stages, rates)
        arrivals = Arrivals(segs, spec.worker_index % spec.workers, spec.workers)
    tables = _tables(workload, workload.seed * 7919 + spec.worker_index)
    return LoopContext(tables, fetchers, loaders, stages, bypass, spec.end_ns + offset,
                       think=workload.pause, seed=workload.seed, arrivals=arrivals,
                       drop_ns=round(workload.drop_ms * 1e6), start_ns=spec.start_ns + offset)


def _loop(workload: Workload) -> Loop:
    return open_loop if workload.open_loop else closed_loop


def connect_thread(cache: Commands, locks: Commands) -> None:
    """Open the calling client thread's own connections (lean path) while it waits for the
    start instant: the first requests of a synchronized start must not each pay a TCP connect
    and handshake (that spread the first herd over 100 ms). A server that does not answer now
    is not skipped: the thread's first request connects again and its failure is an error row."""
    for commands in (cache, locks):
        with contextlib.suppress(redis.RedisError):
            commands.connect()


def _grid(spec: TrialSpec, ttl_ms: int) -> ExpiryGrid | None:
    """``--expiry aligned``: boundaries every TTL from the first expiry, on this host's clock."""
    if not spec.expiry_grid_ns:
        return None
    return ExpiryGrid((spec.expiry_grid_ns + spec.clock_offset_ns) // 1_000_000, ttl_ms)


@functools.lru_cache(maxsize=4)
def _tables(workload: Workload, seed: int) -> Tables:
    """Tables are the same for every trial of a run: built once per worker process."""
    return Tables.build(workload, seed)
