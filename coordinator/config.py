"""The validated options of one ``coordinator launch``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coordinator import defaults
from coordinator.blackbox.settings import BlackBox
from coordinator.defaults import Timing
from coordinator.faults.spec import Fault
from coordinator.origin.user import Counter, KeySource
from coordinator.trials.liveness import LossPolicy
from coordinator.trials.plan import ExpiryMode, Schedule
from model.http.target import HttpTarget
from model.services import ClientDriver, RedisPath, Services
from model.workload import KeySet, Query, Workload, single
from strategies import StrategySpec
from strategies.base import CacheServer


@dataclass(frozen=True)
class AppTierSettings:
    """``--app-servers`` and what goes with it: the app tier hosting the strategies behind HTTP
    (0 processes: none, the strategies run in the client threads as in the seeds)."""

    counts: tuple[int, ...] = ()  # app processes, per group of trials (--app-servers 1,2,4)
    threads: int = defaults.APP_THREADS
    kind: str = "wsgi"  # --app-kind: wsgi (granian's threads) | asgi (uvicorn's event loop)
    url: str = ""  # remote: the tier's front door (load-balanced); "": the embedded stack's
    fronts: tuple[tuple[str, str], ...] = ()  # remote: (nginx|varnish, URL) of the HTTP caches

    @property
    def on(self) -> bool:
        return any(self.counts)

    @property
    def processes(self) -> int:
        """The processes the tier starts with (the first group's)."""
        return self.counts[0] if self.counts else 0

    def front_url(self, name: str) -> str:
        return dict(self.fronts).get(name, "")


@dataclass(frozen=True)
class HttpSettings:
    """How the run's HTTP clients send their GETs (``--http-header``, ``--http-connect-ms``,
    ``--http-read-ms``, ``--http-insecure``): what an app tier, an HTTP cache or a black-box
    service is reached with, made into each HTTP trial's target by ``target``."""

    headers: tuple[tuple[str, str], ...] = ()
    connect_ms: float = 1000.0
    read_ms: float = 5000.0
    verify: bool = True  # https: check the server's certificate (--http-insecure: off)

    def target(self, url_template: str, floor_path: str | None = None) -> HttpTarget:
        """The HTTP trial's target at ``url_template`` (``{key}`` once); ValueError if bad."""
        return HttpTarget.parse(url_template, self.headers, self.connect_ms, self.read_ms,
                                floor_path=floor_path, verify=self.verify)


@dataclass(frozen=True)
class LaunchConfig:
    workers: int
    clients: int
    strategies: tuple[StrategySpec, ...]
    ttl_s: float
    seconds: float
    repeat: int
    out: Path
    services: Services | None = None  # None: start the embedded stack
    # Services given by URL beside the embedded stack (its empty fields are started; None: none)
    given: Services | None = None
    scale: int = defaults.SCALE
    pool_size: int = defaults.POOL_SIZE
    origin_target_ms: float = defaults.ORIGIN_TARGET_MS
    seed: bool = True  # seed and calibrate the origin (always on the embedded stack)
    force_clock: bool = False  # run even when clock offsets are too uncertain for the TTL
    keys: tuple[str, ...] = (defaults.HOT_KEY,)
    timing: Timing = field(default_factory=Timing)
    faults: tuple[Fault, ...] = ()  # --fault: injected in every trial (embedded stack only)
    net_control: str | None = None  # --net-control HOST:PORT: the namespace lab's links (net: faults)
    expiry: ExpiryMode = ExpiryMode.DRIFT
    on_worker_loss: LossPolicy = LossPolicy.CONTINUE  # a lost worker: go on with the survivors
    redis_client: RedisPath = RedisPath.LEAN  # how client threads reach cache and lock store
    client_driver: ClientDriver = ClientDriver.THREADS  # threads or asyncio coroutines
    workload: Workload = field(
        default_factory=lambda: Workload(single(Query.ORDERS, KeySet(), round(defaults.TTL_S * 1000))))
    key_source: KeySource = field(default_factory=KeySource)  # the user's keys, read at the start
    counter: Counter = field(default_factory=Counter)  # an HTTP origin's own counter of calls
    plugins: tuple[str, ...] = ()  # --plugin modules: imported here and in every worker
    app: AppTierSettings = field(default_factory=AppTierSettings)  # --app-servers ...
    http: HttpSettings = field(default_factory=HttpSettings)  # the HTTP clients' options
    # Every trial of the run an HTTP trial against this target, its strategy column the target's
    # URL template, the cache not primed for it (the benchmarks, the tests, --service-url).
    # None: the strategy in the clients.
    http_target: HttpTarget | None = None
    # --service-url (issue 33): the user's running service as a black box; with it http_target
    # is its URL template and the origin calls are sampled (coordinator.blackbox). None: none.
    service: BlackBox | None = None
    # Provenance, for run.json's manifest: the preset that filled the options, the command line
    # as typed (credentials masked), the run this one repeats (``coordinator rerun``).
    preset: str | None = None
    command: tuple[str, ...] = ()
    rerun_of: str | None = None

    @property
    def embedded(self) -> bool:
        return self.services is None

    @property
    def started_postgres(self) -> bool:
        """The embedded stack starts a PostgreSQL: none given, and the origin is not HTTP."""
        given = self.given.origin_dsn if self.given else ""
        return self.embedded and not given and self.workload.origin.kind.value not in ("http",
                                                                                      "service")

    @property
    def cache_servers(self) -> frozenset[CacheServer]:
        """The kinds of cache the run's strategies keep their values on."""
        return frozenset(s.cache_server for s in self.strategies)

    def schedule(self) -> Schedule:
        return Schedule(self.workers, self.clients, self.ttl_s, self.seconds,
                        self.timing.warmup_s, self.keys)
