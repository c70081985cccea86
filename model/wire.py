"""The wire contract between coordinator and worker: task names, the Celery settings both sides
use (JSON only), the trial request (``TrialSpec``) and the worker's reply (``TrialResult``).

Both directions are validated: a task message is input from the network, and so is a reply."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

import strategies
from model.http.target import HttpTarget
from model.services import ClientDriver, RedisPath
from model.workload import InvalidWorkload, KeySet, Query, Workload, single
from strategies import StrategySpec
from strategies.plugins import PluginError, load_all

RUN_TRIAL = "stampede.run_trial"
CLOCK = "stampede.clock"
BASELINE = "stampede.baseline"
HOST_FACTS = "stampede.host_facts"  # the worker host's cores, memory, kernel (model.hostfacts)
PLUGINS = "stampede.plugins"  # the worker imports the run's plug-ins, reports their versions
# The key of the heartbeat number in the liveness readings (coordinator.trials.liveness): a new
# number is a sign of life, its absence for --worker-silence a lost worker.
BEAT = "beat"
ALIVE_TTL_MS = 60_000  # each beat sets its key to live this long: a beat number outlives any silence limit


def alive_key(node: str) -> str:
    """Where a worker's beater (worker.heartbeat, a process of its own) sets its beat number,
    on the broker's Redis: ``"<number> <wall clock ns>"``, then what its clients sent in the
    current trial, ``" <the trial's start instant, ns> <requests> <ns since that instant>"``."""
    return f"stampede:alive:{node}"


def beat_sent(beat: object, trial_start_ns: int) -> tuple[int, int] | None:
    """(requests sent, ns since the start instant) a beat carries for the trial starting at
    ``trial_start_ns`` (one trial of one run: trial numbers repeat across runs); None when it
    carries none for it (a beat between trials, or from a worker older than issue 31)."""
    text = beat.decode() if isinstance(beat, bytes) else beat
    parts = text.split() if isinstance(text, str) else []
    try:
        if len(parts) == 5 and int(parts[2]) == trial_start_ns and int(parts[4]) > 0:
            return int(parts[3]), int(parts[4])
    except ValueError:  # a beat is input from the network: a garbled one shows no rate
        return None
    return None


# Settings of the Celery app on both sides: JSON only, no other serializer accepted.
CELERY_SETTINGS: dict[str, Any] = {
    "task_serializer": "json",
    "result_serializer": "json",
    "accept_content": ["json"],
    "result_accept_content": ["json"],
    # Each task is sent to one named worker's own queue, so N tasks land on N workers.
    "worker_direct": True,
    "worker_prefetch_multiplier": 1,
    "task_acks_late": False,
    "result_expires": 3600,
    "broker_connection_retry_on_startup": True,
    "worker_hijack_root_logger": False,
    "task_track_started": True,
}
_RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,80}$")
HOUR_NS = 3600 * 10**9


class InvalidTaskArguments(ValueError):
    """A task message that does not describe a valid trial; the worker rejects it."""


class InvalidResult(ValueError):
    """A worker's reply that is not a valid ``TrialResult``; the coordinator rejects it."""


