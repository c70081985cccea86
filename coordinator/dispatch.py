"""The transport: find workers, send each its task on its own queue, follow progress, gather."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from celery import Celery
from celery.result import AsyncResult
from celery.utils import worker_direct

from worker.app import RUN_TRIAL


class DispatchError(RuntimeError):
    """Workers missing, or a trial task failed or did not return in time."""


def wait_for_workers(app: Celery, count: int, timeout_s: float,
                     say: Callable[[str], None]) -> list[str]:
    """Ping until ``count`` workers answer; return their names (sorted), or fail naming how many."""
    deadline = time.monotonic() + timeout_s
    seen: set[str] = set()
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5) or []
        seen = {name for reply in replies for name in reply}
        if len(seen) >= count:
            return sorted(seen)[:count]
        say(f"waiting for workers: {len(seen)}/{count} answered")
        time.sleep(0.5)
    raise DispatchError(
        f"only {len(seen)} of {count} workers answered within {timeout_s:g} s"
        + (f" ({', '.join(sorted(seen))})" if seen else "")
    )


@dataclass
class Dispatched:
    worker: str
    result: AsyncResult


def send_trial(app: Celery, assignments: Sequence[tuple[str, dict[str, Any]]]) -> list[Dispatched]:
    return [
        Dispatched(name, app.send_task(RUN_TRIAL, args=[spec], queue=worker_direct(name)))
        for name, spec in assignments
    ]


def follow(tasks: Sequence[Dispatched], deadline: float, interval_s: float,
           on_progress: Callable[[dict[str, int]], None]) -> list[dict[str, Any]]:
    """Poll progress until every task is done; return their results in order."""
    while not all(t.result.ready() for t in tasks):
        if time.monotonic() > deadline:
            pending = [t.worker for t in tasks if not t.result.ready()]
            raise DispatchError(f"no result from {', '.join(pending)} in time")
        on_progress(_sum_progress(tasks))
        time.sleep(interval_s)
    results = []
    for t in tasks:
        if t.result.failed():
            raise DispatchError(f"trial task failed on {t.worker}: {t.result.result!r}")
        results.append(t.result.get(timeout=5))
        t.result.forget()
    return results


def _sum_progress(tasks: Sequence[Dispatched]) -> dict[str, int]:
    total = {"requests": 0, "origin_calls": 0, "errors": 0}
    for t in tasks:
        info = t.result.info if t.result.state == "PROGRESS" else None
        if isinstance(info, dict):
            for key in total:
                total[key] += int(info.get(key, 0))
    return total
