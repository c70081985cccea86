"""The lean command path: each client thread owns one redis-py ``Connection`` per server.

A pooled ``redis.Redis`` spends most of a GET's CPU outside the socket: the pool checkout (a
lock and a ``can_read`` poll), the command packing, the reply callbacks (issue 18 measured
15-16k GETs/s pooled against 37-38k this way, 8 processes x 25 threads on 2 cores). Here a
thread's connection is created on its first command and kept for the trial (``close`` ends
them all); ``GET key`` is packed once per key; a command is sent on the connection's socket and
its reply read by the connection's own parser (hiredis when installed), so the replies are
redis-py's. ``_round_trip`` does what ``send_packed_command`` + ``read_response`` do around
them, without their layers: with 25 threads per process (each layer holds the GIL longer after
every reply) they cost about 15 % of the pinned loop's rate (17.4k GETs/s against 20.5k). Failure
semantics are the pooled client's: a dropped connection or a timeout raises redis-py's
ConnectionError / TimeoutError, the connection is closed, and the next command connects again.
Exhaustion too: more threads than ``max_connections`` raise MaxConnectionsError, never wait.

A plain TCP connection's socket timeout is kept by the kernel (SO_RCVTIMEO / SO_SNDTIMEO on a
blocking socket), not by Python: a socket with a Python timeout is non-blocking and polls before
every send and every recv, two system calls more per GET (on this project's VM 5-7 us of CPU a
request at 8 x 25 threads, 10-17 % of the plain-socket loop's rate). A kernel timeout surfaces
as EAGAIN (BlockingIOError), which is turned into redis-py's TimeoutError with its words.
"""

from __future__ import annotations

import functools
import hashlib
import socket
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

import redis
from redis._parsers.hiredis import NOT_ENOUGH_DATA, _HiredisParser
from redis._parsers.socket import SERVER_CLOSED_CONNECTION_ERROR
from redis.client import PubSub
from redis.exceptions import MaxConnectionsError, NoScriptError, ResponseError

from strategies.commands import Arg, Command, Script, set_command

# A connection idle this long is checked before use, as the pool checks each checkout: a server
# that restarted meanwhile closed it, and the command would fail on a dead socket. Client threads
# hitting the cache never idle this long; a lock-store connection between two misses does.
IDLE_CHECK_S = 0.2
PACKED_GETS = 100_000  # ``GET key`` packed once per key, up to this many keys
SHARED_CONNECTIONS = 4  # two-level's listener: off the request path, pooled


class Connection(Protocol):
    """The part of redis-py's ``Connection`` used here, typed (redis-py leaves it untyped)."""

    _sock: socket.socket | None
    _parser: Any
    host: str
    port: int

    @property
    def is_connected(self) -> bool: ...

    def can_read(self) -> bool: ...

    def connect(self) -> None: ...

    def disconnect(self) -> None: ...

    def pack_command(self, *args: Arg) -> list[bytes]: ...

    def pack_commands(self, commands: Sequence[Command]) -> list[bytes]: ...

    def send_packed_command(self, command: Sequence[bytes], check_health: bool) -> None: ...

    def read_response(self) -> Any: ...


class _Owned:
    __slots__ = ("conn", "used")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.used = time.monotonic()


def _ready(conn: Connection) -> None:
    """Drop an idle connection the server closed (or that holds stray data), as the pool's
    checkout does; the next command connects again and any failure of that is raised."""
    if not conn.is_connected:
        return
    try:
        stale = conn.can_read()
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        stale = True
    if stale:
        conn.disconnect()


def _round_trip(conn: Connection, packed: bytes) -> Any:
    """Send ``packed``, read its reply: redis-py's ``send_packed_command`` + ``read_response``
    (same exceptions, same messages, the connection closed on any failure), one frame deep."""
    if conn._sock is None:
        conn.connect()
    sent = False
    try:
        conn._sock.sendall(packed)  # type: ignore[union-attr]
        sent = True
        reply = conn._parser.read_response()
    except BaseException as exc:
        conn.disconnect()
        error = _as_redis_error(exc, conn, sent)
        if error is exc:
            raise
        raise error from None
    if isinstance(reply, ResponseError):
        raise reply
    return reply


