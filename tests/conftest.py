"""Fixtures that start real services (the same code the embedded stack uses).

Session-scoped servers, with a fresh database per test where it matters:
``redis_server(name)`` and ``postgres`` are factories in the arq style.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from coordinator.origin.seed import seed_orders
from coordinator.stack.postgres import start_postgres
from coordinator.stack.processes import ManagedProcess
from coordinator.stack.redis_server import start_redis


@pytest.fixture(scope="session")
def service_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="stampede-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def started() -> Iterator[list[ManagedProcess]]:
    """Every process the fixtures started; all stopped when the session ends."""
    procs: list[ManagedProcess] = []
    yield procs
    for proc in reversed(procs):
        proc.stop()


@pytest.fixture(scope="session")
def redis_server(service_dir: Path, started: list[ManagedProcess]) -> Callable[[str], str]:
    """Factory: ``redis_server("cache")`` starts (once per name) a real server; returns its URL."""
    urls: dict[str, str] = {}

    def make(name: str) -> str:
        if name not in urls:
            proc, urls[name] = start_redis(name, service_dir)
            started.append(proc)
        return urls[name]

    return make


@pytest.fixture
def cache(redis_server: Callable[[str], str]) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server("cache"))
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def locks(redis_server: Callable[[str], str]) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server("lock-store"))
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(scope="session")
def postgres_dsn(service_dir: Path, started: list[ManagedProcess]) -> str:
    """A real PostgreSQL with pg_stat_statements and a small seeded ``orders`` table."""
    proc, dsn = start_postgres(service_dir)
    started.append(proc)
    seed_orders(dsn, 50_000)
    return dsn


@pytest.fixture
def reset_statements(postgres_dsn: str) -> str:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    return postgres_dsn


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run directory: ``coordinator launch`` (naive, lock) on its own embedded stack."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("real-run") / "run"
    subprocess.run(
        [sys.executable, "-m", "coordinator", "launch", "--workers", "2", "--clients", "16",
         "--seconds", "3", "--ttl", "1", "--scale", "20000", "--origin-ms", "2",
         "--strategies", "naive,lock", "--out", str(out), "--quiet"],
        check=True, timeout=300, capture_output=True,
    )
    return out
