"""The coroutine clients' HTTP (``--client-driver asyncio`` in an HTTP trial: an app tier, an HTTP
cache in front of it, a black-box service): one keep-alive HTTP/1.1 connection a client, an
``asyncio.Protocol`` whose bytes httptools parses, with model.http.client's semantics and its
error texts: a kept-alive connection the server closed before answering is opened again and the
GET sent once more; read and connect timeouts name themselves; a status of 400 or above is an
``HttpStatusError`` raised after the response was read whole (the connection stays in step).

The read timeout costs no timer a request: a connection keeps one timer at a time, armed at a
request's deadline; when it fires it fails the request in flight if that request's deadline has
passed, else arms itself again for it. A request answered in time only moves the deadline, so a
client with a 5 s timeout wakes the loop once every 5 s, not once a request (25 clients at 2k
requests/s each would push and cancel 50k timers a second on the loop's heap).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import cast

import httptools

from model.http.client import (
    ClosedBeforeResponse,
    KeptAlive,
    broken,
    connect_timeout,
    cut_short,
    read_timeout,
    refused,
)
from model.http.request import RequestBytes
from model.http.response import HttpProtocolError, HttpStatusError, Response, parsed
from model.http.target import HttpTarget
from strategies import Outcome, Probe
from worker.http_fetch import meaning, note_failure


class _Wire(asyncio.Protocol):
    """One opened connection: its transport, its parser and the response in flight. A new
    connection is a new wire, so a late callback of a closed one touches nothing current."""

    def __init__(self, where: str, timeout_s: float) -> None:
        self._where, self._timeout_s = where, timeout_s
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._chunks: list[bytes] = []
        self._got = 0  # bytes of the response in flight received so far
        self._done = False
        self.status, self.keep = 0, False
        self._deadline = 0.0  # loop time by which the response in flight is due; 0: none
        self._timer: asyncio.TimerHandle | None = None

    # -- the transport's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream transport

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():  # bytes nobody asked for: out of step, never reused
            self.close()
            return
        self._got += len(data)
        self._chunks.append(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HttpProtocolError(f"{self._where} sent no valid HTTP/1.1 response: {exc}"))
            return
        if self._done:
            self._deadline = 0.0
            waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, BrokenPipeError | ConnectionResetError):
            self._fail(broken(self._where, self._got, exc))
        else:
            self._fail(exc or cut_short(self._where, self._got))

    # -- the parser's callback (while feed_data runs): the message is whole
    def on_message_complete(self) -> None:
        self._done = True
        self.status = self._parser.get_status_code()
        self.keep = self._parser.should_keep_alive()

    # -- the exchange
    async def exchange(self, request: bytes) -> bytes:
        """Send ``request``; the whole response as received."""
        transport = self.transport
        if transport is None:  # closed while idle (the server's keep-alive timeout)
            raise cut_short(self._where, 0)
        self._done, self._got, self._chunks = False, 0, []
        waiter = self._waiter = self._loop.create_future()
        transport.write(request)
        self._deadline = deadline = self._loop.time() + self._timeout_s
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._check)
        try:
            await waiter
        except asyncio.CancelledError:
            self.close()
            raise
        chunks = self._chunks
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _check(self) -> None:
        """The timer: the request in flight is late, or the timer follows its deadline."""
        self._timer = None
        deadline = self._deadline
        if not deadline or self.transport is None:
            return
        if self._loop.time() >= deadline:
            self._fail(read_timeout(self._where, self._timeout_s))
        else:
            self._timer = self._loop.call_at(deadline, self._check)

    def _fail(self, error: Exception) -> None:
        """The response in flight (if any) fails with ``error``; the connection is closed."""
        waiter = self._waiter
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def close(self) -> None:
        transport, self.transport, self._deadline = self.transport, None, 0.0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if transport is not None:
            transport.close()


class AsyncHttpConnection(KeptAlive):
    """One coroutine client's keep-alive connection to ``target`` (see the module docstring)."""

    def __init__(self, target: HttpTarget, requests: RequestBytes | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        super().__init__(target, requests, context)
        self._wire: _Wire | None = None

    @property
    def connected(self) -> bool:
        return self._wire is not None and self._wire.transport is not None

    async def connect(self) -> None:
        """Open the connection now (before a trial's start instant), if it is not open."""
        if self._wire is None:
            await self._open()

    async def _open(self) -> _Wire:
        target, loop = self.target, asyncio.get_running_loop()
        wire = _Wire(self._where, target.read_timeout_s)
        tls = self._context
        try:
            await asyncio.wait_for(loop.create_connection(
                lambda: wire, target.host, target.port, ssl=tls,
                server_hostname=target.host if tls is not None else None), target.connect_timeout_s)
        except TimeoutError:
            raise connect_timeout(self._where, target.connect_timeout_s) from None
        except ConnectionRefusedError as exc:
            raise refused(self._where, exc) from None
        self._wire, self._served = wire, 0
        self.connects += 1
        return wire

    def close(self) -> None:
        wire, self._wire = self._wire, None
        if wire is not None:
            wire.close()

    async def get(self, key: str) -> Response:
        """GET the target's path for ``key`` (see the module docstring for what raises)."""
        return await self.send(self.requests.built.get(key) or self.requests(key))

    async def send(self, request: bytes) -> Response:
        """Send prebuilt GET bytes, read the whole response."""
        wire = self._wire
        reused = wire is not None and self._served > 0
        try:
            if wire is None:
                wire = await self._open()
            raw = await wire.exchange(request)
        except ClosedBeforeResponse as closed:
            self.close()
            if not reused:
                raise closed.error from None
            raw, wire = await self._again(request)
        except BaseException:
            self.close()
            raise
        return self._response(wire, raw)

    async def _again(self, request: bytes) -> tuple[bytes, _Wire]:
        """A kept-alive connection the server closed: one new connection, the request again (a
        new connection that fails is the request's error)."""
        self.reconnects += 1
        try:
            wire = await self._open()
            return await wire.exchange(request), wire
        except ClosedBeforeResponse as closed:
            self.close()
            raise closed.error from None
        except BaseException:
            self.close()
            raise

    def _response(self, wire: _Wire, raw: bytes) -> Response:
        response = parsed(wire.status, raw)
        self._served += 1
        if not wire.keep:  # Connection: close, or HTTP/1.0
            self.close()
        if response.status >= 400:
            raise HttpStatusError.of(response)
        return response


class HttpDriver:
    """What worker.aio.clients' requester awaits for an HTTP trial (``drivers[ep].fetch``): the
    GET on the client's own connection, the response's meaning in the row (worker.http_fetch)."""

    def __init__(self, conn: AsyncHttpConnection) -> None:
        self._get = conn.get

    async def fetch(self, _strategy: object, key: str, probe: Probe) -> Outcome:
        try:
            response = await self._get(key)
        except BaseException as exc:
            note_failure(exc, probe)
            raise
        return meaning(response, probe)
