"""Parameters every strategy shares, handled once: TTL jitter, waiting, lock-store and cache-error
policies.

A strategy's ``Params`` subclasses one of these dataclasses, so ``jitter=0.2`` or
``on_lock_error=closed`` means the same thing everywhere and is recorded with the trial.
"""

from __future__ import annotations

import enum
import random
import time
from dataclasses import dataclass
from typing import NamedTuple


class Wake(enum.StrEnum):
    """How a waiter learns that the value is back."""

    POLL = "poll"  # sleep poll_ms, re-read; costs commands while waiting
    NOTIFY = "notify"  # block on a wake list the filler pushes to (BLPOP); no polling


class LockErrorPolicy(enum.StrEnum):
    """What a request does when the lock store fails."""

    OPEN = "open"  # go to the origin without the lock (the herd comes back, requests succeed)
    CLOSED = "closed"  # fail the request (an error row of type LockStoreDown)


class CacheErrorPolicy(enum.StrEnum):
    """What a request does when the cache itself fails (refused, timed out, reset)."""

    FAIL = "fail"  # the request is an error row with the cache client's error type
    ORIGIN = "origin"  # answer from the origin, through the same loader and pool (production's
    # usual fallback: the database takes the whole load while the cache is gone)


class OnWrite(enum.StrEnum):
    """What a strategy does to the cache after the origin row behind a key changed."""

    DELETE = "delete"  # drop the key (each its own way); the next reader fills it (cache-aside)
    UPDATE = "update"  # load the new value and write it through (one origin read per write)


@dataclass(frozen=True)
class WriteParams:
    """What every strategy takes, ours and the libraries' (adapters/): its side of an origin
    write (``--invalidate-rate``)."""

    on_write: OnWrite = OnWrite.DELETE


@dataclass(frozen=True)
class CommonParams(WriteParams):
    """Parameters of every built-in strategy."""

    jitter: float = 0.0  # each TTL drawn uniformly from ttl * (1 +- jitter)
    on_cache_error: CacheErrorPolicy = CacheErrorPolicy.FAIL  # applied by strategies.fallback

    def __post_init__(self) -> None:
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError("jitter must be in [0, 1)")


@dataclass(frozen=True)
class WaitParams(CommonParams):
    """Parameters of a strategy whose clients can wait for another client's fill."""

    wake: Wake = Wake.POLL
    poll_ms: float = 5.0
    max_wait_ms: float = 1000.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.poll_ms <= 0:
            raise ValueError("poll_ms must be > 0")
        if self.max_wait_ms < self.poll_ms:
            raise ValueError("max_wait_ms must be >= poll_ms")


@dataclass(frozen=True)
class LockParams(WaitParams):
    """Parameters of a strategy that fills under the distributed lock."""

    lock_ttl_ms: int = 1000
    on_lock_error: LockErrorPolicy = LockErrorPolicy.OPEN

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lock_ttl_ms <= 0:
            raise ValueError("lock_ttl_ms must be > 0")


@dataclass(frozen=True)
class ExpiryGrid:
    """``--expiry aligned``: every value expires at the next boundary of the trial's common
    clock, so each expiry of a trial is one synchronized event across hosts."""

    origin_ms: int  # one boundary (the trial's first scheduled expiry), on this host's clock
    period_ms: int

    def next_ms(self, now_ms: int) -> int:
        """The first boundary after ``now_ms``."""
        return self.origin_ms + ((now_ms - self.origin_ms) // self.period_ms + 1) * self.period_ms


class Expiry(NamedTuple):
    """When a written value expires: ``px`` after the server stores it (each value lives one
    TTL: drift), or at the absolute instant ``pxat`` (a boundary of the grid: aligned, immune
    to the client-side delay between computing the TTL and the server storing the value)."""

    px: int | None
    pxat: int | None

    def at_ms(self, now_ms: int | None = None) -> int:
        """The expiry instant in ms since the epoch, as this host reckons it (``now_ms``: the
        caller's clock, a driver's or a simulation's; None: the system's)."""
        if self.pxat is not None:
            return self.pxat
        return (time.time_ns() // 1_000_000 if now_ms is None else now_ms) + (self.px or 0)


class Ttl:
    """The TTL a write uses: the trial's TTL (or, on a grid, the time to its next boundary),
    spread by ``jitter``."""

    __slots__ = ("_base_ms", "_grid", "_jitter")

    def __init__(self, base_ms: int, jitter: float, grid: ExpiryGrid | None = None) -> None:
        self._base_ms = base_ms
        self._jitter = jitter
        self._grid = grid

    @property
    def base_ms(self) -> int:
        return self._base_ms

    def draw(self, now_ms: int | None = None) -> Expiry:
        """The expiry of a value written now (``now_ms``: the caller's clock; None: the
        system's): relative, or on the grid absolute."""
        if self._grid is None:
            return Expiry(self.draw_ms(), None)
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        return Expiry(None, now_ms + self.draw_ms(now_ms))

    def draw_ms(self, now_ms: int | None = None) -> int:
        ttl = self._base_ms
        if self._grid is not None:
            if now_ms is None:
                now_ms = time.time_ns() // 1_000_000
            ttl = self._grid.next_ms(now_ms) - now_ms
        if not self._jitter:
            return ttl
        return max(1, round(ttl + self._base_ms * self._jitter * random.uniform(-1.0, 1.0)))
