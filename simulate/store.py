"""The modelled cache server and lock store: a Redis-like dict on the simulated clock.

A command takes effect at one instant (the server is single-threaded and, at these rates, never
the bottleneck: its service time is not modelled, only the round trip to it). The methods here
are that instant, synchronous; ``simulate.driver`` puts the half round trips around them, and
priming calls them directly (set-up costs no simulated time). The Lua scripts the strategies'
cores send are answered by Python equivalents of their semantics, matched by their source: a
script the model does not know raises ``NotModelled`` rather than guessing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import simpy

from strategies.commands import Arg, Command
from strategies.core.flight import RELEASE
from strategies.core.lease import GET_OR_LEASE, INVALIDATE, SET_WITH_LEASE

Script = Callable[[list[str], list[Arg]], Any]
Heard = Callable[[Any], None]


class NotModelled(RuntimeError):
    """The strategy sent something this model has no semantics for."""


class SimStore:
    """Strings with PX / PXAT expiry (wall milliseconds of the simulated clock), lists, and
    BLPOP waiters woken by a push, and pub/sub: a publish reaches each subscribed app process
    after its half round trip (two-level's invalidations)."""

    def __init__(self, env: simpy.Environment, wall_ms: Callable[[], int]) -> None:
        self.env = env
        self._wall_ms = wall_ms
        self.data: dict[str, tuple[Any, int | None]] = {}  # key -> (value, expiry wall ms)
        self._waiters: dict[str, deque[simpy.Event]] = {}
        self.commands = 0  # every command applied: the model's own cost counter
        self._subscribers: dict[str, list[tuple[Heard, Callable[[], float]]]] = {}

    def subscribe(self, channel: str, heard: Heard, delay: Callable[[], float]) -> None:
        """An app process's listener on ``channel``: each publish reaches ``heard`` ``delay()``
        seconds later (its half round trip back from the server)."""
        self._subscribers.setdefault(channel, []).append((heard, delay))

    def publish(self, channel: str, data: Arg) -> int:
        """``PUBLISH``: delivered to every subscriber after its own delay; their count."""
        subscribers = self._subscribers.get(channel, [])
        for heard, delay in subscribers:
            self.env.timeout(delay()).callbacks.append(_deliver(heard, data))
        return len(subscribers)

    def live(self, key: str) -> Any:
        """The key's value, or None once its expiry has passed (expired lazily, as Redis)."""
        item = self.data.get(key)
        if item is None:
            return None
        value, at = item
        if at is not None and self._wall_ms() >= at:
            del self.data[key]
            return None
        return value

    def get(self, key: str) -> bytes | None:
        self.commands += 1
        value = self.live(key)
        return value if isinstance(value, bytes) else None

    def set(self, key: str, value: bytes, *, px: int | None = None, pxat: int | None = None,
            nx: bool = False) -> bool:
        self.commands += 1
        if nx and self.live(key) is not None:
            return False
        self.data[key] = (value, self._wall_ms() + px if px is not None else pxat)
        return True

    def delete(self, *keys: str) -> int:
        self.commands += 1
        gone = [k for k in keys if self.live(k) is not None]
        for k in gone:
            del self.data[k]
        return len(gone)

    def rpush(self, key: str, value: bytes) -> int:
        self.commands += 1
        items = self.live(key)
        if items is None:
            items = []
            self.data[key] = (items, None)
        items.append(value)
        length = len(items)
        self._feed(key)
        return length

    def pexpire(self, key: str, ms: int) -> int:
        if self.live(key) is None:
            return 0
        self.data[key] = (self.data[key][0], self._wall_ms() + ms)
        return 1

    def lpop(self, key: str) -> bytes | None:
        items = self.live(key)
        if not items:
            return None
        value: bytes = items.pop(0)
        if not items:
            del self.data[key]
        return value

    def wait_pop(self, key: str) -> simpy.Event:
        """A BLPOP arriving: an event that fires with the popped value (at once if the list has
        one). The caller races it against its timeout and calls ``give_up`` if it loses."""
        self.commands += 1
        event = self.env.event()
        self._waiters.setdefault(key, deque()).append(event)
        self._feed(key)
        return event

    def give_up(self, key: str, event: simpy.Event) -> None:
        waiters = self._waiters.get(key)
        if waiters is not None and event in waiters:
            waiters.remove(event)

    def _feed(self, key: str) -> None:
        """Hand list items to the oldest waiters, one each (Redis serves BLPOP clients FIFO)."""
        waiters = self._waiters.get(key)
        while waiters and self.live(key):
            waiters.popleft().succeed(self.lpop(key))

    def pipeline(self, *commands: Command, transaction: bool = False) -> None:
        for command in commands:
            self.command(command)

    def command(self, command: Command) -> Any:
        name, key, *args = command
        key = str(key)
        if name == "RPUSH":
            return self.rpush(key, bytes(args[0]))  # type: ignore[arg-type]
        if name == "PEXPIRE":
            return self.pexpire(key, int(args[0]))
        if name == "DEL":
            return self.delete(key)
        if name == "SET":
            return self._set_command(key, args)
        if name == "PUBLISH":
            return self.publish(key, args[0])
        raise NotModelled(f"the simulated store has no command {name!r}")

    def _set_command(self, key: str, args: list[Arg]) -> bool:
        value, options = bytes(args[0]), args[1:]  # type: ignore[arg-type]
        opts = {str(options[i]): int(options[i + 1])
                for i in range(0, len(options) - 1, 2) if options[i] in ("PX", "PXAT")}
        return self.set(key, value, px=opts.get("PX"), pxat=opts.get("PXAT"), nx="NX" in options)

    def script(self, source: str) -> Script:
        """The Python equivalent of a script the cores send, by its source."""
        known: dict[str, Script] = {RELEASE: self._release, INVALIDATE: self._invalidate,
                                    GET_OR_LEASE: self._get_or_lease,
                                    SET_WITH_LEASE: self._set_with_lease}
        if source not in known:
            raise NotModelled(f"the simulated store has no equivalent of script {source[:40]!r}")
        return known[source]

    def _release(self, keys: list[str], args: list[Arg]) -> int:
        return self.delete(keys[0]) if self.get(keys[0]) == args[0] else 0

    def _invalidate(self, keys: list[str], args: list[Arg]) -> int:
        return self.delete(keys[0], keys[1])

    def _get_or_lease(self, keys: list[str], args: list[Arg]) -> list[Any]:
        value = self.get(keys[0])
        if value is not None:
            return [0, value]
        if self.set(keys[1], bytes(args[0]), px=int(args[1]), nx=True):  # type: ignore[arg-type]
            return [1]
        stale = self.get(keys[2])
        return [3] if stale is None else [2, stale]

    def _set_with_lease(self, keys: list[str], args: list[Arg]) -> int:
        token, value, ttl_ms, stale_ms, stale = args
        if self.get(keys[1]) != token:
            return 0
        self.set(keys[0], bytes(value), px=int(ttl_ms))  # type: ignore[arg-type]
        if int(stale_ms) > 0:
            self.set(keys[2], bytes(stale), px=int(ttl_ms) + int(stale_ms))  # type: ignore[arg-type]
        self.delete(keys[1])
        return 1


def _deliver(heard: Heard, data: Arg) -> Callable[[simpy.Event], None]:
    """A publish's arrival at one subscriber, as a simpy callback."""

    def arrive(_: simpy.Event) -> None:
        heard(data)

    return arrive
