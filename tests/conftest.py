"""Test kinds by folder, and the fixtures that start real services (the same code the embedded
stack uses).

Every test lives in tests/unit (pure), tests/integration (real services started by fixtures) or
tests/e2e (full coordinator launches); the folder gives it its marker, so ``-m "not e2e"`` starts
no full stack. Session-scoped servers, with a fresh database per test where it matters:
``redis_server(name)`` and ``postgres`` are factories in the arq style.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from coordinator.origin.seed import seed_orders
from coordinator.stack.celery_workers import worker_argv
from coordinator.stack.memcached import start_memcached
from coordinator.stack.postgres import start_postgres
from coordinator.stack.processes import ManagedProcess
from coordinator.stack.redis_server import start_redis
from model.memcache import Memcache
from model.services import RedisPath, Services
from tests.containers.fixtures import (  # noqa: F401 - engine + images per session, one skip line
    container_images,
    pytest_runtest_makereport,
)
from tests.helpers import ROOT, SECRET, coordinator
from tests.http_service import start_service
from tests.strategy_helpers import MakeCommands

TESTS = Path(__file__).resolve().parent
KINDS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its kind, the name of the folder it lives in under tests/."""
    for item in items:
        try:
            kind = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:  # not under tests/ (a path given on the command line)
            continue
        if kind not in KINDS:
            raise pytest.UsageError(
                f"{item.nodeid}: a test file belongs in tests/unit, tests/integration or tests/e2e")
        item.add_marker(kind)


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


@pytest.fixture(scope="session")
def memcached_url(service_dir: Path, started: list[ManagedProcess]) -> str:
    """A real memcached (Debian's; ``make test`` installs it), started once per session."""
    proc, url = start_memcached(service_dir)
    started.append(proc)
    return url


@pytest.fixture
def memcache(memcached_url: str) -> Iterator[Memcache]:
    """The harness's connection to the session's memcached, flushed before the test."""
    client = Memcache(memcached_url)
    client.flush()
    yield client
    client.close()


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


@pytest.fixture(params=[p.value for p in RedisPath])
def commands(request: pytest.FixtureRequest) -> Iterator[MakeCommands]:
    """Strategy tests run once per command path (``--redis-client``): ``commands(cache)``."""
    make = MakeCommands(request.param)
    yield make
    make.close()


@pytest.fixture(scope="session")
def postgres_dsn(service_dir: Path, started: list[ManagedProcess]) -> str:
    """A real PostgreSQL with pg_stat_statements and a small seeded ``orders`` table."""
    proc, dsn = start_postgres(service_dir)
    started.append(proc)
    seed_orders(dsn, 50_000)
    return dsn


@pytest.fixture(scope="session")
def http_service(service_dir: Path, started: list[ManagedProcess]) -> str:
    """A real HTTP service (gunicorn serving tests/http_service.py); returns its base URL."""
    proc, base = start_service(service_dir, ROOT)
    started.append(proc)
    return base


@pytest.fixture
def reset_statements(postgres_dsn: str) -> str:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    return postgres_dsn


def start_worker(name: str, services: Services, log: Path) -> ManagedProcess:
    """A real Celery worker (as the embedded stack starts one) on the given services."""
    env = {**os.environ, **services.to_env(), "PYTHONUNBUFFERED": "1"}
    return ManagedProcess(name, worker_argv(name), log, env=env, stop_signal=signal.SIGQUIT,
                          stop_timeout_s=3.0)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, postgres_dsn: str,
            ) -> Iterator[tuple[Services, ManagedProcess]]:
    """One Redis with password ``SECRET`` (cache db 0, lock store db 1, broker db 2) and a worker."""
    workdir = tmp_path_factory.mktemp("secured")
    proc, url = start_redis("secured", workdir, password=SECRET)
    base = url.rsplit("/", 1)[0]
    services = Services(f"{base}/0", f"{base}/1", f"{base}/2", postgres_dsn)
    worker = start_worker("h1@stampede-test", services, workdir / "worker.log")
    try:
        yield services, worker
    finally:
        worker.stop()
        proc.stop()


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run directory: ``coordinator launch`` (naive, lock) on its own embedded stack."""
    out = tmp_path_factory.mktemp("real-run") / "run"
    done = coordinator("launch", "--workers", "2", "--clients", "16", "--seconds", "3", "--ttl", "1",
                       "--scale", "20000", "--origin-ms", "2", "--strategies", "naive,lock",
                       "--out", str(out), "--quiet", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out