@dataclass(frozen=True)
class TrialSpec:
    run_id: str
    trial: int
    repeat: int
    strategy: str
    params: dict[str, Any]
    worker_index: int
    client_base: int
    clients: int
    keys: list[str]
    ttl_ms: int
    start_ns: int
    end_ns: int
    clock_offset_ns: int  # this worker's clock minus the coordinator's
    pool_size: int
    origin_span_s: float
    progress_interval_s: float = 0.5  # how often its rows leave for the trial's stream
    redis_max_connections: int | None = None  # per client pool; None = clients + 4
    redis_client: str = RedisPath.LEAN.value  # --redis-client: lean (own connections) or pooled
    # Fields with defaults may be absent: the one-hot-key closed loop with drifting expiries.
    workload: dict[str, Any] = field(default_factory=dict)
    stage_start_ns: int = 0  # where stage 0 begins (the window start); 0: at start_ns
    workers: int = 1  # workers in the trial: an open loop's total rate is split over them
    products: int = 0  # rows in the products table (endpoints of experiment 003)
    expiry_grid_ns: int = 0  # --expiry aligned: the first scheduled expiry (coordinator clock); 0: drift
    plugins: list[str] = field(default_factory=list)  # --plugin modules, imported before the check
    # An HTTP trial (issue 32): the client threads GET this target (an HttpTarget's JSON) instead
    # of running the strategy themselves; None: the strategy in the client thread, as always.
    http: dict[str, Any] | None = None
    # --client-driver: threads (a thread per client) or asyncio (coroutines in one event loop
    # per worker process, worker.aio.trial); absent: threads, as before.
    client_driver: str = ClientDriver.THREADS.value

    @classmethod
    def from_json(cls, data: object) -> TrialSpec:
        if not isinstance(data, Mapping):
            raise InvalidTaskArguments(f"trial spec must be an object, got {type(data).__name__}")
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise InvalidTaskArguments(f"unknown fields: {', '.join(sorted(unknown))}")
        required = {f.name for f in fields(cls)
                    if f.default is MISSING and f.default_factory is MISSING}
        missing = required - set(data)
        if missing:
            raise InvalidTaskArguments(f"missing fields: {', '.join(sorted(missing))}")
        spec = cls(**{f.name: _take(data, f.name) for f in fields(cls) if f.name in data})
        try:  # the strategy may be a plug-in's: imported first (once per process)
            load_all(spec.plugins)
        except PluginError as exc:
            raise InvalidTaskArguments(str(exc)) from None
        spec.check()
        return spec

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def workload_spec(self) -> Workload:
        """The trial's workload; none given: the hot key of ``keys`` in a closed loop."""
        if not self.workload:
            return Workload(single(Query.ORDERS, KeySet(), self.ttl_ms))
        try:
            return Workload.from_json(self.workload)
        except InvalidWorkload as exc:
            raise InvalidTaskArguments(f"workload: {exc}") from None

    def http_target(self) -> HttpTarget | None:
        """The HTTP trial's target, validated (None: not an HTTP trial)."""
        if self.http is None:
            return None
        try:
            return HttpTarget.from_json(self.http)
        except ValueError as exc:
            raise InvalidTaskArguments(f"http: {exc}") from None

    def strategy_spec(self) -> StrategySpec:
        try:
            return strategies.from_mapping(self.strategy, self.params)
        except strategies.InvalidStrategy as exc:
            raise InvalidTaskArguments(str(exc)) from None

    def check(self) -> None:
        """Raise InvalidTaskArguments naming the first field that is out of range."""
        if not _RUN_ID.match(self.run_id):
            raise InvalidTaskArguments(f"run_id {self.run_id!r} is not [A-Za-z0-9._-]{{1,80}}")
        _in_range("trial", self.trial, 0, 10**6)
        _in_range("repeat", self.repeat, 1, 10**4)
        _in_range("worker_index", self.worker_index, 0, 10**4)
        _in_range("client_base", self.client_base, 0, 10**7)
        _in_range("clients", self.clients, 1, 10**4)
        _in_range("ttl_ms", self.ttl_ms, 1, 24 * 3600 * 1000)
        _in_range("pool_size", self.pool_size, 1, 1000)
        _in_range("end_ns - start_ns", self.end_ns - self.start_ns, 1, HOUR_NS)
        _in_range("origin_span_s", self.origin_span_s, 1e-3, 365 * 86400)
        _in_range("progress_interval_s", self.progress_interval_s, 0.01, 60)
        if self.redis_max_connections is not None:
            _in_range("redis_max_connections", self.redis_max_connections, 1, 100_000)
        if self.redis_client not in {p.value for p in RedisPath}:
            raise InvalidTaskArguments(f"redis_client {self.redis_client!r} is not one of "
                                       f"{'|'.join(p.value for p in RedisPath)}")
        _in_range("workers", self.workers, 1, 10**4)
        _in_range("products", self.products, 0, 10**10)
        if self.expiry_grid_ns:
            _in_range("expiry_grid_ns - start_ns", self.expiry_grid_ns - self.start_ns, 0, HOUR_NS)
        if self.stage_start_ns:
            _in_range("stage_start_ns - start_ns", self.stage_start_ns - self.start_ns, 0, HOUR_NS)
        self._check_http(self.workload_spec())
        self._check_driver(self.workload_spec())
        if not self.keys or len(self.keys) > 10**6:
            raise InvalidTaskArguments("keys must hold 1 to 1,000,000 names")
        if not all(isinstance(k, str) and 0 < len(k) <= 200 for k in self.keys):
            raise InvalidTaskArguments("keys must be strings of 1 to 200 characters")
        self.strategy_spec()


    def _check_driver(self, workload: Workload) -> None:
        """The asyncio driver runs ported strategies only, in clients of their own (no origin
        writer), or an HTTP trial's GETs; one line naming what it cannot run."""
        if self.client_driver not in {d.value for d in ClientDriver}:
            raise InvalidTaskArguments(f"client_driver {self.client_driver!r} is not one of "
                                       f"{'|'.join(d.value for d in ClientDriver)}")
        if self.client_driver != ClientDriver.ASYNCIO.value:
            return
        if self.http is not None:  # the strategy runs behind the target, not in the clients
            return
        if workload.invalidate_rate > 0:
            raise InvalidTaskArguments("client_driver asyncio: no origin writer "
                                       "(--invalidate-rate) on the asyncio driver")
        from strategies.drivers.aio import for_asyncio  # noqa: PLC0415 - redis.asyncio: only here

        try:
            for_asyncio(self.strategy_spec(), self.ttl_ms)
        except strategies.InvalidStrategy as exc:
            raise InvalidTaskArguments(f"client_driver asyncio: {exc}") from None

    def _check_http(self, workload: Workload) -> None:
        """An HTTP trial has no origin on the worker: nothing may go to it straight."""
        if self.http_target() is None:
            return
        if any(workload.bypass_at(s) > 0 for s in range(workload.stages)):
            raise InvalidTaskArguments("http: an HTTP trial cannot bypass the cache (--bypass): "
                                       "the worker opens no origin pool for it")
        if workload.invalidate_rate > 0:
            raise InvalidTaskArguments("http: an HTTP trial has no origin writer "
                                       "(--invalidate-rate)")


