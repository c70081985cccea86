"""An HTTP cache the embedded stack runs, as a trial uses it (coordinator.app_tier's
``FrontDoor``): started at the first trial that names it, reloaded with each next one's
parameters (and an empty cache), the configuration verified live; its own counters
(``varnishstat``; nginx's stub_status) read before and after each trial into commands.parquet
beside the Redis servers' commandstats."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from coordinator.stack.http_caches.counters import NGINX_COUNTERS, VARNISH_COUNTERS
from coordinator.stack.processes import ManagedProcess
from strategies import StrategySpec
from strategies.fronts import FrontParams
from strategies.registry import strategy_class


def params_of(strategy: StrategySpec) -> FrontParams:
    params: FrontParams = strategy_class(strategy.name).Params(**strategy.params)
    return params


class Front(Protocol):
    """What coordinator.stack.http_caches's NginxFront and VarnishFront offer."""

    process: ManagedProcess | None

    @property
    def url(self) -> str: ...

    def start(self, params: Any, upstreams: Sequence[str]) -> None: ...

    def apply(self, params: Any) -> None: ...

    def counters(self) -> dict[str, int]: ...

    def stop(self) -> None: ...


class EmbeddedFront:
    """A front the embedded stack runs (the module docstring)."""

    def __init__(self, front: Front, upstream: str) -> None:
        self.front, self.upstream = front, upstream

    def open(self, strategy: StrategySpec) -> str:
        params = params_of(strategy)
        if self.front.process is None:
            self.front.start(params, [self.upstream])
        else:
            self.front.apply(params)
        return self.front.url

    def counters(self) -> dict[str, int]:
        """Its counters (not its gauges), read now."""
        found = self.front.counters()
        return {k: v for k, v in found.items() if k in (*VARNISH_COUNTERS, *NGINX_COUNTERS)}

    def stop(self) -> None:
        self.front.stop()
