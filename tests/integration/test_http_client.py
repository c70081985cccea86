"""The HTTP clients against real servers: a static nginx started here (its access log names
each request's connection), and gunicorn serving tests/http_service.py. Every test runs twice:
on the client threads' connection (model.http.client) and on the coroutine clients' one
(worker.aio.http, driven from the test's thread on an event loop of its own): one semantics.

Keep-alive is observed from the server's side (nginx's ``$connection``, gunicorn's view of the
client's port), as are the retries (the service's own counter of each route)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.nginx_static import BODY, StaticNginx, nginx_binary, start_nginx
from coordinator.origin.check import counter_value
from coordinator.stack.processes import free_port
from model.http.client import HttpConnection
from model.http.request import RequestBytes
from model.http.response import CacheStatus, HttpStatusError, ResponseIncomplete
from model.http.target import HttpTarget, parse_header
from tests.http_service import COUNTER, STALL_S
from worker.aio.http import AsyncHttpConnection

pytestmark = pytest.mark.skipif(nginx_binary() is None,
                                reason="nginx is not installed (make test-deps installs it)")


@pytest.fixture(scope="module")
def nginx() -> Iterator[StaticNginx]:
    server = start_nginx(log=True)
    yield server
    server.stop()


class BlockingAsync:
    """worker.aio.http's connection with the threads' connection's calls, each run to its end on
    an event loop of its own."""

    def __init__(self, http: HttpTarget) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn = AsyncHttpConnection(http)

    def get(self, key: str) -> Any:
        return self.loop.run_until_complete(self.conn.get(key))

    def send(self, request: bytes) -> Any:
        return self.loop.run_until_complete(self.conn.send(request))

    def connect(self) -> None:
        self.loop.run_until_complete(self.conn.connect())

    def close(self) -> None:
        self.conn.close()
        self.loop.run_until_complete(asyncio.sleep(0))  # the transport's close callbacks

    def __getattr__(self, name: str) -> Any:  # connected, connects, reconnects, requests
        return getattr(self.conn, name)


Make = Callable[[HttpTarget], Any]


@pytest.fixture(params=["threads", "asyncio"])
def make(request: pytest.FixtureRequest) -> Iterator[Make]:
    """A connection of the driver under test; the asyncio ones' loops closed after the test."""
    made: list[BlockingAsync] = []

    def asyncio_connection(http: HttpTarget) -> BlockingAsync:
        made.append(BlockingAsync(http))
        return made[-1]

    yield HttpConnection if request.param == "threads" else asyncio_connection
    for conn in made:
        conn.close()
        conn.loop.close()


def target(base: str, path: str = "/k/{key}", **options: float) -> HttpTarget:
    return HttpTarget.parse(base + path, **options)  # type: ignore[arg-type]


def routed(base: str, route: str) -> int:
    try:
        return round(counter_value(f"{base}/metrics", COUNTER % route))
    except Exception:  # noqa: BLE001 - no sample of the route yet: none counted
        return 0


def test_many_gets_ride_one_connection_as_nginx_sees_it(make: Make, nginx: StaticNginx) -> None:
    conn = make(target(nginx.base))
    before = len(nginx.log_lines())
    for i in range(50):
        response = conn.get(f"key {i}/x")
        assert (response.status, response.body, response.body_bytes) == (200, BODY.encode(),
                                                                         len(BODY))
        assert (response.cache_status, response.age_s) == (CacheStatus.NONE, -1)
    conn.close()
    time.sleep(0.2)  # nginx writes its log line after the response
    lines = nginx.log_lines()[before:]
    assert len(lines) == 50 and len({line[0] for line in lines}) == 1, lines[:3]
    assert [int(line[1]) for line in lines] == list(range(1, 51))  # its requests, in order
    assert lines[0][3] == "/k/key%200%2Fx"  # the key percent-encoded into the path
    assert conn.connects == 1 and conn.reconnects == 0


def test_gunicorn_sees_one_client_port_for_every_get(make: Make, http_service: str) -> None:
    conn = make(target(http_service, "/peer/{key}"))
    ports = {conn.get(str(i)).body for i in range(20)}
    conn.close()
    assert len(ports) == 1 and next(iter(ports)).isdigit()


def test_a_kept_alive_connection_the_server_closed_is_reopened_once(make: Make) -> None:
    server = start_nginx(keepalive="300ms", log=True)
    try:
        conn = make(target(server.base))
        conn.get("a")
        time.sleep(0.8)  # nginx closes the idle connection after 300 ms
        assert conn.get("b").status == 200  # transparently on a new connection
        assert conn.connects == 2 and conn.reconnects == 1
        time.sleep(0.2)
        assert len({line[0] for line in server.log_lines()}) == 2
    finally:
        server.stop()


def test_a_fresh_connection_reset_is_not_retried_a_reused_one_once(make: Make, http_service: str) -> None:
    before = routed(http_service, "reset")
    fresh = make(target(http_service, "/reset/{key}"))
    with pytest.raises(ConnectionError):  # ConnectionResetError, or the close seen first
        fresh.get("k")
    assert routed(http_service, "reset") == before + 1 and not fresh.connected
    reused = make(target(http_service, "/reset/{key}"))
    reused.send(RequestBytes(target(http_service, "/items/{key}"))("k"))  # one answer on it
    with pytest.raises(ConnectionError):
        reused.get("k")
    assert routed(http_service, "reset") == before + 3  # the GET, and its one retry
    assert reused.reconnects == 1


