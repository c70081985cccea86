"""The example services of examples/services/ started as a user starts them (their own process,
their README's command and environment), for the black-box tests: a Redis of their own whose
keyspace notifications the "user" turned on, and a database with their ``items`` table."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import redis
import urllib3

from coordinator.stack.processes import ManagedProcess, free_port
from tests.helpers import ROOT

SERVICES = ROOT / "examples" / "services"
STATEMENT = "SELECT id, body, pg_sleep($2) FROM items WHERE id = $1"  # both services', as run
COUNTER = "origin_calls_total"
ITEMS = 20
ORIGIN_DELAY_MS = 20  # each origin query sleeps this long: a herd spans several samples


def items_database(dsn: str, name: str) -> str:
    """A fresh database ``name`` beside ``dsn``'s with the services' ``items`` table and
    pg_stat_statements (as its owner would have set it up); its DSN."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    own = dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(own, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute((SERVICES / "schema.sql").read_text())
    return own


def npm_ci() -> None:
    """The Node service's dependencies from its committed package-lock.json (the npm registry)."""
    npm = shutil.which("npm")
    assert npm is not None, "npm is not installed (apt-get install nodejs npm)"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"],
                   cwd=SERVICES / "node", check=True, capture_output=True, timeout=300)


def notifying_redis(url: str) -> str:
    """The user's own setting on their cache: key events for expiries and deletes."""
    client = redis.Redis.from_url(url)
    try:
        client.config_set("notify-keyspace-events", "Egx")
    finally:
        client.close()
    return url


def start_service(lang: str, variant: str, redis_url: str, dsn: str, workdir: Path,
                  ttl_s: int = 60) -> tuple[ManagedProcess, str]:
    """One service as its README starts it; returns it and its base URL once /metrics answers."""
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": dsn, "PORT": str(port),
           "VARIANT": variant, "TTL_S": str(ttl_s), "ORIGIN_DELAY_MS": str(ORIGIN_DELAY_MS)}
    if lang == "node":
        argv = [shutil.which("node") or "node", str(SERVICES / "node" / "server.js")]
    else:
        argv = [sys.executable, str(SERVICES / "python" / "service.py")]
    proc = ManagedProcess(f"{lang}-{variant}", argv, workdir / f"{lang}-{variant}.log", env=env)
    base = f"http://127.0.0.1:{port}"
    proc.ready_or_stopped(lambda: _answers(base), 30, "answering /metrics")
    return proc, base


def _answers(base: str) -> bool:
    try:
        return urllib3.request("GET", f"{base}/metrics", timeout=1, retries=False).status == 200
    except urllib3.exceptions.HTTPError:
        time.sleep(0.1)
        return False
