"""Locust's side of benchmark 1: users doing GET of the hot key on the bench's Valkey.

Run by bench/locust_bench.py (``locust -f bench/locustfile.py --headless --host redis://...``),
never imported by the product: Locust monkey-patches the process for gevent. Each user holds its
own connection (``single_connection_client``: no pool checkout, Locust's fastest plain use of
redis-py) and reports every GET as a Locust request, failures included.
"""

from __future__ import annotations

import os
import time

import redis
from locust import User, constant, task

KEY = os.environ.get("STAMPEDE_BENCH_KEY", "orders:0")


class RedisGet(User):
    """One Locust user: GET ``KEY`` back to back (no wait time), as a client thread does."""

    wait_time = constant(0)

    def on_start(self) -> None:
        self.redis = redis.Redis.from_url(self.host or "redis://127.0.0.1:6379/0",
                                          single_connection_client=True, socket_timeout=2.0)

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
