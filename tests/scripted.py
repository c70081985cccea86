"""A scripted world for the strategies' logic: a store on a fake clock, and a deterministic
scheduler that lets exactly one request run between two I/O points, in a seeded order.

The same ``Interleaving`` decides the order for threads (the sync driver: each request a thread,
parked on a condition at each point) and for asyncio (each request a task, parked on a future),
so a strategy run under either driver sees the same interleaving, and must give the same rows.
A point is where a request meets the world: a command, a sleep, an origin call. Time moves only
here: each granted point costs ``STEP_NS``, a sleep or a blocking pop waits for the clock, and
when nobody can run the clock jumps to the next wake-up. The schedulers and the strategy's doors
on them (commands, loaders) are in tests/scripted_io.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import redis.exceptions as rex

from strategies.commands import Arg, Command
from strategies.core.effects import subscriber
from strategies.core.flight import RELEASE
from strategies.core.lease import GET_OR_LEASE, INVALIDATE, SET_WITH_LEASE
from strategies.version import stamp

STEP_NS = 100_000  # what one granted point costs on the fake clock: 0.1 ms
LOAD_NS = 3_000_000  # an origin call: 3 ms
WALL0_NS = 1_800_000_000 * 10**9  # the fake wall clock's origin


class FakeClock:
    def __init__(self) -> None:
        self.ns = 0

    def now_ns(self) -> int:
        return self.ns

    def wall_ns(self) -> int:
        return WALL0_NS + self.ns

    def wall_ms(self) -> int:
        return self.wall_ns() // 1_000_000


Ready = Callable[[], bool]


class Interleaving:
    """Who runs next: a seeded choice among the parked requests that may run now.

    After each grant the request's next point may not run before a seeded lag (0 to ``lag_ns``:
    its round trip, its thread's wait for the CPU), so a request can fall behind the others as
    a saturated client does: what opens the gap between a GET's miss and a lock attempt.
    """

    def __init__(self, clock: FakeClock, seed: int, lag_ns: int = 2_000_000) -> None:
        self.clock = clock
        self._rng = random.Random(seed)
        self._lag_ns = lag_ns
        self._next: dict[str, int] = {}
        self.order: list[str] = []  # the grants, in order: the interleaving itself

    def ready_at(self, who: str) -> int:
        """When ``who``'s next plain point may run."""
        return self._next.get(who, 0)

    def choose(self, parked: dict[str, tuple[int | None, Ready | None]]) -> str:
        while True:
            now = self.clock.ns
            able = sorted(who for who, (wake, ready) in parked.items()
                          if (ready is not None and ready()) or (wake is not None and now >= wake))
            if able:
                who = self._rng.choice(able)
                self.order.append(who)
                self.clock.ns += STEP_NS
                self._next[who] = self.clock.ns + self._rng.randrange(self._lag_ns)
                return who
            wakes = [wake for wake, _ in parked.values() if wake is not None]
            if not wakes:
                raise RuntimeError(f"deadlock: every request waits on nothing ({sorted(parked)})")
            self.clock.ns = max(now, min(wakes))


