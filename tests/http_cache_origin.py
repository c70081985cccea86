"""The origin behind nginx and Varnish in the HTTP cache tests: this WSGI app served by gunicorn
(tests.http_service.start_service) on 127.0.0.1, keeping its own record of what reached it.

Routes:
  /items/KEY     200 after DELAY_S (200 ms) with ``Cache-Control: max-age=MAX_AGE_S`` and a JSON body;
                 its arrival instant recorded under KEY (before it sleeps)
  /arrivals/KEY  the arrival instants (time.time(), seconds) recorded under KEY, as JSON
  /count         the number of /items requests received, as JSON

The record is the origin's own counter: every request nginx or Varnish let through is in it,
whatever the clients saw.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from typing import Any

from tests.http_service import StartResponse

# Longer than the stalls of a shared 2-core machine: the clients of a herd all send during one call.
DELAY_S = 0.2
MAX_AGE_S = 1
_arrivals: dict[str, list[float]] = {}
_mutex = threading.Lock()


def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    route, _, key = str(environ.get("PATH_INFO", "")).strip("/").partition("/")
    if route == "items" and key:
        with _mutex:
            _arrivals.setdefault(key, []).append(time.time())
        time.sleep(DELAY_S)
        return _json(start_response, {"key": key, "at": time.time()},
                     [("Cache-Control", f"max-age={MAX_AGE_S}")])
    if route == "arrivals" and key:
        with _mutex:
            return _json(start_response, list(_arrivals.get(key, [])))
    if route == "count":
        with _mutex:
            return _json(start_response, sum(len(v) for v in _arrivals.values()))
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"no such route\n"]


def _json(start_response: StartResponse, value: object,
          headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    body = json.dumps(value).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body))), *(headers or [])])
    return [body]
