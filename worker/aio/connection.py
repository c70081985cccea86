"""A lean asyncio Redis connection for the asyncio client driver: ``AsyncCommands`` on one
connection of its own (an ``asyncio.Protocol`` whose replies hiredis parses), each command a
future answered in order. No pool, no lock, no retry: a client is its connection's only user.

Failures are redis-py's exceptions, so the strategies' handling (a lock store that is down, a
cache error) and the rows' error types read as on the other paths: ``redis.ConnectionError``
(the connection could not open or was lost), ``redis.TimeoutError`` (no reply within the
threads' 2 s; the connection is closed, its replies would no longer match their commands),
``redis.ResponseError`` / ``NoScriptError`` (the server's error reply).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
from collections.abc import Sequence
from typing import Any, cast

import hiredis
import redis
import redis.exceptions
from redis.asyncio.connection import parse_url

from strategies.commands import Arg, Command
from strategies.drivers.aio import AsyncScript

TIMEOUT_S = 2.0  # connect and reply, as the threads' (model.services)


def _arg(value: Arg) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, float):
        return repr(value).encode()
    return str(value).encode()


def pack(args: Sequence[Arg]) -> bytes:
    """One command in RESP: an array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = _arg(arg)
        parts.append(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(parts)


def _error(reply: hiredis.ReplyError) -> redis.RedisError:
    text = str(reply)
    if text.startswith("NOSCRIPT"):
        return redis.exceptions.NoScriptError(text)
    return redis.ResponseError(text)


class _Protocol(asyncio.Protocol):
    """The connection: what was sent waits in order for its reply."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.pending: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._reader = hiredis.Reader()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's does not subclass asyncio.Transport: no isinstance)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        reader, pending = self._reader, self.pending
        reader.feed(data)
        while (reply := reader.gets()) is not False:
            future = pending.popleft()
            if future.done():  # its caller timed out (the connection is closing)
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(_error(reply))
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        while self.pending:
            future = self.pending.popleft()
            if not future.done():
                future.set_exception(redis.ConnectionError(f"connection lost: {exc or 'closed'}"))


class LeanAsyncCommands:
    """``AsyncCommands`` on one connection of its own, opened at ``connect`` or at first use."""

    def __init__(self, url: str) -> None:
        options = parse_url(url)
        self._host = str(options.get("host", "localhost"))
        self._port = int(options.get("port", 6379))
        self._db = int(options.get("db", 0) or 0)
        self._password = options.get("password")
        self._username = options.get("username")
        self._conn: _Protocol | None = None

    async def connect(self) -> None:
        if (self._conn is not None and self._conn.transport is not None
                and not self._conn.transport.is_closing()):
            return
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(TIMEOUT_S):
                _, conn = await loop.create_connection(_Protocol, self._host, self._port)
        except TimeoutError:
            raise redis.TimeoutError(f"Timeout connecting to {self._host}:{self._port}") from None
        except OSError as exc:
            raise redis.ConnectionError(f"Error connecting to {self._host}:{self._port}: "
                                        f"{exc}") from None
        self._conn = conn
        if self._password:
            auth = [self._username, self._password] if self._username else [self._password]
            await self.call("AUTH", *auth)
        if self._db:
            await self.call("SELECT", self._db)

    async def _send(self, packed: bytes, replies: int, timeout_s: float) -> list[Any]:
        conn = self._conn
        if conn is None or conn.transport is None or conn.transport.is_closing():
            await self.connect()
            conn = self._conn
        assert conn is not None and conn.transport is not None
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(replies)]
        conn.pending.extend(futures)
        conn.transport.write(packed)
        try:
            async with asyncio.timeout(timeout_s):
                return [await f for f in futures]
        except TimeoutError:
            self._drop()  # later replies would answer the wrong commands
            raise redis.TimeoutError("Timeout reading from socket") from None

    async def call(self, *args: Arg, timeout_s: float = TIMEOUT_S) -> Any:
        return (await self._send(pack(args), 1, timeout_s))[0]

    async def get(self, key: str) -> bytes | None:
        reply: bytes | None = await self.call("GET", key)
        return reply

    async def set(self, key: str, value: bytes, *, px: int | None = None,
                  pxat: int | None = None, nx: bool = False) -> bool:
        args: list[Arg] = ["SET", key, value]
        if px is not None:
            args += ["PX", px]
        if pxat is not None:
            args += ["PXAT", pxat]
        if nx:
            args.append("NX")
        return bool(await self.call(*args))

    async def delete(self, *keys: str) -> int:
        return int(await self.call("DEL", *keys))

    async def rpush(self, key: str, value: bytes) -> int:
        return int(await self.call("RPUSH", key, value))

    async def blpop(self, key: str, timeout_s: float) -> bytes | None:
        reply = await self.call("BLPOP", key, timeout_s, timeout_s=timeout_s + TIMEOUT_S)
        return None if reply is None else reply[1]

    async def pipeline(self, *commands: Command, transaction: bool = False) -> None:
        """The commands in one write; the first error reply raised (as redis-py's pipeline)."""
        sent: list[Sequence[Arg]] = list(commands)
        if transaction:
            sent = [("MULTI",), *sent, ("EXEC",)]
        replies = await self._send(b"".join(pack(c) for c in sent), len(sent), TIMEOUT_S)
        if transaction and isinstance(replies[-1], list):
            for reply in replies[-1]:
                if isinstance(reply, hiredis.ReplyError):
                    raise _error(reply)

    def script(self, source: str) -> AsyncScript:
        sha = hashlib.sha1(source.encode()).hexdigest()  # the name Redis gives the script

        async def run(keys: list[str], args: list[Arg]) -> Any:
            try:
                return await self.call("EVALSHA", sha, len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                return await self.call("EVAL", source, len(keys), *keys, *args)

        return run

    def _drop(self) -> None:
        """Close the connection now; the next command opens another."""
        if self._conn is not None and self._conn.transport is not None:
            self._conn.transport.close()
        self._conn = None

    async def close(self) -> None:
        self._drop()
