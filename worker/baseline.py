"""The bare loops our generator is compared with: the same threads doing plain GETs, nothing else.

Benchmark 1 (bench/cluster.py, ``make bench``) runs these and a real all-hit trial on the same
workers and servers, side by side. ``client`` picks the loop: ``pooled`` (redis.Redis over a
shared pool: what the workers used before issue 18), ``lean`` (the product's lean path,
model.lean: a connection owned by each thread, GET packed once) or ``socket`` (a plain socket
and a ``hiredis.Reader``, no client library at all: the Python floor on this machine).
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import hiredis

from model.http.request import RequestBytes
from model.http.target import HttpTarget
from model.services import RedisPath, Services, redis_commands

CLIENTS = (RedisPath.POOLED.value, RedisPath.LEAN.value, "socket")
HTTP_SOCKET = "http-socket"  # benchmark 8's floor: GETs of an HTTP target on a plain socket
_KEYS = {"clients", "key", "start_ns", "seconds"}
Loop = Callable[[int], int]  # until this wall-clock instant (ns): GETs done


class InvalidBaseline(ValueError):
    """Arguments of the baseline task out of range."""


@dataclass(frozen=True)
class BaselineSpec:
    clients: int
    key: str
    start_ns: int
    seconds: float
    client: str = RedisPath.POOLED.value
    http: HttpTarget | None = None  # client http-socket: the target (its JSON on the wire)

    @classmethod
    def from_json(cls, data: object) -> BaselineSpec:
        if not isinstance(data, Mapping) or not _KEYS <= set(data) <= _KEYS | {"client", "http"}:
            raise InvalidBaseline("expected an object with clients, key, start_ns, seconds "
                                  "(and optionally client, http)")
        try:
            http = HttpTarget.from_json(data["http"]) if data.get("http") is not None else None
        except ValueError as exc:
            raise InvalidBaseline(f"http: {exc}") from None
        spec = cls(data["clients"], data["key"], data["start_ns"], data["seconds"],
                   data.get("client", RedisPath.POOLED.value), http)
        spec.check()
        return spec

    def check(self) -> None:
        """InvalidBaseline naming the first field out of range."""
        spec = self
        if not (isinstance(spec.clients, int) and 1 <= spec.clients <= 10_000):
            raise InvalidBaseline("clients must be an int in [1, 10000]")
        if not (isinstance(spec.seconds, int | float) and 0 < spec.seconds <= 600):
            raise InvalidBaseline("seconds must be in (0, 600]")
        if not (isinstance(spec.key, str) and 0 < len(spec.key) <= 200):
            raise InvalidBaseline("key must be a string of 1 to 200 characters")
        if not isinstance(spec.start_ns, int):
            raise InvalidBaseline("start_ns must be an int")
        if spec.client not in (*CLIENTS, HTTP_SOCKET):
            raise InvalidBaseline(f"client must be one of {'|'.join((*CLIENTS, HTTP_SOCKET))}")
        if (spec.client == HTTP_SOCKET) != (spec.http is not None):
            raise InvalidBaseline(f"client {HTTP_SOCKET} goes with http (a target), and only it")
        if spec.http is not None and spec.http.scheme != "http":
            raise InvalidBaseline(f"client {HTTP_SOCKET} speaks plain http only")


def _pack(*args: str) -> bytes:
    """``hiredis.pack_command`` (its stub types the command as a 1-tuple)."""
    packed: bytes = hiredis.pack_command(args)  # type: ignore[arg-type]
    return packed


def _socket_call(sock: socket.socket, reader: hiredis.Reader, packed: bytes) -> Any:
    """Send one packed command, read its whole reply (the setup commands of the floor loop)."""
    sock.sendall(packed)
    while (reply := reader.gets()) is False:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("the cache closed the connection")
        reader.feed(data)
    if isinstance(reply, hiredis.ReplyError):
        raise reply
    return reply


def socket_loop(url: str, key: str) -> Loop:
    """The floor: one socket per thread, ``GET key`` packed once, replies parsed by hiredis."""
    parts = urlsplit(url)

    def run(end_ns: int) -> int:
        sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 2.0)
        sock.settimeout(None)  # blocking: a socket with a Python timeout polls before each send and recv
        reader = hiredis.Reader()
        try:
            if parts.password:
                _socket_call(sock, reader, _pack("AUTH", parts.password))
            if parts.path.strip("/") not in ("", "0"):
                _socket_call(sock, reader, _pack("SELECT", parts.path.strip("/")))
            packed = _pack("GET", key)
            send, recv, feed, gets = sock.sendall, sock.recv, reader.feed, reader.gets
            n = 0
            while time.time_ns() < end_ns:
                send(packed)
                while gets() is False:
                    feed(recv(65536))
                n += 1
            return n
        finally:
            sock.close()

    return run


def response_length(sock: socket.socket, request: bytes) -> int:
    """Send ``request`` once and read its whole response: its length in bytes (the head, up to
    the blank line, and a body of the Content-Length it names)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        if not (chunk := sock.recv(65536)):
            raise ConnectionError("the server closed the connection")
        data += chunk
    head = data[:data.index(b"\r\n\r\n") + 4]
    found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if found is None:
        raise ConnectionError("the floor needs a response with a Content-Length")
    length = len(head) + int(found.group(1))
    while len(data) < length:
        data += sock.recv(65536)
    return length


