"""An HTTP service as the origin (``--origin-url 'http://HOST:PORT/items/{key}'``), through
urllib3's connection pool: one bounded pool per worker process, as the psycopg pool is.

A request waits for one of ``size`` slots (the pool wait, recorded apart from the call), then
sends ``GET`` with the connect and read timeouts and no retries. An answer of 400 or above, a
timeout or a reset raises: the caller records an error row with the exception's type. A call is
counted once its request went out (a refused or timed-out connect never reached the service,
so it is not a call; a read timeout is one, the service saw the request).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from urllib.parse import quote, urlsplit

import urllib3
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from model.custom import CustomOrigin
from model.http.response import HttpStatusError
from model.origin import Committed
from strategies import Probe
from strategies.version import stamp


class HttpPoolTimeout(RuntimeError):
    """No connection of the bounded pool came free in time (exhaustion is an error, never a hang)."""


class HttpWriteRefused(RuntimeError):
    """An HTTP origin takes no writes (--invalidate-rate needs --origin-sql with --write-sql)."""


NOT_SENT = (NewConnectionError, ConnectTimeoutError)  # the request never reached the service


def key_path(template: str, key: str) -> str:
    """The path and query of ``template`` with ``key`` percent-encoded in place of ``{key}``."""
    parts = urlsplit(template.replace("{key}", quote(key, safe="")))
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def base_url(template: str) -> str:
    parts = urlsplit(template)
    return f"{parts.scheme}://{parts.netloc}"


@functools.lru_cache(maxsize=4)
def shared_pool(base: str, size: int, connect_s: float, read_s: float) -> urllib3.HTTPConnectionPool:
    """One pool per service and size in a worker process, kept across trials (keep-alive
    connections, as an application server keeps them)."""
    pool: urllib3.HTTPConnectionPool = urllib3.connection_from_url(
        base, maxsize=size, block=True, retries=False,
        timeout=urllib3.Timeout(connect=connect_s, read=read_s))
    return pool


class HttpLoader:
    """A ``Loader`` for one URL template through a bounded pool of ``size`` connections."""

    def __init__(self, origin: CustomOrigin, size: int, shaper: Callable[[bytes], bytes] = bytes,
                 pool_timeout_s: float = 5.0) -> None:
        self._template, self._size = origin.read, size
        self._pool = shared_pool(base_url(origin.read), size, origin.connect_timeout_s,
                                 origin.read_timeout_s)
        self._slots = threading.BoundedSemaphore(size)
        self._shaper, self._pool_timeout_s = shaper, pool_timeout_s

    def load(self, key: str, probe: Probe) -> bytes:
        asked = time.perf_counter_ns()
        if not self._slots.acquire(timeout=self._pool_timeout_s):
            probe.pool_wait_ns += time.perf_counter_ns() - asked
            raise HttpPoolTimeout(f"no connection of {self._size} free within "
                                  f"{self._pool_timeout_s:g} s")
        try:
            return self._call(key, probe, asked)
        finally:
            self._slots.release()

    def _call(self, key: str, probe: Probe, asked: int) -> bytes:
        got = time.perf_counter_ns()
        probe.pool_wait_ns += got - asked
        probe.origin_start_ns = time.time_ns()
        try:
            response = self._pool.urlopen("GET", key_path(self._template, key), redirect=False,
                                          preload_content=True)
        except NOT_SENT:
            raise
        except Exception:
            probe.origin_calls += 1  # sent, then it failed (a read timeout, a reset)
            raise
        finally:
            probe.origin_ns += time.perf_counter_ns() - got
        probe.origin_calls += 1
        if response.status >= 400:
            raise HttpStatusError(f"{response.status} {response.reason or ''}".strip())
        return stamp(0, self._shaper(response.data))

    def write(self, key: str) -> Committed:
        raise HttpWriteRefused("an HTTP origin takes no writes")

    def confirm(self, key: str, version: int) -> None:
        raise HttpWriteRefused("an HTTP origin takes no writes")
