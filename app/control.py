"""An app process's link to the coordinator, through the broker (model.apptier's keys).

A thread polls the broker every ``POLL_S``: a newly published trial is built (strategies,
connections, shipper) and the process says it is ready, or why it is not; a trial the
coordinator has finished ships what is left of its rows and goes. The process's beat comes from
a process of its own (worker.heartbeat), as a worker's does: a busy app is never taken for a
dead one.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import orjson
import redis

from model import apptier
from model.apptier import AppTrialSpec, broker_offset
from model.services import Services
from model.wire import InvalidTaskArguments
from strategies.base import error_text
from strategies.plugins import installed
from worker import heartbeat
from worker.shipper import Shipped

log = logging.getLogger(__name__)
POLL_S = 0.05


class Served(Protocol):
    """A trial as an app process serves it (app.trial's threaded one, app.aio_trial's)."""

    def finish(self) -> Shipped: ...

    def abandoned(self) -> bool: ...


T = TypeVar("T", bound=Served)
OpenTrial = Callable[[AppTrialSpec, int, Services, redis.Redis], T]


class Control(Generic[T]):
    """``start`` once per process (app.serve, at import; app.asgi, at its loop's start);
    ``trial`` from the requests. ``open_trial`` builds a published trial (the WSGI app's
    AppTrial, or the asgi app's built in its loop)."""

    def __init__(self, services: Services, threads: int, open_trial: OpenTrial[T],
                 kind: str = "wsgi") -> None:
        self.services, self.threads, self._open_trial = services, threads, open_trial
        self.kind = kind  # model.apptier.APP_KINDS: the coordinator checks it is the run's
        self.node = apptier.app_node(socket.gethostname(), os.getpid())
        self.broker = redis.Redis.from_url(services.broker_url, socket_timeout=5,
                                           socket_connect_timeout=5)
        self._trials: dict[str, T] = {}
        self._skipped: set[str] = set()  # trials published before this process started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="app-control", daemon=True)
        self._beater: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Say who this process is (threads, clock against the broker), beat, and poll."""
        info = {"node": self.node, "host": socket.gethostname(), "pid": os.getpid(),
                "threads": self.threads, "kind": self.kind, "started_ns": time.time_ns(),
                **broker_offset(self.broker)}
        self.broker.set(apptier.info_key(self.node), orjson.dumps(info),
                        px=apptier.KEY_TTL_MS)
        self._beater = heartbeat.start(self.node, self.services.broker_url)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(5)
        for trial in list(self._trials.values()):
            trial.finish()
        self._trials.clear()
        if self._beater is not None:
            self._beater.terminate()
            self._beater.wait(5)
        self.broker.delete(apptier.info_key(self.node))

    def trial(self, run_id: str, number: int) -> T | None:
        """The trial this process serves under that name (None: not published, or finished)."""
        return self._trials.get(apptier.current_value(run_id, number))

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.poll()
            except redis.RedisError as exc:  # the broker restarting: try again next poll
                log.warning("app control: %s", error_text(exc))

    def poll(self) -> None:
        """Open the trial just published; finish those the coordinator has finished."""
        current = self.broker.get(apptier.CURRENT_KEY)
        name = current.decode() if isinstance(current, bytes) else str(current or "")
        if name and name not in self._trials and name not in self._skipped:
            self._open(name)
        for done in [n for n, t in self._trials.items()
                     if self.broker.exists(_finish(n)) or t.abandoned()]:
            trial = self._trials.pop(done)
            shipped = trial.finish()
            log.info("trial %s finished: %d rows in %d batches", done, shipped.rows,
                     shipped.batches)

    def _open(self, name: str) -> None:
        """Build trial ``name`` and say so in its ready hash: ``ok`` with the plug-ins' versions,
        or the one line of what went wrong (the coordinator stops the trial with it)."""
        run_id, _, number = name.rpartition(":")
        ready = apptier.ready_key(run_id, int(number))
        raw = self.broker.get(apptier.spec_key(run_id, int(number)))
        try:
            if raw is None:
                raise InvalidTaskArguments(f"trial {name} has no spec on the broker")
            spec = AppTrialSpec.from_json(orjson.loads(raw))
            sender = spec.senders.get(self.node)
            if sender is None:  # started after the trial was published: not part of it
                self._skipped.add(name)
                return
            self._trials[name] = self._open_trial(spec, sender, self.services, self.broker)
            versions = spec.extra.get("versions", spec.trial.plugins)  # what the coordinator checks
            answer = {"ok": True, "plugins": installed(list(versions))}
        except Exception as exc:  # noqa: BLE001 - told to the coordinator, which stops the trial
            self._trials.pop(name, None)
            answer = {"ok": False, "error": error_text(exc)}
            log.error("trial %s: %s", name, answer["error"])
        self.broker.hset(ready, self.node, orjson.dumps(answer))
        self.broker.pexpire(ready, apptier.KEY_TTL_MS)


def _finish(name: str) -> str:
    run_id, _, number = name.rpartition(":")
    return apptier.finish_key(run_id, int(number))

