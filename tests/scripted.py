"""A scripted world for the strategies' logic: a store on a fake clock, and a deterministic
scheduler that lets exactly one request run between two I/O points, in a seeded order.

The same ``Interleaving`` decides the order for threads (the sync driver: each request a thread,
parked on a condition at each point) and for asyncio (each request a task, parked on a future),
so a strategy run under either driver sees the same interleaving, and must give the same rows.
A point is where a request meets the world: a command, a sleep, an origin call. Time moves only
here: each granted point costs ``STEP_NS``, a sleep or a blocking pop waits for the clock, and
when nobody can run the clock jumps to the next wake-up.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import redis
import redis.exceptions as rex

from strategies.base import Probe
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

class ThreadScheduler:
    """Requests as threads; one runs at a time, between two of its points."""

    def __init__(self, plan: Interleaving) -> None:
        self.plan = plan
        self._cv = threading.Condition()
        self._parked: dict[str, tuple[int | None, Ready | None]] = {}
        self._alive: set[str] = set()
        self._running: str | None = None
        self._local = threading.local()
        self.errors: list[BaseException] = []

    def who(self) -> str:
        name: str = self._local.who
        return name

    def point(self, wake: int | None = None, ready: Ready | None = None) -> None:
        who = self.who()
        if wake is None and ready is None:
            wake = self.plan.ready_at(who)
        with self._cv:
            self._parked[who] = (wake, ready)
            self._running = None
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._running == who)

    def spawn(self, who: str, body: Callable[[], None]) -> None:
        def run() -> None:
            self._local.who = who
            try:
                self.point()
                body()
            except BaseException as exc:  # noqa: BLE001 - reported by run()
                self.errors.append(exc)
            finally:
                with self._cv:
                    self._alive.discard(who)
                    self._running = None
                    self._cv.notify_all()

        with self._cv:
            assert who not in self._alive, f"two requests named {who!r}"
            self._alive.add(who)
        threading.Thread(target=run, name=who, daemon=True).start()

    def run(self) -> None:
        while True:
            with self._cv:
                if not self._cv.wait_for(lambda: self._running is None
                                         and len(self._parked) == len(self._alive), 10):
                    raise TimeoutError("a scripted request neither parked nor ended")
                if not self._alive:
                    break
                who = self.plan.choose(self._parked)
                del self._parked[who]
                self._running = who
                self._cv.notify_all()
        if self.errors:
            raise self.errors[0]

    def sleep(self, seconds: float) -> None:
        self.point(wake=self.plan.clock.ns + int(seconds * 1e9))

    def park(self, ready: Ready, timeout_s: float) -> None:
        """Wait until ``ready()`` or ``timeout_s`` (the driver's in-process wait, local-lock's)."""
        self.point(wake=self.plan.clock.ns + int(timeout_s * 1e9), ready=ready)


class AsyncScheduler:
    """Requests as tasks of one event loop; the same rule as ``ThreadScheduler``."""

    def __init__(self, plan: Interleaving) -> None:
        self.plan = plan
        self._parked: dict[str, tuple[int | None, Ready | None]] = {}
        self._futures: dict[str, asyncio.Future[None]] = {}
        self._alive: set[str] = set()
        self._idle = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._current: dict[asyncio.Task[Any], str] = {}

    def who(self) -> str:
        task = asyncio.current_task()
        assert task is not None
        return self._current[task]

    async def point(self, wake: int | None = None, ready: Ready | None = None) -> None:
        who = self.who()
        if wake is None and ready is None:
            wake = self.plan.ready_at(who)
        future = asyncio.get_running_loop().create_future()
        self._parked[who] = (wake, ready)
        self._futures[who] = future
        self._idle.set()
        await future

    def spawn(self, who: str, body: Callable[[], Awaitable[None]]) -> None:
        async def run() -> None:
            try:
                await self.point()
                await body()
            finally:
                self._alive.discard(who)
                self._idle.set()

        assert who not in self._alive, f"two requests named {who!r}"
        self._alive.add(who)
        task = asyncio.get_running_loop().create_task(run())
        self._current[task] = who
        self._tasks.append(task)

    async def run(self) -> None:
        while True:
            while len(self._parked) != len(self._alive):
                self._idle.clear()
                await asyncio.wait_for(self._idle.wait(), 10)
            if not self._alive:
                break
            who = self.plan.choose(self._parked)
            del self._parked[who]
            self._futures.pop(who).set_result(None)
            self._idle.clear()
            await asyncio.wait_for(self._idle.wait(), 10)
        for task in self._tasks:
            await task  # raises what a request raised outside its rows

    async def sleep(self, seconds: float) -> None:
        await self.point(wake=self.plan.clock.ns + int(seconds * 1e9))

    async def park(self, ready: Ready, timeout_s: float) -> None:
        await self.point(wake=self.plan.clock.ns + int(timeout_s * 1e9), ready=ready)


# --- the commands and the loader, on either scheduler ---------------------------------------------

class SyncCommands:
    """``Commands`` on the scripted store, each call a point of the thread scheduler."""

    def __init__(self, store: Store, sched: ThreadScheduler, name: str) -> None:
        self._store, self._sched, self._name = store, sched, name

    def _at(self, *what: object) -> None:
        self._sched.point()
        self._store.log.append((self._sched.who(), self._name, *map(str, what)))
        if self._store.down:
            raise redis.ConnectionError(f"{self._name} is down")

    def get(self, key: str) -> bytes | None:
        self._at("GET", key)
        return self._store.get(key)

    def set(self, key: str, value: bytes, *, px: int | None = None, pxat: int | None = None,
            nx: bool = False) -> bool:
        self._at("SET", key, px, pxat, nx)
        self._store.refuse_write()
        return self._store.set(key, value, px, pxat, nx)

    def delete(self, *keys: str) -> int:
        self._at("DEL", *keys)
        return self._store.delete(*keys)

    def rpush(self, key: str, value: bytes) -> int:
        self._at("RPUSH", key)
        return self._store.rpush(key, value)

    def blpop(self, key: str, timeout_s: float) -> bytes | None:
        self._sched.point(wake=self._store.clock.ns + int(timeout_s * 1e9),
                          ready=lambda: self._store.has_items(key))
        self._store.log.append((self._sched.who(), self._name, "BLPOP", key))
        if self._store.down:
            raise redis.ConnectionError(f"{self._name} is down")
        return self._store.lpop(key)

    def pipeline(self, *commands: Command, transaction: bool = False) -> None:
        self._at("PIPELINE", *(c[0] for c in commands))
        for command in commands:
            self._store.command(command)

    def script(self, source: str) -> Callable[[list[str], list[Arg]], Any]:
        def run(keys: list[str], args: list[Arg]) -> Any:
            self._at("EVAL", *keys)
            return self._store.script(source, keys, args)
        return run


class AsyncCommands:
    """``strategies.drivers.aio.AsyncCommands`` on the scripted store."""

    def __init__(self, store: Store, sched: AsyncScheduler, name: str) -> None:
        self._store, self._sched, self._name = store, sched, name

    async def _at(self, *what: object) -> None:
        await self._sched.point()
        self._store.log.append((self._sched.who(), self._name, *map(str, what)))
        if self._store.down:
            raise redis.ConnectionError(f"{self._name} is down")

    async def get(self, key: str) -> bytes | None:
        await self._at("GET", key)
        return self._store.get(key)

    async def set(self, key: str, value: bytes, *, px: int | None = None,
                  pxat: int | None = None, nx: bool = False) -> bool:
        await self._at("SET", key, px, pxat, nx)
        self._store.refuse_write()
        return self._store.set(key, value, px, pxat, nx)

    async def delete(self, *keys: str) -> int:
        await self._at("DEL", *keys)
        return self._store.delete(*keys)

    async def rpush(self, key: str, value: bytes) -> int:
        await self._at("RPUSH", key)
        return self._store.rpush(key, value)

    async def blpop(self, key: str, timeout_s: float) -> bytes | None:
        await self._sched.point(wake=self._store.clock.ns + int(timeout_s * 1e9),
                                ready=lambda: self._store.has_items(key))
        self._store.log.append((self._sched.who(), self._name, "BLPOP", key))
        if self._store.down:
            raise redis.ConnectionError(f"{self._name} is down")
        return self._store.lpop(key)

    async def pipeline(self, *commands: Command, transaction: bool = False) -> None:
        await self._at("PIPELINE", *(c[0] for c in commands))
        for command in commands:
            self._store.command(command)

    def script(self, source: str) -> Callable[[list[str], list[Arg]], Awaitable[Any]]:
        async def run(keys: list[str], args: list[Arg]) -> Any:
            await self._at("EVAL", *keys)
            return self._store.script(source, keys, args)
        return run


class SyncLoader:
    def __init__(self, origin: Origin, sched: ThreadScheduler) -> None:
        self._origin, self._sched = origin, sched

    def load(self, key: str, probe: Probe) -> bytes:
        self._sched.point()
        probe.origin_calls += 1
        start = self._sched.plan.clock.ns
        self._sched.point(wake=start + LOAD_NS)
        probe.origin_ns += self._sched.plan.clock.ns - start
        return self._origin.value(self._sched.who())


class AsyncLoader:
    def __init__(self, origin: Origin, sched: AsyncScheduler) -> None:
        self._origin, self._sched = origin, sched

    async def load(self, key: str, probe: Probe) -> bytes:
        await self._sched.point()
        probe.origin_calls += 1
        start = self._sched.plan.clock.ns
        await self._sched.point(wake=start + LOAD_NS)
        probe.origin_ns += self._sched.plan.clock.ns - start
        return self._origin.value(self._sched.who())
