"""A throw-away PostgreSQL cluster with pg_stat_statements, run as an unprivileged user."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import psycopg

from coordinator.defaults import CONNECT_TIMEOUT_S
from coordinator.stack.processes import ManagedProcess, StackError, free_port

INSTALL_HINT = "install PostgreSQL: apt-get install postgresql (Debian 12 brings version 15)"


def find_bindir() -> Path:
    """The directory of initdb and postgres: $STAMPEDE_PG_BINDIR, pg_config, or Debian's layout."""
    candidates = [os.environ.get("STAMPEDE_PG_BINDIR", "")]
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                             check=False)
        candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in filter(None, candidates):
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "postgres").exists():
            return Path(candidate)
    raise StackError(f"PostgreSQL server binaries (initdb, postgres) not found: {INSTALL_HINT}")


def service_user() -> str | None:
    """None when we are not root; else the unprivileged account PostgreSQL will run as."""
    if os.geteuid() != 0:
        return None
    for name in (os.environ.get("STAMPEDE_PG_USER", ""), "postgres", "nobody"):
        if name:
            try:
                pwd.getpwnam(name)
                return name
            except KeyError:
                continue
    raise StackError("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL")


def _initdb(bindir: Path, workdir: Path, user: str | None) -> tuple[Path, Path]:
    """A fresh cluster in ``workdir/pg/data`` owned by ``user``; returns (data, socket dir)."""
    data, sock = workdir / "pg" / "data", workdir / "pg" / "sock"
    sock.mkdir(parents=True)
    if user is not None:
        for path in (workdir / "pg", sock):
            shutil.chown(path, user, user)
    init = subprocess.run(
        [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
         "--no-sync"],
        capture_output=True, text=True, check=False, user=user, group=user,
        extra_groups=[] if user else None,
    )
    if init.returncode != 0:
        raise StackError(f"initdb failed ({init.returncode}): {init.stderr.strip()[-800:]}")
    return data, sock


def as_user(user: str | None) -> list[str]:
    """``setpriv`` argv that drops root to ``user`` in place (it execs: the PID stays the server's)."""
    if user is None:
        return []
    entry = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]


def start_postgres(workdir: Path, max_connections: int = 300, bind: str = "127.0.0.1",
                   port: int | None = None, prefix: Sequence[str] = ()) -> tuple[ManagedProcess, str]:
    """initdb into ``workdir/pg``, start the server on ``bind``; return it and its DSN.

    ``prefix`` wraps the command (e.g. ``ip netns exec NS``, which needs root, so the switch to
    the service user then happens after it). Readiness and the extension go through the unix
    socket, so nothing is sent to ``bind`` from here.
    """
    bindir, user = find_bindir(), service_user()
    data, sock = _initdb(bindir, workdir, user)
    if bind != "127.0.0.1":  # a throw-away cluster for hosts on its own subnet (trust, as initdb's)
        with open(data / "pg_hba.conf", "a", encoding="utf-8") as hba:
            hba.write("host all all samenet trust\n")
    port = port or free_port()
    settings = {
        "listen_addresses": bind, "port": str(port), "unix_socket_directories": str(sock),
        "shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "top",
        "max_connections": str(max_connections), "fsync": "off", "synchronous_commit": "off",
        "full_page_writes": "off", "shared_buffers": "256MB",
    }
    argv = [*prefix, *(as_user(user) if prefix else []), str(bindir / "postgres"), "-D", str(data)]
    for key, value in settings.items():
        argv += ["-c", f"{key}={value}"]
    log = workdir / "postgres.log"
    log.touch()
    if user is not None:
        shutil.chown(log, user, user)
    # SIGINT is PostgreSQL's "fast shutdown": clients are disconnected, no long wait.
    proc = ManagedProcess("postgres", argv, log, user=None if prefix else user,
                          stop_signal=signal.SIGINT)
    local = f"postgresql://postgres@/postgres?host={sock}&port={port}"
    try:
        proc.wait_until(lambda: _accepts(local), 30, "accepting connections")
        with psycopg.connect(local, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    except BaseException:
        proc.stop()
        raise
    return proc, f"postgresql://postgres@{bind}:{port}/postgres"


def _accepts(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=1):
            return True
    except psycopg.OperationalError:
        return False
