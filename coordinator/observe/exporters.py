"""The Redis and PostgreSQL exporters, when their binaries are installed (Debian:
``prometheus-redis-exporter``, ``prometheus-postgres-exporter``); skipped, with a note, when not."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from coordinator.observe.prometheus import Targets
from coordinator.stack.processes import ManagedProcess, free_port

REDIS_EXPORTER = "prometheus-redis-exporter"
POSTGRES_EXPORTER = "prometheus-postgres-exporter"
# The top statements' time (pg_stat_statements), in the postgres exporter's custom-query format.
QUERIES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "postgres-queries.yaml"


def start_exporters(redis_urls: dict[str, str], origin_dsn: str, home: Path, targets: Targets,
                    say: Callable[[str], None]) -> list[ManagedProcess]:
    """One exporter per Redis (labelled with its role) and one for PostgreSQL, on loopback."""
    procs: list[ManagedProcess] = []
    binary = shutil.which(REDIS_EXPORTER)
    if binary is None:
        say(f"observe: {REDIS_EXPORTER} not installed (make observe-deps): no Redis server metrics")
    else:
        for role, url in redis_urls.items():
            port = free_port()
            parts = urlsplit(url)
            argv = [binary, f"--redis.addr=redis://{parts.hostname}:{parts.port}",
                    f"--web.listen-address=127.0.0.1:{port}"]
            procs.append(ManagedProcess(f"redis-exporter-{role}", argv, home / f"exporter-{role}.log"))
            targets.add("redis", f"127.0.0.1:{port}", role=role)
    binary = shutil.which(POSTGRES_EXPORTER)
    if not origin_dsn:  # an HTTP origin (--origin-url): no PostgreSQL to watch
        return procs
    if binary is None:
        say(f"observe: {POSTGRES_EXPORTER} not installed (make observe-deps): no PostgreSQL server metrics")
        return procs
    port = free_port()
    argv = [binary, f"--web.listen-address=127.0.0.1:{port}"]
    if QUERIES.is_file():
        argv.append(f"--extend.query-path={QUERIES}")
    # lib/pq asks for TLS unless told not to; the embedded server listens on loopback without it
    dsn = origin_dsn
    if "sslmode=" not in dsn:
        dsn += ("&" if "?" in dsn else "?") + "sslmode=disable"
    env = {"DATA_SOURCE_NAME": dsn, "PATH": "/usr/bin:/bin"}
    procs.append(ManagedProcess("postgres-exporter", argv, home / "exporter-postgres.log", env=env))
    targets.add("postgres", f"127.0.0.1:{port}", role="origin")
    return procs
