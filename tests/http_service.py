"""A real HTTP service for the tests: this WSGI app served by gunicorn (one process, many
threads) on 127.0.0.1, with its own Prometheus counter of the requests it received.

Routes (each counted at arrival, by route, before it answers):
  /items/KEY   200 with a small JSON body after ITEM_DELAY_S (a herd is visible)
  /fail/KEY    503
  /slow/KEY    stalls STALL_S, then 200 (longer than the tests' read timeout)
  /reset/KEY   resets the connection (SO_LINGER 0, then close: the client reads a reset)
  /metrics     the counter, in Prometheus' text format
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import urllib3
from prometheus_client import CollectorRegistry, Counter, generate_latest

from coordinator.stack.processes import ManagedProcess, free_port

ITEM_DELAY_S = 0.005
STALL_S = 1.5
ROUTES = ("items", "fail", "slow", "reset")
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


def start_service(workdir: Path, root: Path) -> tuple[ManagedProcess, str]:
    """gunicorn on a free loopback port serving ``app``; returns it and its base URL once it
    answers."""
    port = free_port()
    argv = [str(Path(sys.executable).parent / "gunicorn"), "--bind",
            f"127.0.0.1:{port}", "--workers", "1", "--worker-class", "gthread", "--threads", "64",
            "--timeout", "30", "--chdir", str(root), "tests.http_service:app"]
    proc = ManagedProcess("http-origin", argv, workdir / "http-origin.log")
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return urllib3.request("GET", f"{base}/metrics", timeout=1, retries=False).status == 200
        except urllib3.exceptions.HTTPError:
            return False

    try:
        proc.wait_until(answers, 20, "answering")
    except BaseException:
        proc.stop()
        raise
    return proc, base
