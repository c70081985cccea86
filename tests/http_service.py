"""A real HTTP service for the tests: this WSGI app served by gunicorn (one process, many
threads) on 127.0.0.1, with its own Prometheus counter of the requests it received.

Routes (each counted at arrival, by route, before it answers):
  /items/KEY   200 with a small JSON body after ITEM_DELAY_S (a herd is visible)
  /fail/KEY    503
  /slow/KEY    stalls STALL_S, then 200 (longer than the tests' read timeout)
  /reset/KEY   resets the connection (SO_LINGER 0, then close: the client reads a reset)
  /headers/KEY 200 with the response headers the query names (the app tier's X-Stampede-*
               and an HTTP cache's X-Cache-Status: ?outcome=waited&cache=HIT&lock_wait_ns=5...),
               and, with ?status=503&error=T:%20m, that status and X-Stampede-Error; with
               ?chunked=1 the body in two pieces, chunked
  /peer/KEY    200 with the client's port as the body (the server's view of its connection)
  /metrics     the counter, in Prometheus' text format
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import urllib3
from prometheus_client import CollectorRegistry, Counter, generate_latest

from coordinator.stack.processes import ManagedProcess, free_port

ITEM_DELAY_S = 0.005
STALL_S = 1.5
ROUTES = ("items", "fail", "slow", "reset", "headers", "peer")
# /headers/KEY: query parameter -> response header (the app tier's and an HTTP cache's)
ECHOED = {"outcome": "X-Stampede-Outcome", "cache": "X-Cache-Status", "age": "Age",
          "lock_wait_ns": "X-Stampede-Lock-Wait-Ns", "stale_age_ns": "X-Stampede-Stale-Age-Ns",
          "local_hit": "X-Stampede-Local-Hit", "version": "X-Stampede-Version",
          "fallback": "X-Stampede-Fallback", "error": "X-Stampede-Error"}
REGISTRY = CollectorRegistry()
REQUESTS = Counter("items_requests", "Requests received, by route", ["route"], registry=REGISTRY)
COUNTER = 'items_requests_total{route="%s"}'  # the selector of one route's count

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    path = str(environ.get("PATH_INFO", ""))
    if path == "/metrics":
        start_response("200 OK", [("Content-Type", "text/plain; version=0.0.4")])
        return [generate_latest(REGISTRY)]
    route, _, key = path.strip("/").partition("/")
    if route not in ROUTES or not key:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"no such route\n"]
    REQUESTS.labels(route).inc()
    if route in ("headers", "peer"):
        return _echo(environ, start_response) if route == "headers" else _peer(environ, start_response)
    if route == "fail":
        start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
        return [b"unavailable\n"]
    if route == "reset":
        sock: socket.socket = environ["gunicorn.socket"]
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        return []
    time.sleep(STALL_S if route == "slow" else ITEM_DELAY_S)
    body = json.dumps({"key": key, "at": time.time()}).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


def _echo(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    query = urllib.parse.parse_qs(str(environ.get("QUERY_STRING", "")))
    status = query.pop("status", ["200"])[0]
    headers = [(ECHOED[name], values[0]) for name, values in query.items() if name in ECHOED]
    body = b"echoed\n"
    if "chunked" in query:  # no Content-Length: gunicorn sends the pieces chunked
        start_response(f"{status} {HTTPStatus(int(status)).phrase}",
                       [("Content-Type", "text/plain"), *headers])
        return [b"echo", b"ed\n"]
    start_response(f"{status} {HTTPStatus(int(status)).phrase}",
                   [("Content-Type", "text/plain"), ("Content-Length", str(len(body))), *headers])
    return [body]


def _peer(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    port = str(environ.get("REMOTE_PORT", "")).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(port)))])
    return [port]


def start_service(workdir: Path, root: Path, wsgi: str = "tests.http_service:app",
                  ready_path: str = "/metrics") -> tuple[ManagedProcess, str]:
    """gunicorn on a free loopback port serving ``wsgi`` (this module's ``app`` by default);
    returns it and its base URL once ``ready_path`` answers 200."""
    port = free_port()
    argv = [str(Path(sys.executable).parent / "gunicorn"), "--bind",
            f"127.0.0.1:{port}", "--workers", "1", "--worker-class", "gthread", "--threads", "64",
            "--timeout", "30", "--chdir", str(root), wsgi]
    proc = ManagedProcess("http-origin", argv, workdir / "http-origin.log")
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return urllib3.request("GET", base + ready_path, timeout=1, retries=False).status == 200
        except urllib3.exceptions.HTTPError:
            return False

    proc.ready_or_stopped(answers, 20, "answering")
    return proc, base
