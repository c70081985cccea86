"""cashews 7's own expiries: ``@cache.early(ttl, early_ttl)`` and ``@cache.soft(ttl, soft_ttl)``.

Both store ``[expire_at, value]`` (a UTC ``datetime`` the library decides, ``early_ttl`` or
``soft_ttl`` after the fill, default 0.33 x ttl) under a key Redis keeps for the whole ``ttl``.

- ``early``: past ``expire_at`` the caller that wins ``SET key:lock NX`` (EX ``early_ttl``)
  starts the refresh in a background task (``background=True``, its default) and every caller,
  the winner too, gets the old value at once. The refresh is a load of its own (a refresh row,
  ``refresh_of_ns`` = the replaced value's ``expire_at``). A fixed early point, not XFetch; with
  no value at all every caller (per process, with ``protected``) loads in the foreground.
- ``soft``: past ``expire_at`` every caller recomputes in the foreground, with no lock; the old
  value is served only when the recompute raises one of ``exceptions`` (here any).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from adapters.aio.base import AsyncDeps
from adapters.aio.cashews_cache import CashewsStrategy, Origin, _until_s
from adapters.aio.seen import Read, Request
from strategies.base import HIT, Outcome, Probe

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _expire_at_ns(read: Read) -> int:
    """The stored ``expire_at`` in ns since the epoch (exact: no float on the way)."""
    expire_at: datetime = read.value[0]  # type: ignore[index]
    return (expire_at - _EPOCH) // timedelta(microseconds=1) * 1000


def _check(name: str, value: float) -> None:
    if value != -1 and not value > 0:
        raise ValueError(f"{name} must be > 0, or -1 for the library's default (0.33 x ttl)")


class _Enveloped(CashewsStrategy):
    """A value stored with the library's own expiry point."""

    def __init__(self, deps: AsyncDeps, early_s: float) -> None:
        super().__init__(deps)
        self._early_s = early_s if early_s != -1 else self._ttl_s * 0.33

    def _payload(self, stored: Any) -> bytes:
        return bytes(stored[1])

    def _refresh_of_ns(self, read: Read) -> int:
        return _expire_at_ns(read) if read.found else 0

    def _read_outcome(self, read: Read, probe: Probe) -> Outcome:
        late_ns = read.at_ns - _expire_at_ns(read)
        if late_ns > 0:
            probe.stale_age_ns = late_ns
            return Outcome.STALE
        return HIT

    async def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        """Stored as the decorator stores it, filled ``early_ttl`` (or ``soft_ttl``) before its
        expiry point ``expire_at_ms``; Redis keeps it for the rest of the ``ttl``."""
        expire_at = datetime.fromtimestamp(expire_at_ms / 1000, UTC)
        left_s = _until_s(expire_at_ms) + self._ttl_s - self._early_s
        await self.cache.set(self.cache_key(key), [expire_at, value], expire=max(left_s, 0.001))


@dataclass(frozen=True)
class CashewsEarlyParams:
    early_ttl: float = -1.0  # s after a fill when it refreshes early; -1: None, 0.33 x ttl
    protected: bool = True

    def __post_init__(self) -> None:
        _check("early_ttl", self.early_ttl)


class CashewsEarly(_Enveloped):
    name: ClassVar[str] = "cashews-early"
    Params = CashewsEarlyParams
    prefix: ClassVar[str] = "early:v2"

    def __init__(self, deps: AsyncDeps, params: CashewsEarlyParams) -> None:
        self._params = params
        super().__init__(deps, params.early_ttl)

    def _decorate(self, origin: Origin) -> Origin:
        p = self._params
        early_ttl = None if p.early_ttl == -1 else p.early_ttl
        wrapped: Origin = self.cache.early(ttl=self._ttl_s, key="{key}", early_ttl=early_ttl,
                                           protected=p.protected)(origin)
        return wrapped

    def _refresh(self, request: Request) -> bool:
        """A load after a read that found a value is the background refresh."""
        return bool(request.reads and request.reads[-1].found)


@dataclass(frozen=True)
class CashewsSoftParams:
    soft_ttl: float = -1.0  # s after a fill when callers recompute; -1: None, 0.33 x ttl
    protected: bool = True

    def __post_init__(self) -> None:
        _check("soft_ttl", self.soft_ttl)


class CashewsSoft(_Enveloped):
    name: ClassVar[str] = "cashews-soft"
    Params = CashewsSoftParams
    prefix: ClassVar[str] = "soft"

    def __init__(self, deps: AsyncDeps, params: CashewsSoftParams) -> None:
        self._params = params
        super().__init__(deps, params.soft_ttl)

    def _decorate(self, origin: Origin) -> Origin:
        p = self._params
        soft_ttl = None if p.soft_ttl == -1 else p.soft_ttl
        wrapped: Origin = self.cache.soft(ttl=self._ttl_s, key="{key}", soft_ttl=soft_ttl,
                                          protected=p.protected)(origin)
        return wrapped
