"""Remote HTTP caches in front of the app tier, as the trials use them (``FrontDoor``): the
configuration verified, never changed (a deployment's is its own). The embedded stack's are
coordinator.stack.http_caches.door's (configured per trial, an empty cache each time)."""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from coordinator.app_tier.trials import PrimeFailed
from coordinator.stack.http_caches.door import params_of
from strategies import StrategySpec
from strategies.fronts import config_id

CONFIG_PATH = "/stampede/config"


class RemoteFront:
    """A front of a deployment (compose, Kubernetes): its live configuration must be the
    trial's; the coordinator never reconfigures it."""

    def __init__(self, name: str, url: str) -> None:
        self.name, self.url = name, url

    def open(self, strategy: StrategySpec) -> str:
        want = config_id(params_of(strategy))
        live = self.live()
        if live.get("id") != want:
            raise PrimeFailed(f"the {self.name} at {self.url} runs configuration "
                              f"{live.get('id')} ({live.get('params')}), the trial {strategy.label} "
                              f"needs {want}: deploy it with these parameters (docs/http.md)")
        return self.url

    def live(self) -> dict[str, Any]:
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=5)
        try:
            conn.request("GET", CONFIG_PATH)
            reply = conn.getresponse()
            body = reply.read()
            if reply.status != 200:
                raise PrimeFailed(f"the {self.name} at {self.url} answered {reply.status} at "
                                  f"{CONFIG_PATH}")
            answer: dict[str, Any] = orjson.loads(body)
            return answer
        finally:
            conn.close()

    def counters(self) -> dict[str, int]:
        return {}  # a remote front's counters are its own deployment's (Prometheus)


def remote_fronts(given: tuple[tuple[str, str], ...]) -> Mapping[str, RemoteFront]:
    return {name: RemoteFront(name, url) for name, url in given}
