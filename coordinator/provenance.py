"""What ran and where, for run.json's manifest: versions (packages, this checkout's commit, the
servers, asked from them) and each host's facts (the coordinator's own, each worker's by task)."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from celery import Celery
from celery.exceptions import CeleryError
from celery.utils import worker_direct

from coordinator.connect import pg_connect, redis_from_url
from model.hostfacts import host_facts
from model.memcache import Memcache
from model.services import Services, cache_kind
from model.wire import HOST_FACTS
from strategies.base import CacheServer

PACKAGES = ("stampede-lab", "celery", "redis", "psycopg", "pyarrow", "orjson")
LIBRARIES = ("dogpile.cache", "python-redis-lock", "meta-memcache")  # [libraries], when installed
CHECKOUT = Path(__file__).resolve().parent.parent
FACTS_TIMEOUT_S = 10.0


def versions(services: Services) -> dict[str, Any]:
    """Python, our packages, the checkout's commit and the servers measured."""
    found: dict[str, Any] = {"python": platform.python_version()}
    found.update({name: metadata.version(name) for name in PACKAGES})
    found.update({name: _installed(name) for name in LIBRARIES})
    found["git"] = git_state(CHECKOUT)
    caches = {"cache_server": services.cache_url, "memcache_server": services.memcache_url}
    found.update({name: server_version(url) for name, url in caches.items() if url})
    if not services.origin_dsn:  # an HTTP origin: no PostgreSQL in the run
        return found
    with pg_connect(services.origin_dsn, autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        found["postgresql"] = str(row[0]) if row else "unknown"
    return found


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def server_version(url: str) -> str:
    """What the cache server at ``url`` says it is (Redis or Valkey, or memcached)."""
    if cache_kind(url) is CacheServer.MEMCACHED:
        memcache = Memcache(url, timeout_s=5)
        try:
            return f"memcached {memcache.version()}"
        finally:
            memcache.close()
    cache = redis_from_url(url, socket_timeout=5)
    try:
        info = cache.info("server")
        return str(info.get("valkey_version") or info.get("redis_version"))
    finally:
        cache.close()


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=10, check=True)
    return done.stdout.strip()


def git_state(root: Path) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` when ``root`` is a git checkout and git is installed; else None."""
    if not (root / ".git").exists():
        return None
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def hosts(app: Celery, workers: Sequence[str]) -> dict[str, Any]:
    """The coordinator's host and every worker's, asked all at once through its own queue."""
    asked = [(name, app.send_task(HOST_FACTS, queue=worker_direct(name))) for name in workers]
    found: dict[str, Any] = {}
    for name, result in asked:
        try:
            facts = result.get(timeout=FACTS_TIMEOUT_S)
            found[name] = dict(facts) if isinstance(facts, dict) else {"error": "malformed reply"}
        except (CeleryError, TimeoutError, OSError) as exc:
            found[name] = {"hostname": name.partition("@")[2] or name,
                           "error": f"{type(exc).__name__}: no host facts (an older worker?)"}
        finally:
            result.forget()
    return {"coordinator": host_facts(), "workers": found}
