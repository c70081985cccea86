"""The black-box service's own cache (``--service-cache-url``): its expiries observed where its
keyspace notifications are on, and, only with ``--expiry scheduled-delete``, the tool's deletes
of the named keys at shared instants (the seeds' synchronized expiry event).

Never flushed, never reconfigured: the notifications are read (``CONFIG GET``), not set; a
server that has them off, or refuses ``CONFIG GET``, is said so and the events fall back (the
tool's own delete instants, else bursts in the samples). The deletes are the only write the
tool makes there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import redis

from coordinator.connect import redis_from_url
from coordinator.expiry import ExpiryListener
from results.figures.expiry_reports import Event, Source

SPIN_S = 0.002  # the last stretch before a delete instant is slept in short steps


@dataclass(frozen=True)
class Notifications:
    """Which key events the service's cache publishes (its ``notify-keyspace-events``)."""

    expired: bool
    deleted: bool
    detail: str  # the flags as read, or why they could not be


def notifications(client: redis.Redis) -> Notifications:
    """Read, never set: key events (``E``) with expiries (``x``) and generic deletes (``g``)."""
    try:
        flags = str(client.config_get("notify-keyspace-events").get("notify-keyspace-events", ""))
    except redis.ResponseError as exc:
        return Notifications(False, False, f"CONFIG GET refused ({exc}): cannot tell")
    events = "E" in flags
    return Notifications(events and bool({"x", "A"} & set(flags)),
                         events and bool({"g", "A"} & set(flags)),
                         f"notify-keyspace-events is {flags!r}")


class ServiceCache:
    """A client of the service's cache, its notifications and (when they are on) a listener."""

    def __init__(self, url: str, names: Mapping[str, str]) -> None:
        self.client = redis_from_url(url, socket_timeout=5)
        self.names = dict(names)  # our key -> the service's Redis key
        self._ours = {name: key for key, name in self.names.items()}
        self.notified = notifications(self.client)
        on = self.notified.expired or self.notified.deleted
        self.listener = ExpiryListener(url, None, configure=False) if on else None

    def start(self) -> None:
        if self.listener is not None:
            self.listener.start()

    def events(self, start_ns: int, end_ns: int) -> list[Event]:
        """The expiries and deletes of the named keys it reported in [start_ns, end_ns), under
        our key names."""
        if self.listener is None:
            return []
        found = self.listener.events(self._ours, start_ns, end_ns)
        return [Event(self._ours[e.key], e.at_ns, e.source) for e in found]

    def missed(self, start_ns: int, end_ns: int) -> bool:
        """Was the listener away from the cache at any time in [start_ns, end_ns)?"""
        return self.listener is not None and self.listener.missed(start_ns, end_ns)

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
        self.client.close()


@dataclass(frozen=True)
class Delete:
    key: str
    scheduled_ns: int
    sent_ns: int
    took_ns: int
    removed: bool  # the key was there (DEL removed it): an expiry event the service must refill


class ScheduledDeletes:
    """A thread deleting the named keys at each instant (one pipeline of DELs per instant)."""

    def __init__(self, cache: ServiceCache, instants: Sequence[int]) -> None:
        self._cache, self._instants = cache, list(instants)
        self.done: list[Delete] = []
        self._halt = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="scheduled-deletes", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        keys = list(self._cache.names)
        for at in self._instants:
            if not _sleep_until(at, self._halt):
                return
            sent = time.time_ns()
            pipe = self._cache.client.pipeline(transaction=False)
            for key in keys:
                pipe.delete(self._cache.names[key])
            try:
                removed = pipe.execute()
            except (redis.RedisError, OSError) as exc:
                self._error = exc
                return
            took = time.time_ns() - sent
            self.done.extend(Delete(k, at, sent, took, bool(n)) for k, n in zip(keys, removed,
                                                                                 strict=True))

    def stop(self) -> list[Delete]:
        self._halt.set()
        self._thread.join(timeout=10)
        if self._error is not None:
            raise redis.RedisError(f"a scheduled delete on the service's cache failed: "
                                   f"{type(self._error).__name__}: {self._error}")
        return list(self.done)


def _sleep_until(at_ns: int, halt: threading.Event) -> bool:
    """Sleep to ``at_ns`` (coordinator clock); False when halted first."""
    while (left := (at_ns - time.time_ns()) / 1e9) > 0:
        if halt.wait(max(0.0, left - SPIN_S) if left > SPIN_S else left / 2):
            return False
    return not halt.is_set()


def observed(deletes: Sequence[Delete], reported: Sequence[Event], slack_ns: int) -> int:
    """The deletes that removed a key and that the cache reported back (a ``del`` event of
    that key from the instant it was sent to ``slack_ns`` after its reply)."""
    dels = [(e.key, e.at_ns) for e in reported if e.source is Source.DELETED]
    return sum(any(k == d.key and d.sent_ns <= at <= d.sent_ns + d.took_ns + slack_ns
                   for k, at in dels) for d in deletes if d.removed)
