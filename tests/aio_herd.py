"""One process's herd, for the cross-process tests: ``python -m tests.aio_herd SPEC URL N LOAD_S``.

Builds the strategy, opens its connections, prints ``ready``, reads the wall-clock instant (ns)
from its standard input (the same for every process of the test, sent once all are ready),
sleeps until then and starts N coroutines at once; prints one JSON line: the loads this process
made and each request's outcome and lock wait.
"""

from __future__ import annotations

import asyncio
import sys
import time

import orjson

from adapters.aio import registry
from tests.aio_helpers import SleepLoader, deps, herd, warm


async def main(spec: str, url: str, clients: int, load_s: float) -> dict[str, object]:
    loader = SleepLoader(load_s)
    strategy = registry.build(spec, deps(url, loader, clients))
    try:
        await warm(strategy, clients)  # the connections, opened before the instant
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        at_ns = int(await asyncio.to_thread(sys.stdin.readline))
        await asyncio.sleep(max(at_ns - time.time_ns(), 0) / 1e9)
        results = await herd(strategy, clients)
    finally:
        await strategy.aclose()
    return {"loads": loader.calls, "outcomes": [o.name.lower() for o, _ in results],
            "lock_wait_ms": [round(p.lock_wait_ns / 1e6, 2) for _, p in results]}


if __name__ == "__main__":
    spec, url, clients, load_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    found = asyncio.run(main(spec, url, clients, load_s))
    sys.stdout.write(orjson.dumps(found).decode() + "\n")
