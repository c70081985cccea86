"""The transport: find workers, send each its task on its own queue, follow progress, gather."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kombu.pools
import redis
from celery import Celery
from celery.result import AsyncResult
from celery.utils import worker_direct

from coordinator.connect import celery_settings
from coordinator.trials.liveness import Health, Liveness, Loss
from model.wire import BEAT, CELERY_SETTINGS, RUN_TRIAL, alive_key


class DispatchError(RuntimeError):
    """Workers missing, or a trial task failed or did not return in time."""


def client_app(broker_url: str) -> Celery:
    """The coordinator's Celery client: the shared JSON-only settings; tasks are sent by name."""
    app = Celery("stampede", broker=broker_url, backend=broker_url)
    app.conf.update(CELERY_SETTINGS)
    app.conf.update(celery_settings())  # every broker and result-store connect bounded
    return app


def wait_for_workers(app: Celery, count: int, timeout_s: float,
                     say: Callable[[str], None]) -> list[str]:
    """Ping until ``count`` workers answer; return their names (sorted), or fail naming how many."""
    deadline = time.monotonic() + timeout_s
    seen: set[str] = set()
    while time.monotonic() < deadline:
        answered = _answers(app, 0.5)
        if answered is None:
            say("waiting for the broker (it is restarting)")
            time.sleep(0.5)
            continue
        seen = answered
        if len(seen) >= count:
            return sorted(seen)[:count]
        say(f"waiting for workers: {len(seen)}/{count} answered")
        time.sleep(0.5)
    raise DispatchError(
        f"only {len(seen)} of {count} workers answered within {timeout_s:g} s"
        + (f" ({', '.join(sorted(seen))})" if seen else "")
    )


def _answers(app: Celery, timeout_s: float, workers: Sequence[str] = ()) -> set[str] | None:
    """The workers (``workers`` only, when given) that answer one ping; None while the broker
    restarts (its pooled connections are dropped, so the next ask opens new ones)."""
    try:
        replies = app.control.ping(destination=list(workers) or None, timeout=timeout_s,
                                   limit=len(workers) or None) or []
    except (redis.ConnectionError, OSError):
        reset_connections(app)
        return None
    return {name for reply in replies for name in reply}


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
    """The results that arrived (None where a worker gave none), why each missing one is, the
    workers declared lost (silent past the limit) and the slow ones (longest silence, s)."""

    results: list[dict[str, Any] | None]
    missing: dict[str, str]
    lost: dict[str, Loss] = field(default_factory=dict)
    slow: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    """What the progress line shows: the summed counts so far and the tasks still awaited."""

    counts: dict[str, int]
    waiting: int
    beats: Mapping[str, object] = field(default_factory=dict)  # each worker's latest beat


Beats = Callable[[Sequence[str]], Mapping[str, object]]  # workers -> their latest beat


@dataclass
class Follow:
    """How a trial's tasks are followed: the workers' beats (worker.heartbeat), a pump run on
    every poll (the rows' gatherer), the counts the progress line shows."""

    beats: Beats = field(default=lambda workers: {})
    pump: Callable[[], object] = field(default=lambda: None)
    counts: Callable[[], dict[str, int]] = field(default=dict)


def follow(tasks: Sequence[Dispatched], deadline: float, interval_s: float,
           on_progress: Callable[[Progress], None], lost: Callable[[], set[str]] = set,
           liveness: Liveness | None = None,
           on_lost: Callable[[Loss], None] = lambda _: None, how: Follow | None = None) -> Gathered:
    """Poll until every task is done, or given up: a worker in ``lost()`` (a fault killed it)
    at once, one silent past ``liveness``'s limit when that is seen (``on_lost``), any other at
    ``deadline``. A worker's sign of life is its beat, read with its task's status. Fails only
    when no result arrived at all."""
    live = liveness or Liveness([t.worker for t in tasks], math.inf)
    how = how or Follow()
    while True:
        how.pump()
        killed = lost()
        beats = how.beats([t.worker for t in tasks])
        for t in tasks:
            if t.worker in killed:
                live.kill(t.worker)
            elif live.watches[t.worker].health is Health.RUNNING:
                meta = t.result.backend.get_task_meta(t.result.id)
                live.observe(t.worker, meta["status"], {BEAT: beats.get(t.worker)})
                if (loss := live.watches[t.worker].loss) is not None:
                    on_lost(loss)
        if not live.waiting() or time.monotonic() > deadline:
            break
        on_progress(Progress(how.counts(), live.waiting(), beats))
        time.sleep(interval_s)
    return _gather(tasks, live)


def beats_on(client: redis.Redis) -> Beats:
    """The workers' beats as their beaters set them on the broker (None: no beat, or unread)."""
    def read(workers: Sequence[str]) -> Mapping[str, object]:
        try:
            values = client.mget([alive_key(w) for w in workers])
        except (redis.RedisError, OSError):  # the broker restarting: no new sign this poll
            return {}
        return {w: v for w, v in zip(workers, values, strict=True) if v is not None}
    return read


def _gather(tasks: Sequence[Dispatched], live: Liveness) -> Gathered:
    gathered = Gathered([], {}, live.lost(), live.slow())
    for t in tasks:
        health = live.watches[t.worker].health
        why = {Health.KILLED: "killed by a fault", Health.RUNNING: "no result before the deadline",
               Health.FAILED: f"trial task failed: {t.result.result!r}"[:300]}.get(health)
        if health is Health.LOST:
            why = f"lost: {gathered.lost[t.worker].describe()}"
        if why is None:
            gathered.results.append(t.result.get(timeout=5))
            t.result.forget()
        else:
            gathered.missing[t.worker] = why
            gathered.results.append(None)
    if not any(gathered.results):
        raise DispatchError("no worker returned its trial: " + "; ".join(
            f"{w}: {why}" for w, why in gathered.missing.items()))
    return gathered


def ping(app: Celery, workers: Sequence[str], within_s: float) -> set[str]:
    """The workers that answer a ping within ``within_s`` (asked again until then)."""
    deadline, answered = time.monotonic() + within_s, set[str]()
    while (pending := [w for w in workers if w not in answered]) and time.monotonic() < deadline:
        replied = _answers(app, min(1.0, max(0.1, deadline - time.monotonic())), pending)
        if replied is None:
            time.sleep(0.2)
            continue
        answered |= replied
    return answered & set(workers)


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
