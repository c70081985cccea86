"""An nginx ``proxy_cache`` front from the system (Debian's nginx 1.22), started and reconfigured
between trials.

It runs in the foreground from a configuration of our own (``nginx -c FILE -p AREA``, ``daemon
off``): as root its master stays root (it binds, it owns the files) and its workers run as
``nobody`` (no ``user`` directive); as another user everything runs as that user. Master,
workers, cache manager and loader share one process group, the one the launch's reaper kills.

``apply`` reloads (SIGHUP, after ``nginx -t`` has accepted the new file): the port stays bound,
stub_status keeps counting, and the new configuration has a cache directory and keys zone of its
own, so every configuration starts with an empty cache. It returns once every process of the old
configuration has exited and ``/stampede/config`` answers the new generation; then the old cache
is removed.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from coordinator.stack.http_caches.counters import parse_stub_status
from coordinator.stack.http_caches.front import FrontBase, wait_for, write_text
from coordinator.stack.http_caches.nginx_conf import (
    STATUS_PATH,
    NginxLayout,
    NginxSite,
    cache_path,
    render_nginx,
)
from coordinator.stack.http_caches.params import NginxParams, config_id
from coordinator.stack.processes import StackError

INSTALL_HINT = "install nginx >= 1.22: apt-get install nginx (or make http-deps)"
OLD_WORKERS_TIMEOUT_S = 10.0


def find_nginx() -> str:
    """``STAMPEDE_NGINX`` when set, else nginx on PATH or in Debian's /usr/sbin."""
    given = os.environ.get("STAMPEDE_NGINX")
    found = given or shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(found).is_file():
        where = f"STAMPEDE_NGINX={given} is not a file" if given else "no nginx found"
        raise StackError(f"{where}: {INSTALL_HINT}")
    return found


class NginxFront(FrontBase):
    """``front.start(NginxParams(lock=True), ["127.0.0.1:8000"])``, then ``front.url``.

    ``worker_processes``: "1" (the default: measured on this 2-core machine, see
    docs/http-caches.md) or "auto".
    """

    kind = "nginx"

    def __init__(self, workdir: Path | None = None, host: str = "127.0.0.1",
                 port: int | None = None, worker_processes: str = "1") -> None:
        super().__init__(workdir, host, port)
        self.worker_processes = worker_processes
        self.layout = NginxLayout.under(self.area)
        self.upstreams: tuple[str, ...] = ()
        self.params = NginxParams()

    def start(self, params: NginxParams, upstreams: Sequence[str]) -> None:
        """Start nginx with ``params`` in front of ``upstreams`` (host:port each); return once
        it answers with this configuration."""
        self._not_started()
        self.upstreams = tuple(upstreams)
        self.params = params
        conf = self._write(params, self.generation, self.area / "nginx.conf")
        self._launch([find_nginx(), "-c", str(conf), "-p", str(self.area)], "nginx.log",
                     config_id(params), stop_timeout_s=5.0)

    def apply(self, params: NginxParams) -> None:
        """Reload with ``params`` and an empty cache; block until it is live. A configuration
        nginx refuses (``nginx -t``) leaves the running one untouched."""
        proc = self._running()
        old = self.generation
        candidate = self._write(params, old + 1, self.area / "nginx-next.conf")
        test = subprocess.run([find_nginx(), "-t", "-q", "-c", str(candidate), "-p", str(self.area)],
                              capture_output=True, text=True, timeout=30, check=False)
        if test.returncode != 0:
            raise StackError(f"nginx refused the configuration {candidate}: {test.stderr.strip()}")
        # One file: a reload (SIGHUP) reads the file the master was started with again.
        os.replace(candidate, self.area / "nginx.conf")
        self.generation, self.params = old + 1, params
        previous = self._children()
        os.kill(proc.pid, signal.SIGHUP)
        # Until the old workers have exited one of them may still accept a connection and
        # answer with the old configuration: wait for them first, then check what is live.
        wait_for(lambda: not previous & self._children(), OLD_WORKERS_TIMEOUT_S,
                 "nginx's workers of the previous configuration still running")
        self._wait_live(config_id(params))
        shutil.rmtree(cache_path(self.layout, old), ignore_errors=True)

    def _write(self, params: NginxParams, generation: int, path: Path) -> Path:
        site = NginxSite(f"{self.host}:{self.port}", self.upstreams, self.worker_processes,
                         generation)
        return write_text(path, render_nginx(params, site, self.layout))

    def _children(self) -> set[int]:
        """The master's children (workers, cache manager and loader), from /proc."""
        master = self._running().pid
        found = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):  # gone meanwhile
                    stat = (entry / "stat").read_text()
                    if int(stat.rpartition(")")[2].split()[1]) == master:
                        found.add(int(entry.name))
        return found

    def counters(self) -> dict[str, int]:
        """stub_status: ``accepts``, ``handled``, ``requests`` (counters, kept across apply)
        and ``active``, ``reading``, ``writing``, ``waiting`` (gauges). nginx 1.22 counts no
        cache statuses: those come from the rows' X-Cache-Status."""
        self._running()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
        try:
            conn.request("GET", STATUS_PATH)
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        if response.status != 200:
            raise StackError(f"nginx {STATUS_PATH}: status {response.status}")
        return parse_stub_status(text)