def test_a_read_past_the_timeout_is_a_timeout_error_naming_it(make: Make, http_service: str) -> None:
    conn = make(target(http_service, "/slow/{key}", read_ms=200))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"within 200 ms \(read timeout\)"):
        conn.get("k")
    took = time.monotonic() - started
    assert 0.2 <= took < STALL_S  # gave up at its timeout, not when the answer came
    assert not conn.connected


def test_a_connect_past_the_timeout_is_a_timeout_error_naming_it(make: Make) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)  # never accepted: once its queue is full, further SYNs are dropped
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            fillers.append(filler)
            filler.connect_ex(("127.0.0.1", port))
        time.sleep(0.1)
        conn = make(target(f"http://127.0.0.1:{port}", connect_ms=300))
        started = time.monotonic()
        with pytest.raises(TimeoutError, match=r"no answer within 300 ms \(connect timeout\)"):
            conn.connect()
        assert time.monotonic() - started >= 0.3
    finally:
        for sock in (*fillers, listener):
            sock.close()


def test_a_refused_connect_is_a_connection_refused_error(make: Make) -> None:
    with pytest.raises(ConnectionRefusedError, match="refused"):
        make(target(f"http://127.0.0.1:{free_port()}")).get("k")


@pytest.mark.parametrize(("path", "says"), [("/status/404", "404 Not Found"),
                                            ("/status/503", "503 Service Temporarily Unavailable")])
def test_a_status_of_400_or_more_raises_with_it_and_keeps_the_connection(make: Make,
        nginx: StaticNginx, path: str, says: str) -> None:
    conn = make(target(nginx.base))
    with pytest.raises(HttpStatusError, match=f"^{says}$") as raised:
        conn.send(conn.requests.path(path))
    assert raised.value.response is not None and raised.value.response.status == int(says[:3])
    assert conn.get("after").status == 200 and conn.connects == 1  # read whole: still in step


def test_the_apps_error_is_appended_as_the_cause(make: Make, http_service: str) -> None:
    conn = make(target(http_service, "/headers/{key}?status=503&error=LockWaitTimeout:"
                                               "%20gave%20up%20after%20500%20ms"))
    with pytest.raises(HttpStatusError) as raised:
        conn.get("k")
    assert str(raised.value) == ("503 Service Unavailable (from LockWaitTimeout: gave up after "
                                 "500 ms)")


def test_the_cache_status_age_and_the_apps_headers_are_kept(make: Make, http_service: str) -> None:
    conn = make(target(http_service, "/headers/{key}?cache=stale&age=12&outcome=filled"
                                               "&version=7"))
    response = conn.get("k")
    assert (response.cache_status, response.age_s) == (CacheStatus.STALE, 12)
    assert response.headers == {"x-stampede-outcome": "filled", "x-stampede-version": "7"}


def test_a_chunked_body_is_decoded_and_the_connection_kept(make: Make, http_service: str) -> None:
    conn = make(target(http_service, "/headers/{key}?chunked=1&version=3"))
    for _ in range(3):
        response = conn.get("k")
        assert (response.body, response.body_bytes) == (b"echoed\n", 7)
        assert response.headers == {"x-stampede-version": "3"}
    assert conn.connects == 1


def test_request_headers_go_out_and_bad_ones_are_refused(http_service: str) -> None:
    header = parse_header("X-Stampede-Outcome:  waited ")
    assert header == ("X-Stampede-Outcome", "waited")
    built = RequestBytes(HttpTarget.parse(http_service + "/items/{key}", [header]))("k")
    assert built.endswith(b"\r\nX-Stampede-Outcome: waited\r\n\r\n")
    for bad in ("no colon", "Bad Name: v", "X-A: v\r\nX-Injected: 1", "Content-Length: 5"):
        with pytest.raises(ValueError):
            parse_header(bad)


def test_a_response_cut_short_is_response_incomplete(make: Make) -> None:
    """A server of a few lines: reads the GET, sends half a response, closes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    partial = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly a part"

    def serve() -> None:
        server, _ = listener.accept()
        server.recv(65536)
        server.sendall(partial)
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        conn = make(target(f"http://127.0.0.1:{listener.getsockname()[1]}"))
        with pytest.raises(ResponseIncomplete, match=f"after {len(partial)} bytes"):
            conn.get("k")
        assert not conn.connected
    finally:
        thread.join(5)
        listener.close()


@pytest.fixture(scope="module")
def tls_nginx() -> Iterator[StaticNginx]:
    server = start_nginx(tls=True, log=True)
    yield server
    server.stop()


def test_https_verifies_by_default_and_refuses_a_self_signed_certificate(make: Make,
        tls_nginx: StaticNginx) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        make(target(tls_nginx.base)).get("k")


def test_https_with_the_certificate_trusted_keeps_one_connection(make: Make,
        tls_nginx: StaticNginx, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_nginx.root / "cert.pem"))
    conn = make(target(tls_nginx.base))
    assert all(conn.get(str(i)).body == BODY.encode() for i in range(20))
    assert conn.connects == 1
    conn.close()


def test_https_insecure_skips_the_check(make: Make, tls_nginx: StaticNginx) -> None:
    """The self-signed certificate, untrusted (the test above), accepted with verify off."""
    insecure = HttpTarget.parse(tls_nginx.base + "/k/{key}", verify=False)
    assert make(insecure).get("k").status == 200
