"""The app processes of a run (model.apptier's contract): waited for as workers are, each trial
published before its clients start and finished once they are done.

A process is alive while its beat key is fresh (its beater refreshes the key's TTL every 0.25 s):
read from the key's remaining TTL, so no clock of another host is involved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from model import apptier
from model.apptier import AppTrialSpec
from model.wire import ALIVE_TTL_MS, alive_key

FRESH_MS = 2_000  # a beat at most this old: the process is alive
READY_TIMEOUT_S = 30.0  # building a trial: connections, the origin pool, the strategies


class AppTierError(RuntimeError):
    """The app tier cannot serve the trial (one line: which process, what went wrong)."""


@dataclass(frozen=True)
class AppNode:
    """One app process as it introduced itself (model.apptier.info_key)."""

    node: str
    threads: int
    offset_ns: int  # the broker's clock minus this process's
    uncertainty_ns: int
    kind: str = "wsgi"  # what the process is (model.apptier.APP_KINDS); older ones said nothing

    @classmethod
    def from_info(cls, data: Any) -> AppNode:
        if not isinstance(data, dict) or not all(
                isinstance(data.get(k), int) for k in ("threads", "offset_ns", "uncertainty_ns")):
            raise AppTierError(f"an app process introduced itself badly: {data!r:.200}")
        return cls(str(data.get("node")), data["threads"], data["offset_ns"],
                   data["uncertainty_ns"], str(data.get("kind", "wsgi")))


class AppTier:
    """``wait`` for the processes, then per trial ``publish`` and ``finish``."""

    def __init__(self, broker: redis.Redis, url: str, processes: int) -> None:
        self.broker, self.url, self.processes = broker, url, processes
        self.nodes: list[AppNode] = []

    def alive(self) -> list[AppNode]:
        """The app processes whose beat is fresh, with what they said of themselves."""
        nodes = []
        for key in self.broker.scan_iter(match=alive_key(apptier.APP_NODE_PREFIX + "*"), count=500):
            name = (key.decode() if isinstance(key, bytes) else str(key)).removeprefix(alive_key(""))
            if self.broker.pttl(key) < ALIVE_TTL_MS - FRESH_MS:
                continue
            info = self.broker.get(apptier.info_key(name))
            if info is not None:
                nodes.append(AppNode.from_info(orjson.loads(info)))
        return sorted(nodes, key=lambda n: n.node)

    def wait(self, timeout_s: float, progress: Callable[[str], None],
             exact: bool = False) -> list[AppNode]:
        """At least ``processes`` alive within ``timeout_s`` (else AppTierError); every alive one
        serves (a load balancer sends requests to all of them). ``exact``: just that many (after
        the embedded stack scaled its tier, the ones it stopped must be gone)."""
        deadline = time.monotonic() + timeout_s
        while len(found := self.alive()) < self.processes or (exact and len(found) != self.processes):
            if time.monotonic() > deadline:
                raise AppTierError(f"{len(found)} of {self.processes} app processes answered in "
                                   f"{timeout_s:g} s at {self.url} (is the app tier running, on "
                                   "this broker?)")
            progress(f"app tier: {len(found)}/{self.processes} processes")
            time.sleep(0.25)
        self.nodes = found
        return found

    def offsets(self, coordinator: dict[str, int]) -> dict[str, dict[str, int]]:
        """Each process's clock minus the coordinator's, through the broker's clock; the
        uncertainty is both measurements' (``coordinator``: the broker's minus the coordinator's)."""
        return {n.node: {"offset_ns": coordinator["offset_ns"] - n.offset_ns,
                         "uncertainty_ns": coordinator["uncertainty_ns"] + n.uncertainty_ns}
                for n in self.nodes}

    def publish(self, spec: AppTrialSpec, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Publish the trial and wait until every sender built it; AppTierError with the first
        process's error line, or naming those that did not answer."""
        run_id, number = spec.trial.run_id, spec.trial.trial
        ttl = apptier.KEY_TTL_MS
        self.broker.set(apptier.spec_key(run_id, number), orjson.dumps(spec.to_json()), px=ttl)
        self.broker.delete(apptier.ready_key(run_id, number), apptier.finish_key(run_id, number))
        self.broker.set(apptier.CURRENT_KEY, apptier.current_value(run_id, number), px=ttl)
        deadline = time.monotonic() + timeout_s
        while True:
            answers = self._answers(run_id, number)
            for node, answer in answers.items():
                if not answer.get("ok"):
                    raise AppTierError(f"app process {node}: {answer.get('error')}")
            waiting = sorted(set(spec.senders) - set(answers))
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise AppTierError(f"app processes {', '.join(waiting)} did not build trial "
                                   f"{number} within {timeout_s:g} s")
            time.sleep(0.05)

    def versions(self, spec: AppTrialSpec) -> dict[str, dict[str, str]]:
        """Each sender's plug-in versions as it reported them when it built the trial."""
        answers = self._answers(spec.trial.run_id, spec.trial.trial)
        return {node: dict(a.get("plugins") or {}) for node, a in answers.items()}

    def _answers(self, run_id: str, number: int) -> dict[str, dict[str, Any]]:
        raw = self.broker.hgetall(apptier.ready_key(run_id, number))
        return {(k.decode() if isinstance(k, bytes) else str(k)): orjson.loads(v)
                for k, v in raw.items()}

    def finish(self, run_id: str, number: int) -> None:
        """The trial's clients are done: each process ships the rest of its rows and its end."""
        self.broker.set(apptier.finish_key(run_id, number), b"1", px=apptier.KEY_TTL_MS)

    def senders(self, workers: int) -> dict[str, int]:
        return apptier.senders_after(workers, [n.node for n in self.nodes])


def check_versions(reported: dict[str, dict[str, str]], want: dict[str, str],
                   nodes: Sequence[str]) -> None:
    """Every app process has the coordinator's plug-in versions (as every worker must)."""
    for node in nodes:
        have = reported.get(node, {})
        for name, version in want.items():
            if have.get(name) != version:
                raise AppTierError(f"app process {node} has {name} {have.get(name) or 'missing'}, "
                                   f"the coordinator {version}: every app process must load the "
                                   "same plug-ins")
