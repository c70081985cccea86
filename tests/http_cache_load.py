"""A bounded closed-loop load on one URL for the HTTP cache tests, and the herds the origin saw.

``hammer`` runs CLIENTS threads, each with its own keep-alive connection (http.client), released
at one instant, for a fixed time; every reply is kept with its ``X-Cache-Status``. A failed
request fails the test (raised after the threads are joined), never counted as a reply.
``herds`` groups the origin's own arrival instants (tests/http_cache_origin.py) into herds: calls
closer than GAP_S to the one before belong to the same herd; with a TTL of 1 s herds are at least
a second apart, while one herd lasts about one origin call (200 ms).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass

from coordinator.stack.http_caches.nginx import find_nginx
from coordinator.stack.http_caches.varnish import find_tool
from coordinator.stack.processes import StackError

GAP_S = 0.5
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Reply:
    client: int  # the thread's index
    start: float  # time.time() when the request was sent
    latency_s: float
    status: int
    cache: str  # X-Cache-Status ("" when absent)


def hammer(base_url: str, path: str, clients: int, seconds: float) -> list[Reply]:
    """``clients`` threads GET ``path`` back to back for ``seconds``; every reply."""
    url = urllib.parse.urlsplit(base_url)
    barrier = threading.Barrier(clients)
    replies: list[list[Reply]] = [[] for _ in range(clients)]
    failures: list[Exception] = []

    def client(index: int) -> None:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT_S)
        try:
            barrier.wait()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                replies[index].append(_get(conn, path, index))
        except Exception as exc:  # noqa: BLE001 - re-raised after the join: never a reply
            failures.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 2 * TIMEOUT_S)
    if failures:
        raise failures[0]
    if any(t.is_alive() for t in threads):
        raise TimeoutError("a client thread did not finish")
    return sorted((r for rs in replies for r in rs), key=lambda r: r.start)


def _get(conn: http.client.HTTPConnection, path: str, client: int) -> Reply:
    start, t0 = time.time(), time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    response.read()
    if response.status != 200:
        raise AssertionError(f"GET {path}: status {response.status}")
    return Reply(client, start, time.perf_counter() - t0, response.status,
                 response.getheader("X-Cache-Status") or "")


def get(base_url: str, path: str) -> tuple[int, str, bytes]:
    """One request on a new connection: status, X-Cache-Status, body."""
    url = urllib.parse.urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT_S)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("X-Cache-Status") or "", response.read()
    finally:
        conn.close()


def arrivals(origin_url: str, key: str) -> list[float]:
    """The origin's own record of the /items/KEY requests that reached it."""
    status, _, body = get(origin_url, f"/arrivals/{key}")
    assert status == 200
    value: list[float] = json.loads(body)
    return value


def herds(instants: list[float], gap_s: float = GAP_S) -> list[list[float]]:
    """The instants grouped into herds (a gap longer than ``gap_s`` starts a new one)."""
    groups: list[list[float]] = []
    for t in sorted(instants):
        if groups and t - groups[-1][-1] <= gap_s:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


def statuses(replies: list[Reply]) -> Counter[str]:
    return Counter(r.cache for r in replies)


def missing_servers() -> str | None:
    """Why the HTTP cache tests cannot run here (nginx or Varnish not installed), or None."""
    try:
        find_nginx()
        for tool in ("varnishd", "varnishadm", "varnishstat"):
            find_tool(tool)
    except StackError as exc:
        return str(exc)
    return None
