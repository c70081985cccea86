"""The run's app tier, before the first trial: its processes waited for (as workers are), their
clocks put beside the coordinator's, and what the trials need of it bundled (``TierRun``)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator.app_tier.tier import AppTier, AppTierError
from coordinator.app_tier.trials import FrontDoor, MakeTarget, TierRun
from coordinator.config import LaunchConfig
from coordinator.connect import redis_from_url
from coordinator.console import Console
from model import apptier
from model.services import Services


@dataclass(frozen=True)
class TierPlace:
    """Where the run's app tier and its HTTP caches are: the embedded stack's, or the
    remote URLs given (``--app-url``, ``--nginx-url``, ``--varnish-url``)."""

    url: str
    fronts: Mapping[str, FrontDoor] = field(default_factory=dict)
    scale: Callable[[int], None] | None = None  # the embedded stack's: N processes from now on


def connect_tier(config: LaunchConfig, services: Services, place: TierPlace,
                 make_target: MakeTarget, versions: Mapping[str, str], console: Console,
                 offsets: dict[str, dict[str, int]]) -> tuple[TierRun, dict[str, Any]]:
    """Wait for the tier's processes; add their clock offsets to ``offsets``; return the run's
    tier and what run.json records of it."""
    broker = redis_from_url(services.broker_url, socket_timeout=5)
    tier = AppTier(broker, place.url, config.app.processes)
    nodes = tier.wait(config.timing.worker_wait_s, console.progress)
    other = [n for n in nodes if n.kind != config.app.kind]
    if other:
        raise AppTierError(f"app process {other[0].node} is a {other[0].kind} app, the run asks "
                           f"for --app-kind {config.app.kind} (every process must be that kind)")
    extra = f" ({len(nodes) - config.app.processes} more than asked: all serve)" \
        if len(nodes) > config.app.processes else ""
    console.say(f"app tier: {len(nodes)} processes answered at {place.url}{extra}")
    run = TierRun(tier, config.app.threads, make_target, versions, place.fronts, place.scale)
    clocks = run.clock_offsets()
    offsets.update(clocks)
    meta = {"url": place.url, "kind": config.app.kind, "processes": [n.node for n in nodes],
            "asked": config.app.processes,
            "threads": {n.node: n.threads for n in nodes}, "clock_offsets": clocks,
            "fronts": sorted(place.fronts)}
    return run, meta


def target_maker(config: LaunchConfig) -> MakeTarget:
    """The clients' HTTP target for a URL template, with the run's HTTP options."""
    return config.http.target


def remote_tier_answers(config: LaunchConfig, services: Services,
                        progress: Callable[[str], None]) -> None:
    """A remote app tier: its URL answers and N of its processes beat on the broker, within
    ``--service-timeout`` (else AppTierError naming what is missing), before anything is written."""
    url = config.app.url
    deadline = time.monotonic() + config.timing.service_wait_s
    while not _answers(url):
        if time.monotonic() > deadline:
            raise AppTierError(f"the app tier at {url} does not answer {apptier.HEALTH_PATH} "
                               f"(--service-timeout {config.timing.service_wait_s:g})")
        progress(f"waiting for the app tier at {url}")
        time.sleep(0.5)
    broker = redis_from_url(services.broker_url, socket_timeout=5)
    try:
        AppTier(broker, url, config.app.processes).wait(
            max(0.0, deadline - time.monotonic()), progress)
    finally:
        broker.close()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + apptier.HEALTH_PATH, timeout=2) as reply:
            return int(reply.status) == 200
    except (OSError, ValueError):
        return False
