"""No defence: every client that misses goes to the origin. The baseline herd.

Its logic is ``strategies.core.cacheaside.NaiveCore``; this class runs it on the threaded
driver (``strategies.drivers.sync``).
"""

from __future__ import annotations

from typing import ClassVar

from strategies import version
from strategies.base import Deps
from strategies.core.cacheaside import NaiveCore
from strategies.drivers.sync import Driven, SyncDriver, clock_of
from strategies.params import CommonParams, Ttl
from strategies.registry import register


@register
class Naive(Driven, version.CacheAside):
    name: ClassVar[str] = "naive"
    Params = CommonParams

    def __init__(self, deps: Deps, params: CommonParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self.core = NaiveCore(self._ttl, clock_of(deps))
        self.driver = SyncDriver(deps)
        self._on_write_from(params)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        self._deps.cache.set(key, value, pxat=expire_at_ms)
