"""Observed expiry events: the cache server's own reports, stamped on our clock.

Redis: keyspace notifications. memcached: its ``watch fetchers`` log stream, whose lines say
``status=expired`` when a fetch found an item past its TTL (memcached expires lazily, so this
is the first request after the expiry; it reports no deletes).

The listener asks the cache to publish ``expired`` and ``del`` key events (``notify-keyspace-events``
gains ``E``, ``x`` and ``g``; flags already set are kept) and stamps each one with the
coordinator host's wall clock as it arrives. It runs in a process of its own at raised priority
(real-time where allowed, else a lower nice value): on a machine saturated by the load
generator a thread of the coordinator received the events up to tens of milliseconds late.
A server that refuses ``CONFIG SET`` (many managed services do) leaves the run on the schedule:
the reason is said once and recorded.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from urllib.parse import unquote

import redis

from model.memcache import Memcache
from results.figures.expiry_reports import Event, Source
from strategies.base import CacheServer

FLAGS = "Exg"
SOURCES = {"expired": Source.EXPIRED, "del": Source.DELETED}
POLL_S = 0.05
RETRY_S = 0.2
READY_S = 15.0


class ListenerError(ConnectionError):
    """The listener process could not subscribe, or died: the run's events would be wrong."""


def enable_notifications(cache: redis.Redis) -> str | None:
    """Turn the key event notifications on; the reason they cannot be had, or None."""
    try:
        current = str(cache.config_get("notify-keyspace-events").get("notify-keyspace-events", ""))
        cache.config_set("notify-keyspace-events", "".join(sorted(set(current) | set(FLAGS))))
    except redis.ResponseError as exc:
        return f"the cache refused CONFIG for keyspace notifications ({exc})"
    return None


class ExpiryListener:
    """A child process subscribed to the cache's key events; ``events`` takes a trial's share.

    ``cache`` is the coordinator's client of a Redis cache (None for memcached, whose watch
    needs no configuration). ``configure`` False: the cache is someone else's (a black-box
    service's): its notifications are never turned on, not even after a restart."""

    def __init__(self, cache_url: str, cache: redis.Redis | None,
                 kind: CacheServer = CacheServer.REDIS, configure: bool = True) -> None:
        self.unavailable = enable_notifications(cache) if cache is not None and configure else None
        self._child: Callable[[str, Connection], None] = (
            functools.partial(_listen, configure=configure) if kind is CacheServer.REDIS
            else _watch)
        self.priority = "none"
        self._seen: list[tuple[str, str, int]] = []  # (key, event name, received at ns)
        self.gaps: list[list[int]] = []  # [down, up] instants; up is 0 while still down
        self._url = cache_url
        self._conn: Connection | None = None
        self._proc: multiprocessing.process.BaseProcess | None = None

    def start(self) -> None:
        """Start the child and wait until it is subscribed (bounded)."""
        if self.unavailable:
            return
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=self._child, args=(self._url, child), name="expiries",
                                 daemon=True)
        self._proc.start()
        child.close()
        if not self._conn.poll(READY_S):
            raise ListenerError(f"expiry listener not subscribed within {READY_S:g} s")
        kind, detail = self._conn.recv()
        if kind != "ready":
            raise ListenerError(f"expiry listener failed: {detail}")
        self.priority = str(detail)

    def events(self, keys: Collection[str], start_ns: int, end_ns: int) -> list[Event]:
        """The events of ``keys`` received in [start_ns, end_ns); older ones are dropped."""
        self._drain()
        seen, self._seen = self._seen, [s for s in self._seen if s[2] >= end_ns]
        return [Event(key, at, SOURCES[name]) for key, name, at in seen
                if start_ns <= at < end_ns and key in keys]

    def expired_since(self, keys: Collection[str], start_ns: int) -> tuple[int, int]:
        """Expiries of ``keys`` received since ``start_ns`` so far, and the latest instant (0:
        none); kept for ``events``. What the live metrics show while a trial runs."""
        self._drain()
        instants = [at for key, name, at in self._seen
                    if at >= start_ns and SOURCES[name] is Source.EXPIRED and key in keys]
        return len(instants), max(instants, default=0)

    def missed(self, start_ns: int, end_ns: int) -> bool:
        """Was the listener unsubscribed at any time in [start_ns, end_ns)?"""
        self._drain()
        return any(down < end_ns and (up == 0 or up > start_ns) for down, up in self.gaps)

    def _drain(self) -> None:
        if self._conn is None:
            return
        while self._conn.poll():
            try:
                kind, detail = self._conn.recv()
            except EOFError:
                break
            if kind == "down":
                self.gaps.append([detail, 0])
            elif kind == "up":
                self.gaps[-1][1] = detail
            else:
                self._seen.extend(detail)
        if self._proc is not None and not self._proc.is_alive():
            raise ListenerError(f"expiry listener exited (code {self._proc.exitcode})")

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(timeout=5)
        if self._conn is not None:
            self._conn.close()


