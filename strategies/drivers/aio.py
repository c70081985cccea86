"""The asyncio driver: the same strategy logic executed with ``await`` in one event loop.

A ported strategy's core (``strategy.core``) runs here unchanged: each effect becomes an awaited
call on ``AsyncCommands`` (``RedisAsyncCommands`` over redis.asyncio, or any implementation of
the protocol: a leaner client, a scripted store), ``Sleep`` becomes ``asyncio.sleep``, ``Load``
an ``AsyncLoader``, ``Submit`` an ``AsyncBackground`` (or, without one, the refresh inline). The
request shape is the threaded driver's: the first GET awaited here, the core's plain ``hit``,
the generator only on a miss; so both drivers send the same commands in the same order.

The contract for a strategy that wants to run here is in docs/plugins.md ("Async").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Protocol, cast

import redis.asyncio

from strategies import registry
from strategies.base import Clock, Deps, Outcome, Probe
from strategies.commands import Arg, Command
from strategies.core.effects import (
    CACHE,
    AwaitFlight,
    Blpop,
    Delete,
    EndFlight,
    Eval,
    Get,
    Load,
    Pipeline,
    Rpush,
    Set,
    Sleep,
    Submit,
)
from strategies.params import ExpiryGrid

AsyncScript = Callable[[list[str], list[Arg]], Awaitable[Any]]
AsyncJob = Callable[[Probe], Awaitable[Outcome]]


class AsyncCommands(Protocol):
    """The commands the strategies' effects need, awaited (``strategies.commands.Commands``'s
    hot half)."""

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, *, px: int | None = None,
                  pxat: int | None = None, nx: bool = False) -> bool: ...

    async def delete(self, *keys: str) -> int: ...

    async def rpush(self, key: str, value: bytes) -> int: ...

    async def blpop(self, key: str, timeout_s: float) -> bytes | None: ...

    async def pipeline(self, *commands: Command, transaction: bool = False) -> None: ...

    def script(self, source: str) -> AsyncScript: ...


class AsyncLoader(Protocol):
    """Computes a key's value from the origin and records the cost in ``probe``."""

    async def load(self, key: str, probe: Probe) -> bytes: ...


class AsyncBackground(Protocol):
    """Runs a job off the request path (swr's refresh) as a row of its own."""

    def submit(self, key: str, job: AsyncJob) -> None: ...


