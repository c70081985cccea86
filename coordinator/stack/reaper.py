"""Nothing of a launch outlives its coordinator: a watchdog process of its own.

A coordinator that is killed (SIGKILL, the OOM killer, a CI timeout) runs no ``finally``: the
embedded stack it started (Celery workers, Valkey, memcached, PostgreSQL, Prometheus) would be
left running with parent 1. So each launch starts a reaper first, in a session of its own:
every process the launch starts is recorded in the reaper's state file (its process group, which
holds everything it forks), and so is every temporary directory. The reaper looks four times a
second: once the coordinator is gone it kills those process groups, removes those directories
and exits; when the state file is gone (the launch stopped everything itself) it just exits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

POLL_S = 0.25


class Reaper:
    """The launch's side: ``adopt`` process groups and directories, ``close`` on a clean exit."""

    def __init__(self) -> None:
        handle, name = tempfile.mkstemp(prefix="stampede-reaper-", suffix=".json")
        os.close(handle)
        self.state = Path(name)
        self._groups: set[int] = set()
        self._dirs: set[str] = set()
        self._mutex = threading.Lock()
        self._write()
        argv = [sys.executable, "-m", "coordinator.stack.reaper", "--pid", str(os.getpid()),
                "--state", str(self.state)]
        self.process = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL)

    def _write(self) -> None:
        data = orjson.dumps({"groups": sorted(self._groups), "dirs": sorted(self._dirs)})
        tmp = self.state.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.state)

    def adopt(self, group: int) -> None:
        with self._mutex:
            self._groups.add(group)
            self._write()

    def forget(self, group: int) -> None:
        with self._mutex:
            self._groups.discard(group)
            self._write()

    def adopt_dir(self, path: Path) -> None:
        with self._mutex:
            self._dirs.add(str(path))
            self._write()

    def close(self) -> None:
        """The launch stopped everything itself: the reaper exits without killing anything."""
        self.state.unlink(missing_ok=True)
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()


def reap(state: Path) -> None:
    """Kill every recorded process group, remove every recorded directory."""
    data = orjson.loads(state.read_bytes())
    for group in data["groups"]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for path in data["dirs"]:
        shutil.rmtree(path, ignore_errors=True)


def watch(pid: int, state: Path) -> None:
    """Wait for ``pid`` to go (then reap) or for the state file to go (then just exit)."""
    while state.exists():
        if os.getppid() != pid:  # reparented: the coordinator is gone
            with contextlib.suppress(FileNotFoundError):
                reap(state)
                state.unlink()
            return
        time.sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator.stack.reaper")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    watch(args.pid, args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
