"""No defence: every client that misses goes to the origin. The baseline herd."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from strategies.base import Deps, Outcome, Probe
from strategies.registry import register


@register
class Naive:
    name: ClassVar[str] = "naive"

    @dataclass(frozen=True)
    class Params:
        pass

    def __init__(self, deps: Deps, params: Params) -> None:
        self._deps = deps

    def fetch(self, key: str, probe: Probe) -> Outcome:
        cache = self._deps.cache
        if cache.get(key) is not None:
            return Outcome.HIT
        value = self._deps.loader.load(key, probe)
        cache.set(key, value, px=self._deps.ttl_ms)
        return Outcome.FILLED

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        self._deps.cache.set(key, value, pxat=expire_at_ms)