def _get_round_trip(conn: Connection, packed: bytes) -> bytes | None:
    """A GET's round trip on hiredis's reader and the parser's buffer directly: what
    ``_round_trip`` does, without ``read_response``'s and ``read_from_socket``'s frames (their
    checks for push messages, custom timeouts and decoding, none of which a GET on this
    connection has). With 25 threads a process, each frame a thread holds the GIL for is paid
    again in the others' waits. The same exceptions and messages as ``_round_trip``; any other
    parser (no hiredis installed) takes ``_round_trip`` itself."""
    parser = conn._parser
    sock = conn._sock
    if sock is None or parser.__class__ is not _HiredisParser or parser._reader is None:
        return _round_trip(conn, packed)  # type: ignore[no-any-return]
    reader, buffer = parser._reader, parser._buffer
    sent = False
    try:
        sock.sendall(packed)
        sent = True
        reply = reader.gets()
        while reply is NOT_ENOUGH_DATA:
            size = sock.recv_into(buffer)
            if not size:
                raise redis.ConnectionError(SERVER_CLOSED_CONNECTION_ERROR)
            reader.feed(buffer, 0, size)  # type: ignore[arg-type]  # hiredis reads any buffer
            reply = reader.gets()
    except BaseException as exc:
        conn.disconnect()
        error = _as_redis_error(exc, conn, sent)
        if error is exc:
            raise
        raise error from None
    if reply is None or reply.__class__ is bytes:
        return reply
    raise _error_reply(conn, reply)


def _error_reply(conn: Connection, reply: object) -> BaseException:
    """A GET's reply that is no value: an error reply, as ``read_response`` hands it on (a
    LOADING reply is a ConnectionError, and the connection is closed, as it raises one)."""
    if isinstance(reply, redis.ConnectionError):
        conn.disconnect()
    return reply if isinstance(reply, BaseException) else ResponseError(f"GET replied {reply!r}")


def _as_redis_error(exc: BaseException, conn: Connection, reading: bool) -> BaseException:
    """The error redis-py's connection raises for ``exc`` (anything but a socket error: itself)."""
    if isinstance(exc, TimeoutError) or _timed_out(exc):  # Python's or the kernel's timeout
        return redis.TimeoutError(f"Timeout {'reading from' if reading else 'writing to'} socket")
    if reading:
        if isinstance(exc, OSError):
            where = f"{conn.host}:{conn.port}"
            return redis.ConnectionError(f"Error while reading from {where} : {exc.args}")
        return exc
    if isinstance(exc, OSError):
        errno, message = ("UNKNOWN", exc.args[0]) if len(exc.args) == 1 else exc.args[:2]
        return redis.ConnectionError(f"Error {errno} while writing to socket. {message}.")
    return exc


class KernelTimeoutConnection(redis.Connection):
    """A plain TCP connection whose socket blocks, its ``socket_timeout`` kept by the kernel
    (see the module's docstring). redis-py sees a socket without timeout: its parser's custom
    timeouts (``can_read``'s zero) are restored to blocking, not to a polled timeout."""

    def __init__(self, **kwargs: Any) -> None:
        self.kernel_timeout_s: float | None = kwargs.get("socket_timeout")
        super().__init__(**{**kwargs, "socket_timeout": None})  # type: ignore[no-untyped-call, unused-ignore]

    def _connect(self) -> socket.socket:
        sock: socket.socket = super()._connect()  # type: ignore[no-untyped-call, unused-ignore]
        if self.kernel_timeout_s:
            whole, part = divmod(round(self.kernel_timeout_s * 1e6), 1_000_000)
            limit = struct.pack("ll", whole, part)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
        return sock


def _kernel_timed(pool: redis.ConnectionPool) -> functools.partial[Connection]:
    """How this path makes its connections: plain TCP ones kernel-timed, any other kind (TLS,
    a unix socket, a subclass) as the pool would."""
    kind = pool.connection_class
    if kind is redis.Connection:
        kind = KernelTimeoutConnection
    return functools.partial(kind, **pool.connection_kwargs)


def _timed_out(exc: BaseException) -> bool:
    """A kernel timeout, raw (EAGAIN on a blocking socket) or as redis-py's parser words it
    (``Error while reading from socket: (11, ...)``, raised while handling the EAGAIN)."""
    return isinstance(exc, BlockingIOError) or (
        isinstance(exc, redis.ConnectionError) and isinstance(exc.__context__, BlockingIOError))


