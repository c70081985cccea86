"""The namespace lab with disturbable links: services, a router running ``tests/linkd.py``, and
workers whose cache URL goes through the router (so ``w1-cache`` is a link the lab controls).

Used by ``tests/e2e/test_netfaults.py`` and by ``python -m tests.netlab_herds`` (docs/faults.md).
Every process runs inside a namespace of the lab; nothing touches the machine's own interfaces.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from coordinator.stack.celery_workers import worker_argv
from coordinator.stack.postgres import start_postgres
from coordinator.stack.processes import ManagedProcess
from coordinator.stack.redis_server import start_redis
from model.services import Services
from tests.netns_lab import Lab

ROOT = Path(__file__).resolve().parents[1]
CONTROL_PORT = 7000
FIRST_LINK_PORT = 7101


def nft_missing() -> str | None:
    """None when nftables is installed (partitions and loss need it), else why not."""
    return None if shutil.which("nft") else "nft is not installed (Debian package nftables)"


def start_services(net: Lab, workdir: Path) -> Services:
    """Cache, lock store, broker and origin, one namespace each."""
    urls = {}
    for role in ("cache", "locks", "broker"):
        ns, address = net.host(role)
        proc, urls[role] = start_redis(role, workdir, bind=address, port=6379,
                                       prefix=net.run_in(ns))
        net.processes.append(proc)
    ns, address = net.host("origin")
    pgdir = workdir / "origin"
    pgdir.mkdir(mode=0o755)
    proc, dsn = start_postgres(pgdir, bind=address, port=5432, prefix=net.run_in(ns))
    net.processes.append(proc)
    return Services(urls["cache"], urls["locks"], urls["broker"], dsn)


def start_router(net: Lab, workdir: Path, workers: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """The link daemon on a router host: one link WORKER-cache each; (control, worker -> cache URL)."""
    ns, address = net.host("router")
    _, cache = net.hosts["cache"]
    argv = [*net.run_in(ns), sys.executable, str(ROOT / "tests" / "linkd.py"),
            "--control", f"{address}:{CONTROL_PORT}"]
    urls = {}
    for index, name in enumerate(workers):
        port = FIRST_LINK_PORT + index
        argv += ["--link", f"{name},cache,{port},{cache}:6379"]
        urls[name] = f"redis://{address}:{port}/0"
    proc = ManagedProcess("linkd", argv, workdir / "linkd.log")
    net.processes.append(proc)
    log = workdir / "linkd.log"
    proc.wait_until(lambda: "ready" in log.read_text(errors="replace"), 10, "linkd ready")
    return f"{address}:{CONTROL_PORT}", urls


def start_workers(net: Lab, workdir: Path, services: Services, cache_urls: dict[str, str]) -> None:
    """One Celery worker per host; each reaches the cache through its own link on the router."""
    for name, cache_url in cache_urls.items():
        ns, _ = net.host(name)
        env = {**os.environ, **services.to_env(), "STAMPEDE_CACHE_URL": cache_url,
               "PYTHONUNBUFFERED": "1"}
        argv = [*net.run_in(ns), *worker_argv(f"{name}@{ns}")]
        net.processes.append(ManagedProcess(name, argv, workdir / f"{name}.log", env=env))
