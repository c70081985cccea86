"""``on_cache_error=origin`` as logic: a ported core whose cache fails is answered by the origin.

The same policy as the threaded wrapper (``strategies.fallback``), written once for every
driver: a ``redis.RedisError`` that says the cache failed (``cache_failed``), thrown into the
core at its yield, ends the request with a ``Load`` of its own, unless the request had its
value from the origin already (``answered``: no second origin call). A failure of the first
GET, which the drivers send themselves, comes in through ``get_failed``. A background job
(swr's refresh) is guarded the same way: loaded before the write failed, it is a fill.

``FallbackCore`` keeps its inner core's ``hit`` as is, so a hit costs what it did;
``FallbackSteps`` wraps a core that is one generator (lease).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import redis
import redis.exceptions as rex

from strategies import version
from strategies.base import Outcome, Probe
from strategies.core.effects import JobSteps, Load, Steps, Submit

_DOWN = (redis.ConnectionError, redis.TimeoutError, rex.OutOfMemoryError, rex.ReadOnlyError,
         rex.ClusterDownError, rex.TryAgainError)
_OURS = (rex.MaxConnectionsError, rex.AuthenticationError, rex.AuthorizationError)


def cache_failed(exc: BaseException) -> bool:
    """Is ``exc`` the cache failing (down, timing out, out of memory, read-only)?"""
    return isinstance(exc, _DOWN) and not isinstance(exc, _OURS)


def answered(probe: Probe) -> bool:
    """Did this request get its value from the origin before the cache failed under it?"""
    return probe.origin_calls > 0 and probe.version_served >= 0


def from_origin(key: str, exc: BaseException, probe: Probe) -> Generator[Any, Any, Outcome]:
    """The answer to a request whose cache failed with ``exc``: re-raised when it is not the
    cache failing (a pool exhausted, bad credentials), else the origin's value."""
    if not (isinstance(exc, redis.RedisError) and cache_failed(exc)):
        raise exc
    if not answered(probe):
        probe.fallback = 1  # not a miss: no expiry's herd (results.figures.events)
        version.served(probe, (yield Load(key)))
    return Outcome.FILLED


def guarded_job(job: JobSteps) -> JobSteps:
    """``job`` whose cache write failing after its load is a fill, not an error."""

    def guarded(probe: Probe) -> Generator[Any, Any, Outcome]:
        try:
            return (yield from job(probe))
        except redis.RedisError as exc:
            if cache_failed(exc) and answered(probe):
                return Outcome.FILLED
            raise

    return guarded


def guard(steps: Steps, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
    """Run ``steps``, passing its effects on (a ``Submit``'s job guarded), and answer from the
    origin when the cache fails under it."""
    try:
        effect = steps.send(None)
        while True:
            if type(effect) is Submit:
                effect = Submit(effect.key, guarded_job(effect.job))
            try:
                result = yield effect
            except Exception as exc:  # noqa: BLE001 - the inner logic's to handle first
                effect = steps.throw(exc)
            else:
                effect = steps.send(result)
    except StopIteration as stop:
        outcome: Outcome = stop.value
        return outcome
    except redis.RedisError as exc:
        return (yield from from_origin(key, exc, probe))


class FallbackCore:
    """A hit-then-miss core (``hit``, ``miss``) under ``on_cache_error=origin``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.hit = inner.hit  # the inner's own: a hit pays no wrapper

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Generator[Any, Any, Outcome]:
        return (yield from guard(self.inner.miss(key, raw, probe), key, probe))

    def get_failed(self, key: str, exc: BaseException, probe: Probe,
                   ) -> Generator[Any, Any, Outcome]:
        """The first GET (the driver's) raised ``exc``."""
        return (yield from from_origin(key, exc, probe))


class FallbackSteps:
    """A core that is one generator (``steps``: lease) under ``on_cache_error=origin``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def steps(self, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
        return (yield from guard(self.inner.steps(key, probe), key, probe))