class LeanCommands:
    """``Commands`` on a connection owned by the calling thread (see the module's docstring)."""

    def __init__(self, pool: redis.ConnectionPool, max_connections: int) -> None:
        """``pool`` says how to connect (its class and arguments); its own connections serve
        only what is shared (``pubsub``)."""
        self._make = _kernel_timed(pool)
        self._shared = redis.Redis(connection_pool=pool)
        self._max = max_connections
        self._local = threading.local()
        self._owned: list[Connection] = []
        self._mutex = threading.Lock()
        self._gets: dict[str, bytes] = {}

    @classmethod
    def from_url(cls, url: str, max_connections: int, **kwargs: Any) -> LeanCommands:
        pool = redis.ConnectionPool.from_url(url, max_connections=SHARED_CONNECTIONS, **kwargs)
        return cls(pool, max_connections)

    def _conn(self) -> Connection:
        try:
            owned: _Owned = self._local.owned
        except AttributeError:
            owned = self._local.owned = _Owned(self._open())
        now = time.monotonic()
        if now - owned.used > IDLE_CHECK_S:
            _ready(owned.conn)
        owned.used = now
        return owned.conn

    def _open(self) -> Connection:
        with self._mutex:
            if len(self._owned) >= self._max:
                raise MaxConnectionsError("Too many connections")
            conn: Connection = self._make()
            self._owned.append(conn)
        return conn

    def call(self, *args: Arg) -> Any:
        """One command on this thread's connection; its reply as redis-py's parser gives it."""
        conn = self._conn()
        return _round_trip(conn, b"".join(conn.pack_command(*args)))

    def get(self, key: str) -> bytes | None:
        conn = self._conn()
        packed = self._gets.get(key)
        if packed is None:
            packed = b"".join(conn.pack_command("GET", key))
            if len(self._gets) < PACKED_GETS:
                self._gets[key] = packed
        return _get_round_trip(conn, packed)

    def set(self, key: str, value: bytes, *, px: int | None = None, pxat: int | None = None,
            nx: bool = False) -> bool:
        return self.call(*set_command(key, value, px, pxat, nx)) is not None

    def delete(self, *keys: str) -> int:
        return int(self.call("DEL", *keys))

    def pttl(self, key: str) -> int:
        return int(self.call("PTTL", key))

    def rpush(self, key: str, value: bytes) -> int:
        return int(self.call("RPUSH", key, value))

    def blpop(self, key: str, timeout_s: float) -> bytes | None:
        reply: list[bytes] | None = self.call("BLPOP", key, timeout_s)
        return None if reply is None else reply[1]

    def pipeline(self, *commands: Command, transaction: bool = False) -> None:
        """Every reply is read off the socket before the first error is raised: the connection
        stays in step for the next command."""
        sent = [("MULTI",), *commands, ("EXEC",)] if transaction else list(commands)
        conn = self._conn()
        first: ResponseError | None = None
        reply: Any = None
        reading = False
        try:
            conn.send_packed_command(conn.pack_commands(sent), False)
            reading = True
            for _ in sent:
                try:
                    reply = conn.read_response()
                except ResponseError as exc:
                    first = first or exc
        except redis.ConnectionError as exc:  # redis-py's connection closed itself already
            if not _timed_out(exc):
                raise
            raise _as_redis_error(exc, conn, reading) from None
        if transaction and first is None and isinstance(reply, list):
            first = next((r for r in reply if isinstance(r, ResponseError)), None)
        if first is not None:
            raise first

    def script(self, source: str) -> Script:
        return _LeanScript(self, source)

    def pubsub(self) -> PubSub:
        pubsub: PubSub = self._shared.pubsub(  # type: ignore[no-untyped-call, unused-ignore]
            ignore_subscribe_messages=True)
        return pubsub

    def connect(self) -> None:
        conn = self._conn()
        if not conn.is_connected:
            conn.connect()

    def close(self) -> None:
        """Close every thread's connection and the shared pool (the trial is over)."""
        with self._mutex:
            owned, self._owned = self._owned, []
        for conn in owned:
            conn.disconnect()
        self._shared.close()


class _LeanScript:
    """EVALSHA with the script's digest; on NOSCRIPT (a restarted or flushed server) the script
    is loaded and run again, as redis-py's ``Script`` does."""

    def __init__(self, commands: LeanCommands, source: str) -> None:
        self._commands = commands
        self._source = source
        self._sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, keys: list[str], args: list[Arg]) -> Any:
        try:
            return self._commands.call("EVALSHA", self._sha, len(keys), *keys, *args)
        except NoScriptError:
            self._commands.call("SCRIPT", "LOAD", self._source)
            return self._commands.call("EVALSHA", self._sha, len(keys), *keys, *args)
