"""The bare loop our generator is compared with: the same threads doing plain GETs, nothing else.

Benchmark 1 (bench/cluster.py, ``make bench``) runs this and a real all-hit trial on the same workers and
servers; the ratio of their request rates is the generator's efficiency.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from model.services import Services, redis_client


class InvalidBaseline(ValueError):
    """Arguments of the baseline task out of range."""


@dataclass(frozen=True)
class BaselineSpec:
    clients: int
    key: str
    start_ns: int
    seconds: float

    @classmethod
    def from_json(cls, data: object) -> BaselineSpec:
        if not isinstance(data, Mapping) or set(data) != {"clients", "key", "start_ns", "seconds"}:
            raise InvalidBaseline("expected an object with clients, key, start_ns, seconds")
        spec = cls(data["clients"], data["key"], data["start_ns"], data["seconds"])
        if not (isinstance(spec.clients, int) and 1 <= spec.clients <= 10_000):
            raise InvalidBaseline("clients must be an int in [1, 10000]")
        if not (isinstance(spec.seconds, int | float) and 0 < spec.seconds <= 600):
            raise InvalidBaseline("seconds must be in (0, 600]")
        if not (isinstance(spec.key, str) and 0 < len(spec.key) <= 200):
            raise InvalidBaseline("key must be a string of 1 to 200 characters")
        if not isinstance(spec.start_ns, int):
            raise InvalidBaseline("start_ns must be an int")
        return spec


def run_baseline(spec: BaselineSpec, services: Services) -> dict[str, Any]:
    """GET ``key`` in a loop on ``clients`` threads from ``start_ns`` for ``seconds``."""
    cache = redis_client(services.cache_url, spec.clients)
    end_ns = spec.start_ns + int(spec.seconds * 1e9)
    counts = [0] * spec.clients
    errors: list[BaseException] = []
    gate = threading.Event()

    def loop(i: int) -> None:
        gate.wait()
        n = 0
        try:
            while time.time_ns() < end_ns:
                cache.get(spec.key)
                n += 1
        except Exception as exc:  # noqa: BLE001 - reported: a failing baseline is no baseline
            errors.append(exc)
        counts[i] = n

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(spec.clients)]
    for t in threads:
        t.start()
    time.sleep(max(0.0, (spec.start_ns - time.time_ns()) / 1e9))
    gate.set()
    for t in threads:
        t.join(timeout=spec.seconds + 30)
    cache.close()
    if errors:
        raise RuntimeError(f"{len(errors)} baseline threads failed") from errors[0]
    return {"requests": sum(counts), "seconds": spec.seconds}
