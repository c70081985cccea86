"""One trial on one worker: client threads released at a common instant, looping until the end."""

from __future__ import annotations

import functools
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable

import redis

from model.memcache import Memcache
from model.origins import origin_pool
from model.services import RedisPath, Services, redis_commands
from model.wire import TrialResult, TrialSpec
from results.store import transport
from results.store.schema import REFRESH_OP
from strategies import Outcome, Probe, close_strategy
from strategies.background import BackgroundWorker
from strategies.base import CacheServer, Servers
from strategies.commands import Commands, NoCommands
from worker import metrics
from worker.build import WRITER_CLIENT, Built, build
from worker.recorder import Recorder
from worker.selfcheck import GeneratorLoad, GeneratorMonitor
from worker.shipper import Shipper

FLOOR_SAMPLES = 200
FLOOR_MIN = 20  # the floor's p5 needs a few samples, however slow the link
JOIN_GRACE_S = 15.0
SETTLE_NS = 20_000_000  # the main thread sleeps this long past the start instant


def measure_floor_ns(round_trip: Callable[[], object], samples: int = FLOOR_SAMPLES,
                     until_ns: int | None = None) -> list[int]:
    """Sequential round trips to the cache (a GET of a missing key): the physical floor of a
    cache hit. At most until ``until_ns`` (wall clock), at least FLOOR_MIN of them: on a lossy
    link each lost packet costs a retransmission (200 ms or more), and 200 round trips there ate
    the whole lead, so the clients began after the trial's end."""
    times: list[int] = []
    while len(times) < samples and (until_ns is None or len(times) < FLOOR_MIN
                                    or time.time_ns() < until_ns):
        t0 = time.perf_counter_ns()
        round_trip()
        times.append(time.perf_counter_ns() - t0)
    return times


def floor_deadline_ns(spec: TrialSpec) -> int:
    """Half of the time left before the start instant (this host's clock): the rest is the
    clients' set-up."""
    now = time.time_ns()
    return now + max(0, spec.start_ns + spec.clock_offset_ns - now) // 2


def cache_floor_ns(kind: CacheServer, url: str, cache: Commands,
                   until_ns: int | None = None) -> list[int]:
    """The floor on the trial's cache: Redis through the clients' own path, memcached by a
    meta get on a connection of its own."""
    if kind is CacheServer.REDIS:
        return measure_floor_ns(lambda: cache.get("stampede:floor"), until_ns=until_ns)
    memcache = Memcache(url)
    try:
        return measure_floor_ns(memcache.touch_floor, until_ns=until_ns)
    finally:
        memcache.close()


def trial_cache(spec: TrialSpec, services: Services) -> tuple[CacheServer, str, Commands]:
    """The trial's cache: its kind (the strategy's), URL, and the Redis commands of the client
    threads (none for a strategy on memcached: it brings its own client)."""
    kind = spec.strategy_spec().cache_server
    url = services.cache_url_for(kind)
    if url is None:
        raise RuntimeError(f"{spec.strategy} needs a {kind.value} cache; this worker has none "
                           f"(STAMPEDE_CACHE_URL / STAMPEDE_MEMCACHE_URL)")
    if kind is not CacheServer.REDIS:
        return kind, url, NoCommands(f"{spec.strategy} keeps its values on {kind.value}")
    path = RedisPath(spec.redis_client)  # each client thread's own connection unless ``pooled``
    return kind, url, redis_commands(path, url, spec.clients, spec.redis_max_connections)


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


def run_trial(spec: TrialSpec, services: Services) -> TrialResult:
    """Run the spec's clients on this host; their rows leave for the trial's stream on the
    broker while they run (worker.shipper); return what was sent and the worker's own stats."""
    kind, cache_url, cache = trial_cache(spec, services)
    locks = redis_commands(RedisPath(spec.redis_client), services.lock_url, spec.clients,
                           spec.redis_max_connections)
    pool = origin_pool(services.origin_dsn, spec.workload_spec().origin, spec.pool_size)
    broker = redis.Redis.from_url(services.broker_url, socket_timeout=5, socket_connect_timeout=5)
    shipper = Shipper(broker, transport.rows_key(spec.run_id, spec.trial), spec.worker_index,
                      spec.progress_interval_s, fold=metrics.COLLECTOR.folder(spec))
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
        broker.close()
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
        release_late_ns=(shipped.first_start_ns or time.time_ns()) - target,
        floor_p5_ns=sorted(floor)[len(floor) // 20],
        floor_median_ns=int(statistics.median(floor)),
        cpu_share=load.cpu_share,
        loop_lag_p99_ns=load.lag_p99_ns,
        loop_lag_max_ns=load.lag_max_ns,
        loop_lag_samples=load.samples,
    )


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

    def bind(self, built: Built, client: int) -> None:
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
    """Wait for the clients, bounded: a stuck client fails the trial."""
    left_s = (spec.end_ns + spec.clock_offset_ns - time.time_ns()) / 1e9
    deadline = time.monotonic() + max(left_s, 0) + JOIN_GRACE_S
    while (thread := group.running()) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"client threads still running {JOIN_GRACE_S}s after the trial end")
        thread.join(timeout=0.5)
    if group.failures:
        raise RuntimeError(f"{len(group.failures)} client threads crashed") from group.failures[0]
