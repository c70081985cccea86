"""How requests meet the scripted world (tests/scripted.py): the thread and asyncio schedulers
that let one request run between two points in the ``Interleaving``'s order, and the doors of a
strategy on them (``Commands`` and loaders on the scripted store and origin), so the sync and
asyncio drivers meet the world at the same points in the same order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import redis

from strategies.base import Probe
from strategies.commands import Arg, Command
from tests.scripted import LOAD_NS, Interleaving, Origin, Ready, Store


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
