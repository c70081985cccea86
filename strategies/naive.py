"""No defence: every client that misses goes to the origin. The baseline herd."""

from __future__ import annotations

from typing import ClassVar

from strategies.base import Deps, Outcome, Probe
from strategies.params import CommonParams, Ttl
from strategies.registry import register


@register
class Naive:
    name: ClassVar[str] = "naive"
    Params = CommonParams

    def __init__(self, deps: Deps, params: CommonParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        cache = self._deps.cache
        if cache.get(key) is not None:
            return Outcome.HIT
        value = self._deps.loader.load(key, probe)
        expiry = self._ttl.draw()
        cache.set(key, value, px=expiry.px, pxat=expiry.pxat)
        return Outcome.FILLED

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        self._deps.cache.set(key, value, pxat=expire_at_ms)