def raise_priority() -> str:
    """Real-time FIFO where allowed, else nice -10, else as it was; returns which."""
    attempts = (("fifo", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))),
                ("nice -10", lambda: os.nice(-10)))
    for name, attempt in attempts:
        try:
            attempt()
        except PermissionError:  # not allowed here (no CAP_SYS_NICE): the next, weaker, way
            continue
        return name
    return "normal"


@dataclass
class _Link:
    """The listener's link to the cache as the parent hears of it: ready once, then each gap
    (down, up) while the server is away."""

    conn: Connection
    priority: str
    ready: bool = False
    gap_since: int | None = None

    def up(self) -> None:
        if not self.ready:
            self.conn.send(("ready", self.priority))
            self.ready = True
        if self.gap_since is not None:
            self.conn.send(("up", time.time_ns()))
            self.gap_since = None

    def down(self, exc: Exception) -> bool:
        """Tell the parent; False when the first connection failed (the listener then ends)."""
        if not self.ready:
            self.conn.send(("error", f"{type(exc).__name__}: {exc}"))
            return False
        if self.gap_since is None:
            self.gap_since = time.time_ns()
            self.conn.send(("down", self.gap_since))
        time.sleep(RETRY_S)
        return True


def _listen(url: str, conn: Connection, configure: bool = True) -> None:
    """The child: subscribe, then send each event with its arrival time (batched per poll).

    When the cache goes away (a fault, a restart) it says when the gap began and ended, and
    subscribes again: a trial that overlaps a gap is marked, never silently short of events.
    """
    link = _Link(conn, raise_priority())
    while True:
        _exit_if_orphaned()
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        try:
            if link.gap_since is not None and configure:  # a restarted server starts without them
                enable_notifications(client)
            pubsub = _subscribe(client)
            link.up()
            _forward(pubsub, conn)
        except (redis.RedisError, OSError) as exc:
            if not link.down(exc):
                return
        finally:
            client.close()


def _subscribe(client: redis.Redis) -> redis.client.PubSub:
    db = int(client.connection_pool.connection_kwargs.get("db", 0))
    pubsub: redis.client.PubSub = client.pubsub(  # type: ignore[no-untyped-call, unused-ignore]
        ignore_subscribe_messages=True)
    pubsub.subscribe(*(f"__keyevent@{db}__:{name}" for name in SOURCES))
    return pubsub


def _exit_if_orphaned() -> None:
    """The coordinator died (killed, its ``finally`` never ran): this child goes too."""
    if os.getppid() != _PARENT[0]:
        os._exit(0)


_PARENT = [os.getppid()]  # in the child: the coordinator that started it


def _forward(pubsub: redis.client.PubSub, conn: Connection) -> None:
    while True:
        _exit_if_orphaned()
        batch = []
        message = pubsub.get_message(timeout=POLL_S)
        while message is not None:
            now = time.time_ns()
            name = message["channel"].rsplit(b":", 1)[-1].decode()
            batch.append((message["data"].decode(), name, now))
            message = pubsub.get_message(timeout=0)
        if batch:
            conn.send(("events", batch))


def _watch(url: str, conn: Connection) -> None:
    """The child for memcached: ``watch fetchers``, forwarding the keys fetched expired; down
    and up as for Redis when the server goes away (a watcher that cannot keep up has lines
    skipped by the server: the trial's ``log_watcher_skipped`` counter says so)."""
    link = _Link(conn, raise_priority())
    while True:
        _exit_if_orphaned()
        try:
            memcache = Memcache(url)
        except OSError as exc:
            if not link.down(exc):
                return
            continue
        try:
            lines = memcache.watch("fetchers")
            link.up()
            _forward_expired(lines, conn)
        except OSError as exc:
            if not link.down(exc):
                return
        finally:
            memcache.close()


def _forward_expired(lines: Iterator[list[bytes]], conn: Connection) -> None:
    """Each batch of log lines the server sent: its ``status=expired`` fetches, as events."""
    for batch in lines:
        _exit_if_orphaned()
        now = time.time_ns()
        expired = [(_field(line, b"key="), "expired", now) for line in batch
                   if b" status=expired" in line]
        if expired:
            conn.send(("events", expired))


def _field(line: bytes, name: bytes) -> str:
    """A field of a watch line (its values are URI-encoded: ``orders%3A0``)."""
    start = line.index(name) + len(name)
    end = line.find(b" ", start)
    return unquote(line[start:end if end >= 0 else None].decode())
