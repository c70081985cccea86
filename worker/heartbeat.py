"""The worker's sign of life, from a process of its own: busy is never taken for dead.

A worker whose client threads hold the GIL (25 threads answering from a local cache at full
speed) starved a heartbeat thread in the same process for seconds, and a busy worker was
declared lost with its rows thrown away (issue 25). So the beat comes from a small child process
(``python -m worker.heartbeat``) started when the worker is ready: every ``BEAT_S`` it reads the
worker's state from ``/proc`` and, while the worker exists and is not stopped (SIGSTOP, a
debugger), sets ``stampede:alive:<node>`` on the broker to a new beat number, and touches the
container's health file (``STAMPEDE_HEALTH_FILE``, worker.health). A stopped worker is silent
(lost after ``--worker-silence``), a killed one takes its beater with it. No GIL of the worker's
stands between its liveness and the coordinator.

The beat also carries what the worker's clients have sent in the current trial (``SentCount``:
a small file both processes map, the worker's main thread writing it every ``BEAT_S``): the
progress line's rate is the workers' own, not the rows the coordinator has written so far, which
lag (issue 31: 24-26k rps shown for a 41k rps trial).
"""

from __future__ import annotations

import argparse
import logging
import mmap
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from model.wire import ALIVE_TTL_MS, alive_key

log = logging.getLogger(__name__)
BEAT_S = 0.25
KEY_TTL_MS = ALIVE_TTL_MS  # a beat number outlives any silence limit, then goes
STOPPED = frozenset("TtZX")  # /proc state: stopped, traced, zombie, dead


SENT = struct.Struct("<qqq")  # the trial (its start instant), requests sent so far, ns since then
PREFIX = "stampede-sent-"  # the count's file, then the worker's PID


class SentCount:
    """The current trial's requests sent by this worker's clients, in a file the worker and its
    beater both map. Three int64 written in one step, read for a progress line only: a read
    torn between two writes is off by one update at most."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < SENT.size:
                os.ftruncate(fd, SENT.size)
            self._map = mmap.mmap(fd, SENT.size)
        finally:
            os.close(fd)

    @classmethod
    def beside(cls, pid: int) -> SentCount:
        """The count of worker ``pid``, in memory (/dev/shm) where there is one; the counts of
        workers gone without their beater's clean-up (a SIGKILL of both) are removed first."""
        shm = Path("/dev/shm")
        folder = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
        for stale in folder.glob(f"{PREFIX}*"):
            owner = stale.name.removeprefix(PREFIX)
            if owner.isdigit() and state(int(owner)) is None:
                stale.unlink(missing_ok=True)
        return cls(folder / f"{PREFIX}{pid}")

    def set(self, trial_start_ns: int, sent: int, elapsed_ns: int) -> None:
        SENT.pack_into(self._map, 0, trial_start_ns, sent, elapsed_ns)

    def read(self) -> tuple[int, int, int]:
        trial_start_ns, sent, elapsed_ns = SENT.unpack_from(self._map, 0)
        return int(trial_start_ns), int(sent), int(elapsed_ns)

    def close(self) -> None:
        self._map.close()
        self.path.unlink(missing_ok=True)


_COUNT: list[SentCount] = []  # this worker's, once its beater is started


def publish(trial_start_ns: int, sent: int, elapsed_ns: int) -> None:
    """What the clients have sent so far in the trial that starts at ``trial_start_ns`` (the
    coordinator's clock: one trial of one run), for the next beat (nothing without a beater: a
    trial run in a test's own process)."""
    for count in _COUNT:
        count.set(trial_start_ns, sent, elapsed_ns)


def beat_value(number: int, count: SentCount | None) -> str:
    """``"<number> <wall clock ns>"``, then ``" <trial start ns> <sent> <ns since the start>"`` with a
    count (model.wire.beat_sent reads it)."""
    value = f"{number} {time.time_ns()}"
    return value if count is None else value + " {} {} {}".format(*count.read())


def state(pid: int) -> str | None:
    """The process's state letter from /proc (None: it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def start(node: str, broker_url: str) -> subprocess.Popen[bytes]:
    """Start the beater of this worker process (Celery's worker_ready)."""
    count = SentCount.beside(os.getpid())
    _COUNT.append(count)
    argv = [sys.executable, "-m", "worker.heartbeat", "--parent", str(os.getpid()), "--node", node,
            "--sent", str(count.path)]
    return subprocess.Popen(argv, env={**os.environ, "STAMPEDE_BROKER_URL": broker_url},
                            stdin=subprocess.DEVNULL)


def beat(parent: int, node: str, client: redis.Redis, health: Path | None,
         count: SentCount | None = None) -> None:
    """Beat until the parent is gone; skip the beats while it is stopped."""
    key, number = alive_key(node), 0
    while (now := state(parent)) is not None and os.getppid() == parent:
        if now not in STOPPED:
            number += 1
            try:
                client.set(key, beat_value(number, count), px=KEY_TTL_MS)
            except redis.RedisError as exc:  # a missed beat is what the coordinator watches
                log.warning("beat %d not sent: %s: %s", number, type(exc).__name__, exc)
            if health is not None:
                health.touch()
        time.sleep(BEAT_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.heartbeat")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--sent", type=Path, default=None, help="the worker's SentCount file")
    args = parser.parse_args(argv)
    url = os.environ.get("STAMPEDE_BROKER_URL", "redis://127.0.0.1:6379/0")
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    health = os.environ.get("STAMPEDE_HEALTH_FILE")
    count = SentCount(args.sent) if args.sent is not None else None
    # the worker's shutdown terminates its beater (worker.app): exit through the clean-up below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        beat(args.parent, args.node, client, Path(health) if health else None, count)
    finally:
        if count is not None:  # the worker is gone (or stopping): its count goes with it
            count.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
