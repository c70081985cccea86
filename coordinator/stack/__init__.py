"""The embedded local stack: cache, lock store, broker, PostgreSQL and N Celery workers.

Used when no service URL is given. Everything it starts is stopped on success, on error and
on Ctrl-C, in reverse order of starting.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from coordinator.stack.app_servers import start_app_tier
from coordinator.stack.celery_workers import LOCAL_HOST, start_workers
from coordinator.stack.http_caches import NginxFront, VarnishFront
from coordinator.stack.http_caches.door import EmbeddedFront
from coordinator.stack.memcached import start_memcached
from coordinator.stack.postgres import start_postgres
from coordinator.stack.processes import ManagedProcess, StackError, adopt_dir
from coordinator.stack.redis_server import maxclients_for, redis_answers, start_redis
from model.services import Services

__all__ = ["EmbeddedStack", "StackError"]
# The Redis servers the stack starts, by process name, and the Services field of each.
REDIS_FIELDS = {"cache": "cache_url", "lock-store": "lock_url", "broker": "broker_url"}
FRONT_KINDS: dict[str, type[NginxFront] | type[VarnishFront]] = {"nginx": NginxFront,
                                                                 "varnish": VarnishFront}


class EmbeddedStack:
    """``with EmbeddedStack(workers=8) as stack: stack.services ...``"""

    def __init__(self, workers: int, say: Callable[[str], None] = lambda _: None,
                 keep_workdir: bool = False, metrics_ports: list[int] | None = None,
                 memcached: bool = False, given: Services | None = None,
                 postgres: bool = True, app: tuple[int, int] = (0, 0), app_kind: str = "wsgi",
                 fronts: tuple[str, ...] = (), clients: int = 0) -> None:
        """``memcached``: also start a memcached cache (a run with strategies on memcached).
        ``given``: services given by URL (its non-empty fields), which are not started here;
        ``postgres``: start a PostgreSQL when none is given (not for an HTTP origin);
        ``app``: (processes, threads) of the app tier to start (0 processes: none);
        ``fronts``: the HTTP caches in front of it (nginx, varnish), each started at the first
        trial that names it (coordinator.app_tier.fronts); ``clients``: the run's clients in
        all, for the Redis servers' ``maxclients`` (redis_server.maxclients_for)."""
        self._clients = clients
        self.worker_count = workers
        self._memcached = memcached
        self._given = given or Services("", "", "", "")
        self._postgres = postgres
        self.metrics_ports = metrics_ports  # one per worker: STAMPEDE_METRICS_PORT (None: off)
        self._say = say
        self._keep = keep_workdir
        self.processes: list[ManagedProcess] = []
        self.workdir = Path(tempfile.mkdtemp(prefix="stampede-stack-"))
        os.chmod(self.workdir, 0o755)  # PostgreSQL's user must reach its data directory
        adopt_dir(self.workdir)  # removed by the launch's reaper should the coordinator die
        self._services: Services | None = None
        self.urls: dict[str, str] = {}  # the Redis servers' by name
        self._app = app
        self._app_kind = app_kind  # wsgi (granian) | asgi (uvicorn): model.apptier.APP_KINDS
        self.app_url = ""  # the app tier's, once started
        self._front_names = fronts
        self.fronts: dict[str, EmbeddedFront] = {}

    @property
    def services(self) -> Services:
        if self._services is None:
            raise StackError("the embedded stack is not started")
        return self._services

    def __enter__(self) -> EmbeddedStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop(keep_logs=exc is not None)

    def start(self) -> None:
        urls, given = self.urls, self._given
        for name, field in REDIS_FIELDS.items():
            if getattr(given, field):
                continue
            proc, urls[name] = start_redis(name, self.workdir,
                                           maxclients=maxclients_for(self._clients))
            self.processes.append(proc)
        self._say("redis: " + ", ".join(f"{name.replace('-', ' ')} {urls[name]}"
                                        for name in REDIS_FIELDS if name in urls))
        memcache_url = given.memcache_url
        if self._memcached and not memcache_url:
            proc, memcache_url = start_memcached(self.workdir)
            self.processes.append(proc)
            self._say(f"memcached: {memcache_url}")
        dsn = given.origin_dsn
        if self._postgres and not dsn:
            proc, dsn = start_postgres(self.workdir)
            self.processes.append(proc)
            self._say(f"postgres: {dsn}")
        redis_urls = {f: getattr(given, f) or urls[n] for n, f in REDIS_FIELDS.items()}
        self._services = Services(**redis_urls, origin_dsn=dsn, memcache_url=memcache_url)
        if any(getattr(given, f) for f in (*REDIS_FIELDS.values(), "origin_dsn", "memcache_url")):
            self._say("given, not started: " + ", ".join(
                f"{f} {v}" for f, v in given.masked().items() if v))
        self.processes += start_workers(self.worker_count, self._services, self.workdir,
                                        self.metrics_ports)
        self._say(f"celery: {self.worker_count} worker processes starting")
        if self._app[0]:
            proc, self.app_url = start_app_tier(*self._app, self._services, self.workdir,
                                                kind=self._app_kind)
            self.processes.append(proc)
            server = "uvicorn, ASGI" if self._app_kind == "asgi" else "granian, WSGI"
            self._say(f"app tier: {self._app[0]} processes x {self._app[1]} threads ({server}) "
                      f"at {self.app_url}")
            upstream = self.app_url.removeprefix("http://")
            self.fronts = {name: EmbeddedFront(FRONT_KINDS[name](self.workdir), upstream)
                           for name in self._front_names}
        self._say("stack pids: " + " ".join(f"{p.name}={p.pid}" for p in self.processes))
        self._say(f"stack: work area {self.workdir}")

    def scale_app(self, processes: int) -> None:
        """The app tier to ``processes`` processes: started again with that many, on the same
        port (an HTTP cache in front keeps its upstream); the coordinator waits for their beats."""
        old = self.process("app-tier")
        old.stop()
        self.processes.remove(old)
        port = int(self.app_url.rpartition(":")[2])
        proc, _ = start_app_tier(processes, self._app[1], self.services, self.workdir, port,
                                 kind=self._app_kind)
        self.processes.append(proc)
        self._app = (processes, self._app[1])
        self._say(f"app tier: {processes} processes (pid {proc.pid})")

    def process(self, name: str) -> ManagedProcess:
        """The process called ``name`` (cache, lock-store, broker, postgres, w1@stampede-local...)."""
        for proc in self.processes:
            if proc.name == name:
                return proc
        raise StackError(f"the embedded stack has no process {name!r}")

    @property
    def workers(self) -> list[ManagedProcess]:
        return [p for p in self.processes if p.name.endswith("@" + LOCAL_HOST)]

    def restart(self, proc: ManagedProcess, timeout_s: float = 10.0) -> None:
        """Start ``proc`` again on the same port; a Redis server must answer PING in time."""
        proc.restart()
        self._say(f"stack: restarted {proc.name} (pid {proc.pid})")
        if proc.name in self.urls:
            proc.wait_until(lambda: redis_answers(self.urls[proc.name]), timeout_s,
                            "answering PING after a restart")

    def restart_dead(self) -> list[str]:
        """Restart every process that died (a fault killed it); return their names."""
        dead = [p for p in self.processes if not p.alive()]
        for proc in dead:
            self.restart(proc)
        return [p.name for p in dead]

    def stop(self, keep_logs: bool = False) -> None:
        """Stop every process, newest first; remove the work area unless asked to keep it."""
        for front in self.fronts.values():
            front.stop()
        for proc in reversed(self.processes):  # all asked at once: Ctrl-C stops in seconds
            proc.request_stop()
        try:
            for proc in reversed(self.processes):
                proc.stop()
        finally:  # a second Ctrl-C during shutdown must not leave the rest running
            for proc in self.processes:
                if proc.alive():
                    proc.kill()
            self.processes.clear()
        if keep_logs or self._keep:
            self._say(f"stack logs kept in {self.workdir}")
        else:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(self.workdir)
