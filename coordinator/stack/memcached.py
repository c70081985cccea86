"""A memcached server from the system (Debian's ``memcached``), for strategies that keep their
values on it (meta-memcache). Started only when a run has such a strategy."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from coordinator.stack.processes import ManagedProcess, StackError, free_port
from model.memcache import Memcache

INSTALL_HINT = "install memcached >= 1.6 (meta commands): apt-get install memcached"
MEMORY_MB = 256
CONNECTIONS = 10_000  # as the Redis servers' maxclients: one per client thread and then some


def find_memcached() -> str:
    found = os.environ.get("STAMPEDE_MEMCACHED") or shutil.which("memcached")
    if not found:
        raise StackError(f"no memcached server found: {INSTALL_HINT}")
    return found


def start_memcached(workdir: Path, bind: str = "127.0.0.1", port: int | None = None,
                    prefix: Sequence[str] = ()) -> tuple[ManagedProcess, str]:
    """Start one memcached (as ``nobody`` when we are root: it refuses root); return it and
    its URL once it answers ``version``."""
    port = port or free_port()
    argv = [*prefix, find_memcached(), "-l", bind, "-p", str(port), "-U", "0",
            "-m", str(MEMORY_MB), "-c", str(CONNECTIONS)]
    if os.geteuid() == 0:
        argv += ["-u", "nobody"]
    proc = ManagedProcess("memcached", argv, workdir / "memcached.log")
    url = f"memcache://{bind}:{port}"
    proc.ready_or_stopped(lambda: _answers(url), 10, "answering version")
    return proc, url


def _answers(url: str) -> bool:
    try:
        client = Memcache(url, timeout_s=0.5)
    except OSError:
        return False
    try:
        return bool(client.version())
    finally:
        client.close()
