"""Child processes the stack owns: started in their own session, always stopped, never orphaned."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol


class StackError(RuntimeError):
    """A service of the embedded stack could not be started."""


class Adopter(Protocol):
    """Who is told of every process group started and stopped (coordinator.stack.reaper)."""

    def adopt(self, group: int) -> None: ...

    def forget(self, group: int) -> None: ...

    def adopt_dir(self, path: Path) -> None: ...


_guards: list[Adopter] = []


def adopt_dir(path: Path) -> None:
    """A temporary directory to remove should the coordinator die (the stack's work area)."""
    for guard in _guards:
        guard.adopt_dir(path)


@contextlib.contextmanager
def guarded(adopter: Adopter) -> Iterator[None]:
    """While inside, every ``ManagedProcess`` started is adopted (its group killed with the
    coordinator, should it die first)."""
    _guards.append(adopter)
    try:
        yield
    finally:
        _guards.remove(adopter)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ManagedProcess:
    """A started service process with a log file; ``stop`` is idempotent and bounded."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, *,
                 env: dict[str, str] | None = None, user: str | None = None,
                 stop_signal: int = signal.SIGTERM, stop_timeout_s: float = 10.0) -> None:
        self.name = name
        self.log_path = log_path
        self._stop_signal = stop_signal
        self._stop_timeout_s = stop_timeout_s
        self._argv, self._env, self._user = list(argv), env, user
        self.popen = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self.log_path, "ab") as log:
            popen = subprocess.Popen(
                self._argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self._env, start_new_session=True, user=self._user, group=self._user,
                extra_groups=[] if self._user else None,
            )
        for guard in _guards:
            guard.adopt(popen.pid)  # its own session: the group id is its pid
        return popen

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process (fault injection); a process already gone is ignored."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def restart(self) -> None:
        """Start the same command again (same port, same log); the old process must be gone."""
        self.stop(timeout_s=5.0)
        self.popen = self._spawn()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_until(self, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Poll ``ready`` until true; fail fast with the log's tail if the process died."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise StackError(f"{self.name} exited with {self.popen.returncode} before "
                                 f"{what}; log {self.log_path}:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                if ready():
                    return
            time.sleep(0.05)
        raise StackError(f"{self.name} not {what} after {timeout_s:g} s; log {self.log_path}")

    def ready_or_stopped(self, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        """``wait_until``, and the process stopped when it never gets there (or the wait is
        interrupted): a start that fails leaves nothing running behind it."""
        try:
            self.wait_until(ready, timeout_s, what)
        except BaseException:
            self.stop()
            raise

    def request_stop(self) -> None:
        """Send the stop signal without waiting (``stop`` waits): a stack stops all at once."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)  # a paused process cannot act on its stop signal
                os.kill(self.pid, self._stop_signal)

    def stop(self, timeout_s: float | None = None) -> None:
        """Ask politely, then kill the whole process group; bounded by the stop timeout."""
        if not self.alive():
            self._forgotten()
            return
        self.request_stop()
        try:
            self.popen.wait(self._stop_timeout_s if timeout_s is None else timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self._forgotten()

    def kill(self) -> None:
        """Kill the process group at once (last resort)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait(5)
        self._forgotten()

    def _forgotten(self) -> None:
        for guard in _guards:
            guard.forget(self.pid)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