class RedisAsyncCommands:
    """``AsyncCommands`` over a ``redis.asyncio.Redis`` (its pool; bytes, no decoding)."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client

    async def get(self, key: str) -> bytes | None:
        return cast("bytes | None", await self.client.get(key))

    async def set(self, key: str, value: bytes, *, px: int | None = None,
                  pxat: int | None = None, nx: bool = False) -> bool:
        return bool(await self.client.set(key, value, px=px, pxat=pxat, nx=nx))

    async def delete(self, *keys: str) -> int:
        return int(await self.client.delete(*keys))

    async def rpush(self, key: str, value: bytes) -> int:
        return int(await self.client.rpush(key, value))

    async def blpop(self, key: str, timeout_s: float) -> bytes | None:
        reply = await self.client.blpop([key], timeout=timeout_s)
        return None if reply is None else cast("list[bytes]", reply)[1]

    async def pipeline(self, *commands: Command, transaction: bool = False) -> None:
        pipe = self.client.pipeline(transaction=transaction)
        for command in commands:
            pipe.execute_command(*command)
        await pipe.execute()

    def script(self, source: str) -> AsyncScript:
        registered = self.client.register_script(source)

        async def run(keys: list[str], args: list[Arg]) -> Any:
            return await registered(keys=keys, args=args)

        return run

    async def close(self) -> None:
        await self.client.aclose()


class AsyncDriver:
    """Runs a ported strategy's logic on async commands; one per event loop (not thread-safe)."""

    def __init__(self, cache: AsyncCommands, locks: AsyncCommands, loader: AsyncLoader,
                 background: AsyncBackground | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 park: Callable[[Callable[[], bool], float], Awaitable[None]] | None = None,
                 ) -> None:
        """``park``: how a request waits for a condition (local-lock's flight ended) or a
        timeout (a scripted scheduler's in tests); None: on an ``asyncio.Event``."""
        self._stores = (cache, locks)
        self._park = park
        self._loader = loader
        self._background = background
        self._sleep = sleep
        self._scripts: dict[tuple[int, str], AsyncScript] = {}
        self._handlers: dict[type, Callable[[Any, Probe], Awaitable[Any]]] = {
            Get: self._get, Set: self._set, Delete: self._delete, Rpush: self._rpush,
            Blpop: self._blpop, Pipeline: self._pipeline, Eval: self._eval,
            Sleep: self._sleep_for, Load: self._load, Submit: self._submit_async,
            AwaitFlight: self._await_flight, EndFlight: self._end_flight,
        }

    async def fetch(self, strategy: Any, key: str, probe: Probe) -> Outcome:
        """Answer one request with ``strategy``'s logic (``strategy.core``, or a core itself):
        the first GET, the core's ``hit``, and on a miss its steps (a core without ``hit``:
        its ``steps``, whole). A first GET that fails goes to the core's ``get_failed`` if it
        has one (the cache-error fallback), else to the caller."""
        core = getattr(strategy, "core", strategy)
        if not hasattr(core, "hit"):  # a core whose first command is not a GET (lease)
            whole: Outcome = await self.run(core.steps(key, probe), probe)
            return whole
        try:
            raw = await self._stores[CACHE].get(key)
        except Exception as exc:
            failed = getattr(core, "get_failed", None)  # on_cache_error=origin's
            if failed is None:
                raise
            answer: Outcome = await self.run(failed(key, exc, probe), probe)
            return answer
        outcome: Outcome | None = core.hit(key, raw, probe)
        if outcome is None:
            outcome = await self.run(core.miss(key, raw, probe), probe)
        return outcome

    async def run(self, steps: Generator[Any, Any, Any], probe: Probe) -> Any:
        """Execute ``steps``'s effects in order, awaiting each; return what it returns."""
        handlers, send = self._handlers, steps.send
        try:
            effect = send(None)
            while True:
                try:
                    result = await handlers[type(effect)](effect, probe)
                except Exception as exc:  # noqa: BLE001 - the logic's to handle or raise
                    effect = steps.throw(exc)
                else:
                    effect = send(result)
        except StopIteration as stop:
            return stop.value

    async def _get(self, e: Get, probe: Probe) -> bytes | None:
        return await self._stores[e.store].get(e.key)

    async def _set(self, e: Set, probe: Probe) -> bool:
        return await self._stores[e.store].set(e.key, e.value, px=e.px, pxat=e.pxat, nx=e.nx)

    async def _delete(self, e: Delete, probe: Probe) -> int:
        return await self._stores[e.store].delete(*e.keys)

    async def _rpush(self, e: Rpush, probe: Probe) -> int:
        return await self._stores[e.store].rpush(e.key, e.value)

    async def _blpop(self, e: Blpop, probe: Probe) -> bytes | None:
        return await self._stores[e.store].blpop(e.key, e.timeout_s)

    async def _pipeline(self, e: Pipeline, probe: Probe) -> None:
        await self._stores[e.store].pipeline(*e.commands, transaction=e.transaction)

    async def _eval(self, e: Eval, probe: Probe) -> Any:
        script = self._scripts.get((e.store, e.source))
        if script is None:
            script = self._scripts[e.store, e.source] = self._stores[e.store].script(e.source)
        return await script(list(e.keys), list(e.args))

    async def _sleep_for(self, e: Sleep, probe: Probe) -> None:
        await self._sleep(e.seconds)

    async def _load(self, e: Load, probe: Probe) -> bytes:
        return await self._loader.load(e.key, probe)

    async def _await_flight(self, e: AwaitFlight, probe: Probe) -> None:
        """Wait on the flight's event, made by its first follower (one loop: no race)."""
        flight = e.flight
        if self._park is not None:
            await self._park(lambda: flight.done, e.timeout_s)
            return
        if flight.done:
            return
        event = flight.waiter
        if event is None:
            event = flight.waiter = asyncio.Event()
        with contextlib.suppress(TimeoutError):  # the logic sees the flight still in the air
            await asyncio.wait_for(event.wait(), e.timeout_s)

    async def _end_flight(self, e: EndFlight, probe: Probe) -> None:
        if e.flight.waiter is not None:
            e.flight.waiter.set()

    async def _submit_async(self, e: Submit, probe: Probe) -> bool:
        return self._submit(e)

    def _submit(self, e: Submit) -> bool:
        if self._background is None:
            return False
        job = e.job

        async def run_job(job_probe: Probe) -> Outcome:
            outcome: Outcome = await self.run(job(job_probe), job_probe)
            return outcome

        self._background.submit(e.key, run_job)
        return True


class _ThreadedPathUnused:
    """The threaded side of a strategy built for the asyncio driver: whatever it registers at
    construction (its scripts), calling it is a bug, said so."""

    def _refuse(self, *_: object, **__: object) -> Any:
        raise RuntimeError("a strategy built for the asyncio driver was called on its threaded path")

    def script(self, source: str) -> Callable[..., Any]:
        return self._refuse

    def __getattr__(self, name: str) -> Any:
        return self._refuse


def for_asyncio(spec: str | registry.StrategySpec, ttl_ms: int,
                expiry_grid: ExpiryGrid | None = None, clock: Clock | None = None) -> Any:
    """A ported strategy (``name:param=value,...``, or its parsed spec) to run with ``afetch``:
    its core holds the logic and the trial's TTL; its threaded path refuses to run."""
    parsed = registry.parse(spec) if isinstance(spec, str) else spec
    label = spec if isinstance(spec, str) else parsed.label
    refused = registry.InvalidStrategy(f"strategy {label!r} is not ported to strategies.core: "
                                       "it runs on the threaded driver only")
    if not getattr(registry.strategy_class(parsed.name), "sans_io", False):
        raise refused  # not built: a threaded strategy may use its commands while it is built
    unused: Any = _ThreadedPathUnused()
    strategy = parsed.build(Deps(unused, unused, unused, ttl_ms, expiry_grid=expiry_grid,
                                 clock=clock, listen=False))  # its runner listens (aio_listen)
    if not getattr(strategy, "sans_io", False):
        raise refused
    return strategy


async def afetch(strategy: Any, key: str, probe: Probe, driver: AsyncDriver) -> Outcome:
    """``strategy.fetch`` on the asyncio driver: the async entry of every ported strategy."""
    return await driver.fetch(strategy, key, probe)
