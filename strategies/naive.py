"""No defence: every client that misses goes to the origin. The baseline herd."""

from __future__ import annotations

from typing import ClassVar

from strategies import version
from strategies.base import HIT, Deps, Outcome, Probe
from strategies.params import CommonParams, Ttl
from strategies.registry import register


@register
class Naive(version.CacheAside):
    name: ClassVar[str] = "naive"
    Params = CommonParams

    def __init__(self, deps: Deps, params: CommonParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self._on_write_from(params)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        raw = self._deps.cache.get(key)
        if raw is not None:
            version.served(probe, raw)
            return HIT
        self._fill(key, probe)
        return Outcome.FILLED

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        self._deps.cache.set(key, value, pxat=expire_at_ms)
