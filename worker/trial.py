"""One trial on one worker: client threads released at a common instant, looping until the end."""

from __future__ import annotations

import functools
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from model.http.target import HttpTarget
from model.origins import origin_pool
from model.services import ClientDriver, RedisPath, Services, redis_commands
from model.wire import TrialResult, TrialSpec
from results.store import transport
from results.store.schema import REFRESH_OP
from strategies import Outcome, Probe, close_strategy
from strategies.background import BackgroundWorker
from strategies.base import Servers
from worker import heartbeat, metrics
from worker.build import WRITER_CLIENT, AsyncBuilt, Built, build, build_http
from worker.floor import cache_floor_ns, floor_deadline_ns, http_floor_ns, trial_cache
from worker.http_fetch import HttpFetch
from worker.recorder import Recorder
from worker.selfcheck import GeneratorLoad, GeneratorMonitor
from worker.shipper import Shipped, Shipper

JOIN_GRACE_S = 15.0
SETTLE_NS = 20_000_000  # the main thread sleeps this long past the start instant


class ClientGroup:
    """The client threads of one trial, held at a gate until the common start instant."""

    def __init__(self, spec: TrialSpec, built: Built) -> None:
        self.gate = threading.Event()
        self.stop = threading.Event()
        self.recorders = [Recorder(spec.client_base + i, built.key_names, built.ops)
                          for i in range(spec.clients)]
        self.failures: list[BaseException] = []
        self._connect = built.connect
        runs: list[tuple[Recorder, Callable[[], None]]] = [
            (r, functools.partial(built.loop, built.ctx, r, self.gate, self.stop))
            for r in self.recorders
        ]
        if built.writer is not None:
            writer = Recorder(WRITER_CLIENT, built.key_names, built.ops)
            self.recorders.append(writer)
            runs.append((writer, functools.partial(built.writer, writer, self.gate, self.stop)))
        self.threads = [threading.Thread(target=self._guarded, args=(run,),
                                         name=f"client-{r.client}", daemon=True)
                        for r, run in runs]
        for thread in self.threads:
            thread.start()

    def _guarded(self, run: Callable[[], None]) -> None:
        try:
            self._connect()
            run()
        except BaseException as exc:  # noqa: BLE001 - a bug in the loop itself: the trial fails, loudly
            self.failures.append(exc)

    def abort(self) -> None:
        """Stop every client now (the trial failed before or while it ran)."""
        self.stop.set()
        self.gate.set()

    def running(self) -> threading.Thread | None:
        return next((t for t in self.threads if t.is_alive()), None)

    def sent(self) -> int:
        """Requests the client threads have made so far (the writer's rows are no requests)."""
        return sum(len(r) for r in self.recorders if r.client != WRITER_CLIENT)


@dataclass
class Ran:
    """What a trial's client threads did on this host, for its ``TrialResult``."""

    floor: list[int]  # the physical floor's round trips (ns); empty: none measured
    target_ns: int  # the start instant on this host's clock
    load: GeneratorLoad
    shipped: Shipped


