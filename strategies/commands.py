"""The commands a strategy sends to the cache and the lock store: one small interface.

Strategies keep their pure logic and talk to Redis only through ``Commands``; the worker decides
which client stands behind it. ``PlainCommands`` is the reference: ``redis.Redis`` over its
connection pool, shared by threads (the coordinator's checks, and ``--redis-client pooled``).
The lean one (model.lean) owns one redis-py connection per client thread and packs repeated
commands once; both raise the same redis-py exceptions, so a failure is the same error row.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import redis
from redis.client import PubSub

Arg = bytes | str | int | float
Command = tuple[Arg, ...]


class Script(Protocol):
    """A registered Lua script: run by EVALSHA, loaded again when the server lost it."""

    def __call__(self, keys: list[str], args: list[Arg]) -> Any: ...


class Commands(Protocol):
    """The hot commands of every strategy, and what two-level's listener needs."""

    def get(self, key: str) -> bytes | None: ...

    def set(self, key: str, value: bytes, *, px: int | None = None, pxat: int | None = None,
            nx: bool = False) -> bool:
        """``SET``; True when the value was stored (False: ``nx`` and the key existed)."""
        ...

    def delete(self, *keys: str) -> int: ...

    def pttl(self, key: str) -> int: ...

    def rpush(self, key: str, value: bytes) -> int: ...

    def blpop(self, key: str, timeout_s: float) -> bytes | None:
        """The popped value, or None when nothing came within ``timeout_s``."""
        ...

    def pipeline(self, *commands: Command, transaction: bool = False) -> None:
        """Send ``commands`` in one round trip (in MULTI/EXEC with ``transaction``); raise the
        first error reply after every reply was read."""
        ...

    def script(self, source: str) -> Script: ...

    def pubsub(self) -> PubSub:
        """A subscriber on a shared connection (never a client thread's own), subscribe
        confirmations ignored."""
        ...

    def connect(self) -> None:
        """Connect the calling thread now if it owns a connection (before a trial's start
        instant, so that no first request pays for it); raise the server's failure."""
        ...

    def close(self) -> None: ...


def set_command(key: str, value: bytes, px: int | None = None, pxat: int | None = None,
                nx: bool = False) -> Command:
    """``SET key value [PX ms | PXAT ms] [NX]`` as sent, for a single call or a pipeline."""
    args: list[Arg] = ["SET", key, value]
    if px is not None:
        args += ["PX", px]
    if pxat is not None:
        args += ["PXAT", pxat]
    if nx:
        args.append("NX")
    return tuple(args)


class PlainCommands:
    """``Commands`` over a ``redis.Redis`` (pooled, thread-safe): today's client, the reference."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def get(self, key: str) -> bytes | None:
        return cast("bytes | None", self.client.get(key))

    def set(self, key: str, value: bytes, *, px: int | None = None, pxat: int | None = None,
            nx: bool = False) -> bool:
        return bool(self.client.set(key, value, px=px, pxat=pxat, nx=nx))

    def delete(self, *keys: str) -> int:
        return int(self.client.delete(*keys))

    def pttl(self, key: str) -> int:
        return int(self.client.pttl(key))

    def rpush(self, key: str, value: bytes) -> int:
        return int(self.client.rpush(key, value))

    def blpop(self, key: str, timeout_s: float) -> bytes | None:
        reply = self.client.blpop([key], timeout=timeout_s)
        return None if reply is None else cast("list[bytes]", reply)[1]

    def pipeline(self, *commands: Command, transaction: bool = False) -> None:
        pipe = self.client.pipeline(transaction=transaction)
        for command in commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call, unused-ignore]
        pipe.execute()

    def script(self, source: str) -> Script:
        registered = self.client.register_script(source)

        def run(keys: list[str], args: list[Arg]) -> Any:
            return registered(keys=keys, args=args)

        return run

    def pubsub(self) -> PubSub:
        pubsub: PubSub = self.client.pubsub(  # type: ignore[no-untyped-call, unused-ignore]
            ignore_subscribe_messages=True)
        return pubsub

    def connect(self) -> None:
        """Nothing: the pool connects on checkout, as before the lean path existed."""

    def close(self) -> None:
        self.client.close()


class NoCommands:
    """``Commands`` where there is no such server: a strategy that keeps its values on memcached
    gets this as its Redis cache (every call raises, with ``reason``), never a silent stand-in."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def _refuse(self, *_: object, **__: object) -> Any:
        raise RuntimeError(f"no Redis here: {self.reason}")

    get = set = delete = pttl = rpush = blpop = pipeline = script = pubsub = _refuse

    def connect(self) -> None:
        """Nothing to connect."""

    def close(self) -> None:
        """Nothing to close."""
