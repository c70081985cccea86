"""The validated options of one ``coordinator launch``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coordinator import defaults
from coordinator.defaults import Timing
from coordinator.faults.spec import Fault
from coordinator.liveness import LossPolicy
from coordinator.origin.user import Counter, KeySource
from coordinator.plan import ExpiryMode, Schedule
from model.services import RedisPath, Services
from model.workload import KeySet, Query, Workload, single
from strategies import StrategySpec
from strategies.base import CacheServer


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
    workload: Workload = field(
        default_factory=lambda: Workload(single(Query.ORDERS, KeySet(), round(defaults.TTL_S * 1000))))
    key_source: KeySource = field(default_factory=KeySource)  # the user's keys, read at the start
    counter: Counter = field(default_factory=Counter)  # an HTTP origin's own counter of calls
    plugins: tuple[str, ...] = ()  # --plugin modules: imported here and in every worker
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
        return self.embedded and not given and self.workload.origin.kind.value != "http"

    @property
    def cache_servers(self) -> frozenset[CacheServer]:
        """The kinds of cache the run's strategies keep their values on."""
        return frozenset(s.cache_server for s in self.strategies)

    def schedule(self) -> Schedule:
        return Schedule(self.workers, self.clients, self.ttl_s, self.seconds,
                        self.timing.warmup_s, self.keys)
