"""A lean HTTP/1.1 keep-alive client: one connection per client thread, httptools parsing.

Each client thread owns one ``HttpConnection`` for the whole trial. A GET's request bytes are
built once per key and kept (``RequestBytes``, shared by a worker's connections, bounded); the
response is parsed by httptools (llhttp, C) with callbacks that keep only what a row needs.

Failure semantics, each a raised exception (the caller's error row), never a hang:
- a kept-alive connection the server closed before any byte of the response came (an idle
  timeout, a restart) is opened again and the GET sent once more (it is idempotent); only once;
- a read past ``read_timeout_s`` or a connect past ``connect_timeout_s`` is a ``TimeoutError``
  naming the timeout; a refused connect a ``ConnectionRefusedError``, a reset a
  ``ConnectionResetError``, a response cut short ``ResponseIncomplete`` (all ConnectionErrors);
- a status of 400 or above is an ``HttpStatusError`` (the response was read whole first, so the
  connection stays usable).
Any failure but a status closes the connection; the next GET connects again.

Plain http sets the read timeout as the socket's SO_RCVTIMEO/SO_SNDTIMEO, not as Python's
socket timeout: that one polls before every recv, one system call more per request.
https uses Python's (the ssl module handles a timeout in the middle of a record).
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading

import httptools

from model.http.request import RequestBytes
from model.http.response import (
    HttpProtocolError,
    HttpStatusError,
    Response,
    ResponseIncomplete,
    parsed,
)
from model.http.target import HttpTarget

RECV_BYTES = 65536


def tls_context(verify: bool) -> ssl.SSLContext:
    """The default context (the system's CAs, or SSL_CERT_FILE's); ``verify`` False: no
    certificate or host name check (``--http-insecure``)."""
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class ClosedBeforeResponse(Exception):
    """The server closed the connection before any byte of the response (maybe retried)."""

    def __init__(self, error: ConnectionError) -> None:
        super().__init__(str(error))
        self.error = error


def connect_timeout(where: str, timeout_s: float) -> TimeoutError:
    return TimeoutError(f"connect to {where}: no answer within {timeout_s * 1000:g} ms "
                        "(connect timeout)")


def refused(where: str, exc: ConnectionRefusedError) -> ConnectionRefusedError:
    return ConnectionRefusedError(exc.errno, f"connect to {where} refused")


def read_timeout(where: str, timeout_s: float) -> TimeoutError:
    return TimeoutError(f"no response from {where} within {timeout_s * 1000:g} ms (read timeout)")


def cut_short(where: str, got: int) -> Exception:
    """The server at ``where`` closed the connection after ``got`` bytes of the response (none:
    maybe an idle kept-alive connection it closed, which the caller may retry once)."""
    if got == 0:
        return ClosedBeforeResponse(ResponseIncomplete(f"{where} closed the connection before "
                                                       "its response"))
    return ResponseIncomplete(f"{where} closed the connection after {got} bytes of its response")


def broken(where: str, got: int, exc: BrokenPipeError | ConnectionResetError) -> Exception:
    """A reset or a broken pipe after ``got`` bytes of the response, its type kept (none: as
    ``cut_short``, maybe retried once)."""
    if got == 0:
        return ClosedBeforeResponse(type(exc)(exc.errno, f"{where} closed the connection "
                                                         "before its response"))
    return type(exc)(exc.errno, f"{where} reset the connection after {got} bytes of its response")


class KeptAlive:
    """What a keep-alive connection holds on either driver (this module's threads,
    worker.aio.http's coroutines): its target, the request bytes, the TLS context, counters."""

    def __init__(self, target: HttpTarget, requests: RequestBytes | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        self.target = target
        self.requests = requests or RequestBytes(target)
        self._context = context or (tls_context(target.verify) if target.scheme == "https" else None)
        self._where = f"{target.host}:{target.port}"
        self.connects = 0  # connections opened (one, for a whole trial, when all goes well)
        self.reconnects = 0  # of them, reopened after the server closed a kept-alive one
        self._served = 0  # responses on the open connection


class HttpConnection(KeptAlive):
    """One keep-alive connection to ``target``, owned by one thread (see the module docstring)."""

    def __init__(self, target: HttpTarget, requests: RequestBytes | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        super().__init__(target, requests, context)
        self._sock: socket.socket | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._done = self._keep = False
        self._got = 0  # bytes of the response received so far

    # -- the parser's one callback (httptools calls it while ``feed_data`` runs): the message is
    # whole. The head's few headers a row needs and the body are read from the received bytes
    # (``_finish``), not by a Python call per header and per body piece: with 25 threads a
    # process, every microsecond a thread holds the GIL after its recv is a wait for the others.
    def on_message_complete(self) -> None:
        self._done = True
        self._keep = self._parser.should_keep_alive()  # type: ignore[union-attr]  # while the message is current

    # -- the connection
    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        """Open the connection now (before a trial's start instant), if it is not open."""
        if self._sock is None:
            self._open()

    def _open(self) -> socket.socket:
        target = self.target
        try:
            sock = socket.create_connection((target.host, target.port), target.connect_timeout_s)
        except TimeoutError:
            raise connect_timeout(self._where, target.connect_timeout_s) from None
        except ConnectionRefusedError as exc:
            raise refused(self._where, exc) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=target.host)
                sock.settimeout(target.read_timeout_s)
            else:
                sock.settimeout(None)
                whole, part = divmod(round(target.read_timeout_s * 1e6), 1_000_000)
                limit = struct.pack("ll", whole, part)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
        except TimeoutError:
            sock.close()
            raise TimeoutError(f"TLS handshake with {self._where}: not done within "
                               f"{target.connect_timeout_s * 1000:g} ms (connect timeout)") from None
        except BaseException:
            sock.close()
            raise
        self._sock, self._served = sock, 0
        self._parser = httptools.HttpResponseParser(self)
        self.connects += 1
        return sock

    def close(self) -> None:
        sock, self._sock, self._parser = self._sock, None, None
        if sock is not None:
            sock.close()

    # -- requests
    def get(self, key: str) -> Response:
        """GET the target's path for ``key`` (see the module docstring for what raises). A
        kept-alive connection's GET goes straight to the exchange: the few calls fewer are GIL
        time the other client threads of the process do not wait for."""
        request = self.requests.built.get(key) or self.requests(key)
        sock = self._sock
        if sock is None or not self._served:
            return self.send(request)
        try:
            return self._exchange(sock, request)
        except ClosedBeforeResponse:
            self.close()
        return self._reconnect(request)

    def send(self, request: bytes) -> Response:
        """Send prebuilt GET bytes, read the whole response."""
        sock = self._sock or self._open()
        reused = self._served > 0
        try:
            return self._exchange(sock, request)
        except ClosedBeforeResponse as closed:
            self.close()
            if not reused:
                raise closed.error from None
        return self._reconnect(request)

    def _reconnect(self, request: bytes) -> Response:
        """A kept-alive connection the server closed: one new connection, the request again (a
        new connection that fails is the request's error)."""
        self.reconnects += 1
        try:
            return self._exchange(self._open(), request)
        except ClosedBeforeResponse as closed:
            self.close()
            raise closed.error from None

    def _exchange(self, sock: socket.socket, request: bytes) -> Response:
        """One request and its response. The common case, a response in one recv, runs without
        a loop and with one scan of its head: every line here is GIL time of a client thread."""
        self._done, self._got = False, 0
        try:
            sock.sendall(request)
            raw = sock.recv(RECV_BYTES)
            if not raw:
                raise self._cut()
            self._got = len(raw)
            self._parser.feed_data(raw)  # type: ignore[union-attr]
            if not self._done:
                raw = self._rest(sock, raw)
        except ClosedBeforeResponse:
            raise
        except Exception as exc:  # noqa: BLE001 - converted (or itself) and raised
            raise self._failure(exc) from None
        except BaseException:
            self.close()
            raise
        return self._response(raw)

    def _response(self, raw: bytes) -> Response:
        """The response ``raw`` holds whole (the parser found it valid)."""
        status = self._parser.get_status_code()  # type: ignore[union-attr]
        response = parsed(status, raw)
        self._served += 1
        if not self._keep:  # Connection: close, or HTTP/1.0
            self.close()
        if status >= 400:
            raise HttpStatusError.of(response)
        return response

    def _rest(self, sock: socket.socket, first: bytes) -> bytes:
        """The rest of a response that did not come in one recv; all of it, joined."""
        chunks = [first]
        recv, feed = sock.recv, self._parser.feed_data  # type: ignore[union-attr]
        while not self._done:
            data = recv(RECV_BYTES)
            if not data:
                raise self._cut()
            self._got += len(data)
            chunks.append(data)
            feed(data)
        return b"".join(chunks)

    def _cut(self) -> Exception:
        """The server closed the connection after ``_got`` bytes of the response."""
        return cut_short(self._where, self._got)

    def _failure(self, exc: Exception) -> Exception:
        """What a failed exchange raises; the connection is closed."""
        got = self._got
        self.close()
        if isinstance(exc, BrokenPipeError | ConnectionResetError):
            return broken(self._where, got, exc)
        if isinstance(exc, TimeoutError | BlockingIOError):  # BlockingIOError: SO_RCVTIMEO ran out
            return read_timeout(self._where, self.target.read_timeout_s)
        if isinstance(exc, httptools.HttpParserError):
            return HttpProtocolError(f"{self._where} sent no valid HTTP/1.1 response: {exc}")
        return exc

class Connections:
    """The connections of one worker's client threads to one target: each thread's own,
    opened on its first use (or by ``connect`` before the start instant), all closed at the
    trial's end."""

    def __init__(self, target: HttpTarget) -> None:
        self.target = target
        self.requests = RequestBytes(target)
        self._context = tls_context(target.verify) if target.scheme == "https" else None
        self._local = threading.local()
        self._all: list[HttpConnection] = []
        self._mutex = threading.Lock()

    def mine(self) -> HttpConnection:
        """The calling thread's connection (made on its first call, not yet connected)."""
        try:
            conn: HttpConnection = self._local.conn
        except AttributeError:
            conn = self._local.conn = HttpConnection(self.target, self.requests, self._context)
            with self._mutex:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._mutex:
            every, self._all = self._all, []
        for conn in every:
            conn.close()

    def __len__(self) -> int:
        return len(self._all)
