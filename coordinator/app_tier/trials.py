"""One trial through the app tier, from the coordinator's side: published to the app processes
before the clients start, the clients pointed at the tier (or at the HTTP cache in front), the
HTTP cache primed through its own front door, the processes finished when the clients are done.

The trial's rows come from two kinds of sender on the same stream: the workers (one row per
client request) and the app processes (one row per origin call, op ``app``); the gatherer
treats both alike, each under its own number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import urllib3

from coordinator.app_tier.tier import AppTier, check_versions
from model import apptier
from model.apptier import AppTrialSpec, Header, broker_offset
from model.http.target import HttpTarget
from model.wire import TrialSpec
from strategies import StrategySpec
from strategies.fronts import is_front

PRIME_TIMEOUT_S = 10.0


class PrimeFailed(RuntimeError):
    """The HTTP cache in front could not be primed (a key's answer was not a 200)."""


@dataclass(frozen=True)
class Front:
    """Where the clients of a trial send their requests: the tier, or an HTTP cache before it."""

    url: str  # http://HOST:PORT
    name: str = ""  # "": the app tier itself; nginx | varnish


class TierTrial:
    """The app tier's part of one trial (TrialRunner calls these in this order)."""

    def __init__(self, tier: AppTier, strategy: StrategySpec, front: Front,
                 versions: Mapping[str, str], threads: int, make_target: MakeTarget) -> None:
        self.tier, self.strategy, self.front = tier, strategy, front
        self._versions, self._threads, self._make = dict(versions), threads, make_target
        self.spec: AppTrialSpec | None = None
        self.door: FrontDoor | None = None  # the HTTP cache in front, when there is one

    @property
    def senders(self) -> dict[str, int]:
        return self.spec.senders if self.spec else {}

    def publish(self, worker_spec: TrialSpec, workers: int) -> None:
        """The trial to every app process (the spec the workers get, sized for the process's
        threads); back once each built it, with the run's plug-in versions checked."""
        spec_json = {**worker_spec.to_json(), "clients": self._threads, "worker_index": 0,
                     "client_base": 0, "clock_offset_ns": 0}
        spec_json.pop("http", None)  # the app processes serve the trial; they send no HTTP
        spec = AppTrialSpec(TrialSpec.from_json(spec_json), self.tier.senders(workers),
                            front=self.front.name, threads=self._threads,
                            extra={"versions": sorted(self._versions)})
        self.tier.publish(spec)
        check_versions(self.tier.versions(spec), self._versions, list(spec.senders))
        self.spec = spec

    def target(self, run_id: str, trial: int) -> HttpTarget:
        """The clients' HTTP target: the trial's path on the tier or the HTTP cache in front,
        the floor measured on the same front door."""
        return self._make(self.front.url + apptier.trial_path(run_id, trial) + "{key}",
                          apptier.FLOOR_PATH)

    def prime(self, run_id: str, trial: int, keys: Sequence[str]) -> None:
        """Through an HTTP cache in front: one request per key fills its entry (the app serves
        it from the origin with the trial's ``max-age``, and records no row: priming's calls
        come before the trial's count, as every strategy's priming does)."""
        if not self.front.name:
            return
        base = self.front.url + apptier.trial_path(run_id, trial)
        http = urllib3.PoolManager(retries=False, timeout=PRIME_TIMEOUT_S)
        try:
            for key in keys:
                reply = http.request("GET", base + key, headers={Header.PRIME.value: "1"})
                if reply.status != 200:
                    raise PrimeFailed(f"{self.front.name} answered {reply.status} when priming "
                                      f"{key!r}: {reply.headers.get(Header.ERROR.value, '')}")
        finally:
            http.clear()

    def front_counters(self) -> tuple[str, Callable[[], dict[str, int]]] | None:
        """The HTTP cache's name and its counters, for commands.parquet (None: no cache)."""
        door = self.door
        return (self.front.name, door.counters) if door is not None else None

    def finish(self, run_id: str, trial: int) -> None:
        if self.spec is not None:
            self.tier.finish(run_id, trial)


class FrontDoor(Protocol):
    """An HTTP cache in front of the app tier: set up for a trial's parameters (embedded: its
    configuration applied and verified live; remote: verified), then its URL."""

    def open(self, strategy: StrategySpec) -> str: ...

    def counters(self) -> dict[str, int]: ...


MakeTarget = Callable[[str, str], HttpTarget]  # URL template, floor path -> the clients' target


@dataclass
class TierRun:
    """The run's app tier: its processes, the HTTP caches in front, the clients' HTTP options."""

    tier: AppTier
    threads: int
    make_target: MakeTarget
    versions: Mapping[str, str] = field(default_factory=dict)  # the run's plug-ins
    fronts: Mapping[str, FrontDoor] = field(default_factory=dict)
    scaler: Callable[[int], None] | None = None  # the embedded stack's (--app-servers 1,2,4)

    def rescale(self, processes: int, timeout_s: float, progress: Callable[[str], None]) -> int:
        """From now on ``processes`` app processes (embedded stack); back once just that many
        beat. Returns how many serve (observed, not assumed)."""
        if processes != self.tier.processes:
            if self.scaler is None:
                raise PrimeFailed("this app tier cannot be scaled from here (a deployment's)")
            self.scaler(processes)
            self.tier.processes = processes
            self.tier.wait(timeout_s, progress, exact=True)
        return len(self.tier.nodes)

    def clock_offsets(self) -> dict[str, dict[str, int]]:
        """Each process's clock minus the coordinator's, measured now through the broker's."""
        return self.tier.offsets(broker_offset(self.tier.broker))

    def trial(self, strategy: StrategySpec) -> TierTrial:
        """A trial of ``strategy``: through its HTTP cache when it names one."""
        name = front_of(strategy)
        if name and name not in self.fronts:
            raise PrimeFailed(f"{strategy.label}: no {name} in front of the app tier")
        door = self.fronts[name] if name else None
        url = door.open(strategy) if door is not None else self.tier.url
        tiered = TierTrial(self.tier, strategy, Front(url, name), self.versions, self.threads,
                           self.make_target)
        tiered.door = door
        return tiered


def front_of(strategy: StrategySpec) -> str:
    """The HTTP cache a strategy names ("" for one that runs in the app processes)."""
    return strategy.name if is_front(strategy.name) else ""
