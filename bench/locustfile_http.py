"""Locust's side of benchmark 8: ``FastHttpUser`` users GET one path of the static nginx.

Run by bench/http.py (``locust -f bench/locustfile_http.py --headless --host http://...
StaticGet``), never imported by the product: Locust monkey-patches the process for gevent.
``FastHttpUser`` (geventhttpclient, keep-alive) is Locust's fastest HTTP user: about 16k
requests/s per core in its docs. Every GET is a Locust request, failures included.
"""

from __future__ import annotations

import os

from locust import FastHttpUser, constant, task

PATH = os.environ.get("STAMPEDE_BENCH_PATH", "/k/hot")


class StaticGet(FastHttpUser):
    """GET ``PATH`` back to back (no wait time), as a client thread does."""

    wait_time = constant(0)

    @task
    def get(self) -> None:
        self.client.get(PATH)