def http_socket_loop(target: HttpTarget, key: str) -> Loop:
    """The HTTP floor: one plain socket per thread, the GET built once, each response read to
    its known length (learnt from the first); no parser, no timeout, no row: the most a Python
    thread does for one HTTP request here (plain http only)."""
    request = RequestBytes(target)(key)

    def run(end_ns: int) -> int:
        sock = socket.create_connection((target.host, target.port), target.connect_timeout_s)
        try:
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            length = response_length(sock, request)
            send, recv = sock.sendall, sock.recv
            n = 0
            while time.time_ns() < end_ns:
                send(request)
                got = 0
                while got < length:
                    if not (chunk := recv(65536)):
                        raise ConnectionError("the server closed the connection")
                    got += len(chunk)
                n += 1
            return n
        finally:
            sock.close()

    return run


def _loops(spec: BaselineSpec, services: Services) -> tuple[Loop, Callable[[], None]]:
    """The per-thread loop of ``spec.client`` and what closes its connections afterwards."""
    if spec.http is not None:
        return http_socket_loop(spec.http, spec.key), lambda: None
    if spec.client == "socket":
        return socket_loop(services.cache_url, spec.key), lambda: None
    cache = redis_commands(RedisPath(spec.client), services.cache_url, spec.clients)
    get, key = cache.get, spec.key

    def run(end_ns: int) -> int:
        n = 0
        while time.time_ns() < end_ns:
            get(key)
            n += 1
        return n

    return run, cache.close


def run_baseline(spec: BaselineSpec, services: Services) -> dict[str, Any]:
    """GET ``key`` in a loop on ``clients`` threads from ``start_ns`` for ``seconds``."""
    loop, close = _loops(spec, services)
    end_ns = spec.start_ns + int(spec.seconds * 1e9)
    counts = [0] * spec.clients
    errors: list[BaseException] = []
    gate = threading.Event()

    def thread(i: int) -> None:
        gate.wait()
        try:
            counts[i] = loop(end_ns)
        except Exception as exc:  # noqa: BLE001 - reported: a failing baseline is no baseline
            errors.append(exc)

    threads = [threading.Thread(target=thread, args=(i,), daemon=True) for i in range(spec.clients)]
    for t in threads:
        t.start()
    time.sleep(max(0.0, (spec.start_ns - time.time_ns()) / 1e9))
    gate.set()
    for t in threads:
        t.join(timeout=spec.seconds + 30)
    close()
    if errors:
        raise RuntimeError(f"{len(errors)} baseline threads failed") from errors[0]
    return {"requests": sum(counts), "seconds": spec.seconds}
