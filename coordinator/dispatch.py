"""The transport: find workers, send each its task on its own queue, follow progress, gather."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import kombu.pools
import redis
from celery import Celery
from celery.result import AsyncResult
from celery.utils import worker_direct

from model.wire import CELERY_SETTINGS, RUN_TRIAL


class DispatchError(RuntimeError):
    """Workers missing, or a trial task failed or did not return in time."""


def client_app(broker_url: str) -> Celery:
    """The coordinator's Celery client: the shared JSON-only settings; tasks are sent by name."""
    app = Celery("stampede", broker=broker_url, backend=broker_url)
    app.conf.update(CELERY_SETTINGS)
    return app


def wait_for_workers(app: Celery, count: int, timeout_s: float,
                     say: Callable[[str], None]) -> list[str]:
    """Ping until ``count`` workers answer; return their names (sorted), or fail naming how many."""
    deadline = time.monotonic() + timeout_s
    seen: set[str] = set()
    while time.monotonic() < deadline:
        try:
            replies = app.control.ping(timeout=0.5) or []
        except (redis.ConnectionError, OSError) as exc:  # the broker is restarting: ask again
            reset_connections(app)
            say(f"waiting for the broker: {type(exc).__name__}")
            time.sleep(0.5)
            continue
        seen = {name for reply in replies for name in reply}
        if len(seen) >= count:
            return sorted(seen)[:count]
        say(f"waiting for workers: {len(seen)}/{count} answered")
        time.sleep(0.5)
    raise DispatchError(
        f"only {len(seen)} of {count} workers answered within {timeout_s:g} s"
        + (f" ({', '.join(sorted(seen))})" if seen else "")
    )


def reset_connections(app: Celery) -> None:
    """Drop every pooled broker connection (the broker restarted); new ones open on demand.

    The same reset Celery does after a fork: close the pools and let them be rebuilt.
    """
    kombu.pools.reset()  # type: ignore[no-untyped-call]  # closes and forgets the process-wide connection pools
    app._after_fork()


@dataclass
class Dispatched:
    worker: str
    result: AsyncResult


def send_trial(app: Celery, assignments: Sequence[tuple[str, dict[str, Any]]]) -> list[Dispatched]:
    return [
        Dispatched(name, app.send_task(RUN_TRIAL, args=[spec], queue=worker_direct(name)))
        for name, spec in assignments
    ]


@dataclass
class Gathered:
    """The results that arrived (None where a worker gave none) and why each missing one is."""

    results: list[dict[str, Any] | None]
    missing: dict[str, str]


def follow(tasks: Sequence[Dispatched], deadline: float, interval_s: float,
           on_progress: Callable[[dict[str, int]], None],
           lost: Callable[[], set[str]] = set) -> Gathered:
    """Poll progress until every task is done, or given up: a worker in ``lost()`` (a fault
    killed it) at once, any other at ``deadline``. Fails only when no result arrived at all."""
    while True:
        gone = lost()
        waiting = [t for t in tasks if not t.result.ready() and t.worker not in gone]
        if not waiting or time.monotonic() > deadline:
            break
        on_progress(_sum_progress(tasks))
        time.sleep(interval_s)
    gathered = Gathered([], {})
    for t in tasks:
        if not t.result.ready():
            why = "killed by a fault" if t.worker in lost() else "no result before the deadline"
            gathered.missing[t.worker] = why
            gathered.results.append(None)
        elif t.result.failed():
            gathered.missing[t.worker] = f"trial task failed: {t.result.result!r}"[:300]
            gathered.results.append(None)
        else:
            gathered.results.append(t.result.get(timeout=5))
            t.result.forget()
    if not any(gathered.results):
        raise DispatchError("no worker returned its trial: " + "; ".join(
            f"{w}: {why}" for w, why in gathered.missing.items()))
    return gathered


def release(tasks: Sequence[Dispatched]) -> None:
    """Unsubscribe from the tasks' results now, while the broker is up.

    An AsyncResult unsubscribes when it is garbage-collected; after a Ctrl-C that is at
    interpreter exit, when the embedded broker is gone, and its reconnect loop delayed the
    exit by about 20 s.
    """
    for t in tasks:
        with contextlib.suppress(redis.RedisError, OSError, RuntimeError):
            t.result.backend.remove_pending_result(t.result)
        t.result.backend = None


def _sum_progress(tasks: Sequence[Dispatched]) -> dict[str, int]:
    total = {"requests": 0, "origin_calls": 0, "errors": 0}
    for t in tasks:
        info = t.result.info if t.result.state == "PROGRESS" else None
        if isinstance(info, dict):
            for key in total:
                total[key] += int(info.get(key, 0))
    return total
