"""``--client-driver asyncio``: a worker's clients as coroutines in one event loop (trial),
the clients and their loops (clients), each on a lean asyncio Redis connection (connection), or
in an HTTP trial on a keep-alive HTTP connection (http, http_trial).

The loop is uvloop's (libuv, C), as the asyncio app tier's is (app/__main__.py): measured in
benchmark 8 (bench/http.py, one run of 3 rounds, 8 workers x 25 clients on this project's 2-core
VM), the same HTTP trial's coroutine clients reached 0.71 of the plain-socket floor on the
standard library's loop and 1.02 on uvloop.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run the worker's clients to their end on a new uvloop event loop."""
    return uvloop.run(main)
