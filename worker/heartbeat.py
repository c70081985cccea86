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
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import redis

from model.wire import alive_key

log = logging.getLogger(__name__)
BEAT_S = 0.25
KEY_TTL_MS = 60_000  # a beat number outlives any silence limit, then goes
STOPPED = frozenset("TtZX")  # /proc state: stopped, traced, zombie, dead


def state(pid: int) -> str | None:
    """The process's state letter from /proc (None: it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def start(node: str, broker_url: str) -> subprocess.Popen[bytes]:
    """Start the beater of this worker process (Celery's worker_ready)."""
    argv = [sys.executable, "-m", "worker.heartbeat", "--parent", str(os.getpid()), "--node", node]
    return subprocess.Popen(argv, env={**os.environ, "STAMPEDE_BROKER_URL": broker_url},
                            stdin=subprocess.DEVNULL)


def beat(parent: int, node: str, client: redis.Redis, health: Path | None) -> None:
    """Beat until the parent is gone; skip the beats while it is stopped."""
    key, number = alive_key(node), 0
    while (now := state(parent)) is not None and os.getppid() == parent:
        if now not in STOPPED:
            number += 1
            try:
                client.set(key, f"{number} {time.time_ns()}", px=KEY_TTL_MS)
            except redis.RedisError as exc:  # a missed beat is what the coordinator watches
                log.warning("beat %d not sent: %s: %s", number, type(exc).__name__, exc)
            if health is not None:
                health.touch()
        time.sleep(BEAT_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.heartbeat")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--node", required=True)
    args = parser.parse_args(argv)
    url = os.environ.get("STAMPEDE_BROKER_URL", "redis://127.0.0.1:6379/0")
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    health = os.environ.get("STAMPEDE_HEALTH_FILE")
    beat(args.parent, args.node, client, Path(health) if health else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
