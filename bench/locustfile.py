"""Locust's side of benchmark 1: users doing GET of the hot key on the bench's Valkey.

Run by bench/locust_bench.py (``locust -f bench/locustfile.py --headless --host redis://...
USER``), never imported by the product: Locust monkey-patches the process for gevent. Two
users, both reporting every GET as a Locust request, failures included:

- ``PooledGet``: a ``redis.Redis`` client per user, as Locust's Redis examples and most Locust
  Redis scripts write it (each command checks a connection out of the client's pool);
- ``PinnedGet``: ``single_connection_client=True``, no pool checkout: the fastest plain use of
  redis-py we found for Locust.
"""

from __future__ import annotations

import os
import time

import redis
from locust import User, constant, task

KEY = os.environ.get("STAMPEDE_BENCH_KEY", "orders:0")


class _RedisGet(User):
    """GET ``KEY`` back to back (no wait time), as a client thread does."""

    abstract = True
    wait_time = constant(0)
    single_connection = False

    def on_start(self) -> None:
        self.redis = redis.Redis.from_url(self.host or "redis://127.0.0.1:6379/0",
                                          socket_timeout=2.0,
                                          single_connection_client=self.single_connection)

    def on_stop(self) -> None:
        self.redis.close()

    @task
    def get(self) -> None:
        started = time.perf_counter()
        value: bytes | None = None
        error: Exception | None = None
        try:
            value = self.redis.get(KEY)  # type: ignore[assignment]
        except redis.RedisError as exc:  # a failure is Locust's failure row, never dropped
            error = exc
        self.environment.events.request.fire(
            request_type="GET", name=KEY, response_time=(time.perf_counter() - started) * 1000,
            response_length=len(value or b""), exception=error, context={})


class PooledGet(_RedisGet):
    """A ``redis.Redis`` per user over its own pool: the usual Locust Redis user."""


class PinnedGet(_RedisGet):
    """One connection per user, no pool checkout."""

    single_connection = True
