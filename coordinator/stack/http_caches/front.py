"""What the nginx and Varnish fronts share: a work area, a loopback URL, and the check that the
configuration a front answers with is the one just applied (``/stampede/config``)."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from coordinator.stack.http_caches.nginx_conf import CONFIG_PATH
from coordinator.stack.processes import ManagedProcess, StackError, adopt_dir, free_port

LIVE_TIMEOUT_S = 30.0  # Varnish compiles its VCL with cc at start: a second or two, more when busy


class FrontBase:
    """A front's process, work area and address; ``start`` / ``apply`` / ``stop`` in each kind.

    ``workdir``: where the front makes its own area (config, cache, logs). None: a directory of
    its own in the system's temp dir, removed at ``stop``. As root, nginx's workers (``nobody``)
    and Varnish's (``varnish``, ``vcache``) must reach the area, so it is made world-readable
    (0755) and every directory above it must be too: pytest's ``tmp_path`` is not (0700).
    """

    kind = "front"

    def __init__(self, workdir: Path | None = None, host: str = "127.0.0.1",
                 port: int | None = None) -> None:
        self._own_area = workdir is None
        if workdir is None:
            self.area = Path(tempfile.mkdtemp(prefix=f"stampede-{self.kind}-"))
            adopt_dir(self.area)  # removed by the launch's reaper should the coordinator die
        else:
            self.area = Path(tempfile.mkdtemp(prefix=f"{self.kind}-", dir=workdir))
        os.chmod(self.area, 0o755)
        self.host = host
        self.port = port or free_port()
        self.generation = 0  # one more at each apply: tells a fresh config from a stale one
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _not_started(self) -> None:
        if self.process is not None:
            raise StackError(f"the {self.kind} front is already started: apply() reconfigures it")

    def _launch(self, argv: list[str], log: str, expected_id: str, stop_timeout_s: float) -> None:
        """Start the server; return when it answers with ``expected_id`` (else stop it)."""
        self.process = ManagedProcess(self.kind, argv, self.area / log, stop_timeout_s=stop_timeout_s)
        try:
            self._wait_live(expected_id)
        except BaseException:
            self.stop()
            raise

    def _running(self) -> ManagedProcess:
        if self.process is None or not self.process.alive():
            raise StackError(f"the {self.kind} front is not running")
        return self.process

    def live_config(self) -> dict[str, Any]:
        """What the front answers at /stampede/config (a new connection each time)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
        try:
            conn.request("GET", CONFIG_PATH)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise StackError(f"{self.kind} {CONFIG_PATH}: status {response.status}")
            value: dict[str, Any] = orjson.loads(body)
            return value
        finally:
            conn.close()

    def _wait_live(self, expected_id: str, timeout_s: float = LIVE_TIMEOUT_S) -> None:
        """Block until the front answers with ``expected_id`` at the current generation."""
        proc = self._running()

        def live() -> bool:
            try:
                answer = self.live_config()
            except (StackError, http.client.HTTPException, ValueError):
                return False
            return bool(answer.get("id") == expected_id and answer.get("generation") == self.generation)

        proc.wait_until(live, timeout_s, f"answering config {expected_id} (generation "
                                         f"{self.generation}) at {self.url}{CONFIG_PATH}")

    def stop(self) -> None:
        """Stop the process; remove the work area when the front made it itself."""
        if self.process is not None:
            self.process.stop()
        if self._own_area:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(self.area)


def write_text(path: Path, text: str) -> Path:
    """A config file the servers' unprivileged users can read."""
    path.write_text(text)
    os.chmod(path, 0o644)
    return path


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``condition()`` until true, else StackError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise StackError(f"{what} after {timeout_s:g} s")
        time.sleep(0.05)