_NULLABLE = frozenset({"redis_max_connections", "http"})
_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "strategy": (str,),
    "redis_client": (str,),
    "client_driver": (str,),
    "params": (dict,),
    "keys": (list,),
    "workload": (dict,),
    "plugins": (list,),
    "http": (dict,),
    "origin_span_s": (int, float),
    "progress_interval_s": (int, float),
}


def _take(data: Mapping[str, Any], name: str) -> Any:
    value = data[name]
    if value is None and name in _NULLABLE:
        return None
    allowed = _TYPES.get(name, (int,))
    if isinstance(value, bool) or not isinstance(value, allowed):
        kinds = " or ".join(t.__name__ for t in allowed)
        raise InvalidTaskArguments(f"{name} must be {kinds}, got {type(value).__name__}")
    return value


def _in_range(name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise InvalidTaskArguments(f"{name}={value} is outside [{low}, {high}]")


_RESULT_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}


@dataclass(frozen=True)
class TrialResult:
    """One worker's reply: what it sent of its rows (the rows themselves went to the trial's
    stream on the broker as the trial ran) and what it measured of itself."""

    worker: str  # host:pid
    worker_index: int
    batches: int  # row batches it sent to the trial's stream (worker.shipper), numbered from 0
    requests: int  # rows in them
    origin_calls: int  # origin calls in them
    dropped_rows: int  # rows it could not send (the coordinator fell behind): counted, not sent
    dropped_calls: int  # origin calls among those
    client_ships: int  # times a client shipped the rows itself, its buffer full (worker.shipper)
    client_wait_s: float  # how long those clients waited to ship, in all
    release_late_ns: int  # first request after the common start instant (this host's clock)
    floor_p5_ns: int  # cache round trip, 5th percentile of sequential GETs: the physical floor
    floor_median_ns: int
    cpu_share: float  # the worker process's CPU time / wall time while its clients ran
    loop_lag_p99_ns: int  # a 10 ms sampler's lateness: clients waiting to run
    loop_lag_max_ns: int
    loop_lag_samples: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> TrialResult:
        if not isinstance(data, Mapping):
            raise InvalidResult(f"trial result must be an object, got {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        missing = set(names) - set(data)
        if missing:
            raise InvalidResult(f"trial result lacks {', '.join(sorted(missing))}")
        values = {name: data[name] for name in names}
        for f in fields(cls):
            kind = _RESULT_TYPES[str(f.type)]
            if isinstance(values[f.name], bool) or not isinstance(values[f.name], kind):
                raise InvalidResult(f"trial result field {f.name} must be {f.type}")
        return cls(**values)