def run_trial(spec: TrialSpec, services: Services) -> TrialResult:
    """Run the spec's clients on this host; their rows leave for the trial's stream on the
    broker while they run (worker.shipper); return what was sent and the worker's own stats.
    An HTTP trial (``spec.http``) runs its clients against that target, no strategy here."""
    broker = redis.Redis.from_url(services.broker_url, socket_timeout=5, socket_connect_timeout=5)
    shipper = Shipper(broker, transport.rows_key(spec.run_id, spec.trial), spec.worker_index,
                      spec.progress_interval_s, fold=metrics.COLLECTOR.folder(spec))
    try:
        http = spec.http_target()
        if http is not None and spec.client_driver == ClientDriver.ASYNCIO:
            from worker.aio.http_trial import over_http  # noqa: PLC0415 - it imports this module

            ran = over_http(spec, services, http, shipper)
        elif http is not None:
            ran = _over_http(spec, services, http, shipper)
        elif spec.client_driver == ClientDriver.ASYNCIO:
            from worker.aio.trial import in_event_loop  # noqa: PLC0415 - it imports this module

            ran = in_event_loop(spec, services, shipper)
        else:
            ran = _in_threads(spec, services, shipper)
    finally:
        broker.close()
    shipped, floor = ran.shipped, sorted(ran.floor) or [0]
    return TrialResult(
        worker=f"{socket.gethostname()}:{os.getpid()}",
        worker_index=spec.worker_index,
        batches=shipped.batches,
        requests=shipped.rows,
        origin_calls=shipped.origin_calls,
        dropped_rows=shipped.dropped_rows,
        dropped_calls=shipped.dropped_calls,
        client_ships=shipped.client_ships,
        client_wait_s=shipped.client_wait_s,
        release_late_ns=(shipped.first_start_ns or time.time_ns()) - ran.target_ns,
        floor_p5_ns=floor[len(floor) // 20],
        floor_median_ns=int(statistics.median(floor)),
        cpu_share=ran.load.cpu_share,
        loop_lag_p99_ns=ran.load.lag_p99_ns,
        loop_lag_max_ns=ran.load.lag_max_ns,
        loop_lag_samples=ran.load.samples,
    )


def _in_threads(spec: TrialSpec, services: Services, shipper: Shipper) -> Ran:
    """The strategy in each client thread, against the cache, lock store and origin."""
    kind, cache_url, cache = trial_cache(spec, services)
    locks = redis_commands(RedisPath(spec.redis_client), services.lock_url, spec.clients,
                           spec.redis_max_connections)
    pool = origin_pool(services.origin_dsn, spec.workload_spec().origin, spec.pool_size)
    refreshes = RefreshRows()
    shipper.start()
    try:
        floor = cache_floor_ns(kind, cache_url, cache, floor_deadline_ns(spec))
        background = BackgroundWorker(refreshes)
        try:
            built = build(spec, cache, locks, pool, background,
                          Servers(cache_url, services.lock_url, spec.clients))
            refreshes.bind(built, -(spec.worker_index + 2))
            shipper.watch(refreshes.recorders)
            metrics.COLLECTOR.watch(spec, built.ops, pool)
            target, load = _run_clients(spec, built, shipper)
        finally:
            background.close()
            shipped = shipper.finish()  # what was recorded leaves, whatever failed
            metrics.COLLECTOR.finish(spec)
    finally:
        if pool is not None:  # none for an HTTP origin
            pool.close()
        cache.close()
        locks.close()
    return Ran(floor, target, load, shipped)


def _over_http(spec: TrialSpec, services: Services, http: HttpTarget, shipper: Shipper) -> Ran:
    """Each client thread GETs ``http`` on a keep-alive connection of its own (worker.http_fetch);
    no origin pool, no cache client on this worker but the floor's."""
    fetch = HttpFetch(http)
    shipper.start()
    try:
        floor = http_floor_ns(spec, services, http)
        built = build_http(spec, fetch)
        metrics.COLLECTOR.watch(spec, built.ops)
        target, load = _run_clients(spec, built, shipper)
    finally:
        fetch.close()
        shipped = shipper.finish()  # what was recorded leaves, whatever failed
        metrics.COLLECTOR.finish(spec)
    return Ran(floor, target, load, shipped)


def _run_clients(spec: TrialSpec, built: Built, shipper: Shipper) -> tuple[int, GeneratorLoad]:
    """Release the clients at the start instant and follow them to the end; return the start
    on this host's clock and the generator's load."""
    monitor = GeneratorMonitor()
    try:
        group = ClientGroup(spec, built)
        shipper.watch(group.recorders)
        try:
            target = _open_gate(spec, group)
            monitor.start()
            _wait_until_done(spec, group)
        except BaseException:
            group.abort()
            raise
        finally:
            load = monitor.stop()
    finally:
        for strategy in built.strategies:
            close_strategy(strategy)
    return target, load


class RefreshRows:
    """Background jobs (swr's refresh) become ``refresh`` rows of one extra recorder.

    Bound to the key table once the loop state is built; no job runs before the clients start.
    """

    def __init__(self) -> None:
        self.recorders: list[Recorder] = []
        self._codes: dict[str, int] = {}
        self._op = 0

    def bind(self, built: Built | AsyncBuilt, client: int) -> None:
        self.recorders.append(built.refresh_recorder(client))
        self._codes = {k: i for i, k in enumerate(built.key_names.to_pylist())}
        self._op = built.ops.index(REFRESH_OP)

    def __call__(self, key: str, t_start_ns: int, latency_ns: int, outcome: Outcome,
                 probe: Probe, error: str | None) -> None:
        self.recorders[0].add(self._codes[key], t_start_ns, latency_ns, outcome, probe, error,
                              op=self._op)


def _open_gate(spec: TrialSpec, group: ClientGroup) -> int:
    """Open the gate now (each client sleeps to the start instant itself), then keep the main
    thread off the CPU until the clients are under way; return the start on this host's clock."""
    target = spec.start_ns + spec.clock_offset_ns
    group.gate.set()
    settled = target + SETTLE_NS
    while (remaining := settled - time.time_ns()) > 0:
        time.sleep(min(remaining / 1e9, 0.05))
    return target


def _wait_until_done(spec: TrialSpec, group: ClientGroup) -> None:
    """Wait for the clients, bounded: a stuck client fails the trial. Meanwhile, what they
    sent goes to the beat (worker.heartbeat): the coordinator's progress line."""
    left_s = (spec.end_ns + spec.clock_offset_ns - time.time_ns()) / 1e9
    deadline = time.monotonic() + max(left_s, 0) + JOIN_GRACE_S
    start_ns = spec.start_ns + spec.clock_offset_ns
    while (thread := group.running()) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"client threads still running {JOIN_GRACE_S}s after the trial end")
        heartbeat.publish(spec.start_ns, group.sent(), time.time_ns() - start_ns)
        thread.join(timeout=heartbeat.BEAT_S)
    heartbeat.publish(spec.start_ns, group.sent(),
                      min(time.time_ns(), spec.end_ns + spec.clock_offset_ns) - start_ns)
    if group.failures:
        raise RuntimeError(f"{len(group.failures)} client threads crashed") from group.failures[0]