class Store:
    """A Redis-like dict on the fake clock: strings with PX / PXAT expiry, lists, the scripts
    the strategies send (by their source), and ``log``, every command (shared by the stores)."""

    def __init__(self, clock: FakeClock, log: list[tuple[str, ...]]) -> None:
        self.clock = clock
        self.data: dict[str, tuple[Any, int | None]] = {}  # key -> (value, expiry wall ms)
        self.log = log
        self.down = False  # every command fails as a refused connection does
        self.read_only = False  # every write fails as a replica's (or a full server's) does
        self.subscribers: list[Callable[[Any], None]] = []  # PUBLISH reaches them at once

    def _live(self, key: str) -> Any:
        item = self.data.get(key)
        if item is None:
            return None
        value, at = item
        if at is not None and self.clock.wall_ms() >= at:
            del self.data[key]
            return None
        return value

    def refuse_write(self) -> None:
        if self.read_only:
            raise rex.ReadOnlyError("You can't write against a read only replica.")

    def get(self, key: str) -> bytes | None:
        value = self._live(key)
        return value if isinstance(value, bytes) else None

    def set(self, key: str, value: bytes, px: int | None = None, pxat: int | None = None,
            nx: bool = False) -> bool:
        if nx and self._live(key) is not None:
            return False
        at = self.clock.wall_ms() + px if px is not None else pxat
        self.data[key] = (value, at)
        return True

    def delete(self, *keys: str) -> int:
        gone = [k for k in keys if self._live(k) is not None]
        for k in gone:
            del self.data[k]
        return len(gone)

    def rpush(self, key: str, value: bytes) -> int:
        items = self._live(key)
        if items is None:
            items = []
            self.data[key] = (items, None)
        items.append(value)
        return len(items)

    def has_items(self, key: str) -> bool:
        return bool(self._live(key))

    def lpop(self, key: str) -> bytes | None:
        items = self._live(key)
        if not items:
            return None
        value: bytes = items.pop(0)
        if not items:
            del self.data[key]
        return value

    def command(self, command: Command) -> Any:
        name, key, *args = command
        assert isinstance(key, str)
        if name == "RPUSH":
            return self.rpush(key, bytes(args[0]))  # type: ignore[arg-type]
        if name == "PEXPIRE":
            if key in self.data:
                self.data[key] = (self.data[key][0], self.clock.wall_ms() + int(args[0]))
            return 1
        if name == "SET":  # set_command's: SET key value [PX ms | PXAT ms] (two-level's fill)
            opts = dict(zip(args[1::2], args[2::2], strict=True))
            return self.set(key, bytes(args[0]), px=opts.get("PX"), pxat=opts.get("PXAT"))  # type: ignore[arg-type]
        if name == "PUBLISH":
            for heard in self.subscribers:
                heard(args[0])
            return len(self.subscribers)
        if name == "DEL":
            return self.delete(key)
        raise AssertionError(f"the scripted store has no {name!r}")

    def script(self, source: str, keys: list[str], args: list[Arg]) -> Any:
        if source == RELEASE:
            return self.delete(keys[0]) if self.get(keys[0]) == args[0] else 0
        if source == INVALIDATE:
            return self.delete(keys[0], keys[1])
        return self._lease_script(source, keys, args)

    def _lease_script(self, source: str, keys: list[str], args: list[Arg]) -> Any:
        if source == GET_OR_LEASE:
            value = self.get(keys[0])
            if value is not None:
                return [0, value]
            if self.set(keys[1], bytes(args[0]), px=int(args[1]), nx=True):  # type: ignore[arg-type]
                return [1]
            stale = self.get(keys[2])
            return [3] if stale is None else [2, stale]
        assert source == SET_WITH_LEASE, "the scripted store does not know this script"
        token, value_arg, ttl_ms, stale_ms, stale_arg = args
        if self.get(keys[1]) != token:
            return 0
        self.set(keys[0], bytes(value_arg), px=int(ttl_ms))  # type: ignore[arg-type]
        if int(stale_ms) > 0:
            self.set(keys[2], bytes(stale_arg), px=int(ttl_ms) + int(stale_ms))  # type: ignore[arg-type]
        self.delete(keys[1])
        return 1

    def state(self) -> dict[str, Any]:
        """What is left, tokens masked (random per run), expiries kept."""
        out: dict[str, Any] = {}
        for key in sorted(self.data):
            value, at = self.data[key]
            if key.startswith(("lock:", "lease:")):
                value = "<token>"
            out[key] = (value if not isinstance(value, list) else tuple(value), at)
        return out


def subscribe(store: Store, strategy: Any) -> None:
    """The listener of a strategy whose core subscribes (two-level): the store's PUBLISH."""
    core = subscriber(getattr(strategy, "core", None))
    if core is not None:
        store.subscribers.append(core.heard)


class Origin:
    """The origin's side of a trial: each call counted, each value of a new version."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def value(self, who: str) -> bytes:
        self.calls.append(who)
        return stamp(len(self.calls), b"value")


# --- the two schedulers -------------------------------------------------------------------------
