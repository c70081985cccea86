"""Wait for each remote service to answer before a run starts.

``kubectl apply -k`` or ``docker compose up`` starts the coordinator together with the services,
so at first a name may not resolve yet, a port may refuse, PostgreSQL may still be starting up
or initialising its data directory. Those count as "not up yet": the coordinator asks again
every second, up to ``--service-timeout`` seconds, saying which service it waits for and why
(credentials masked). An answer that waiting cannot change (a wrong password, a database or
role that does not exist) ends the wait at once. Either way the failure is bad input: the
option is named on one line, exit 2, before anything is started or written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import psycopg
import redis

from model.memcache import Memcache
from model.services import Services, mask_url

PROBE_TIMEOUT_S = 3.0  # one round, all four in parallel, answers within this
POLL_S = 1.0  # between rounds while a service is not up yet
REPORT_EVERY_S = 5.0  # a progress line at least this often (and whenever a state changes)
OPTIONS = {"cache_url": "--cache-url", "lock_url": "--lock-url", "broker_url": "--broker-url",
           "origin_dsn": "--origin-dsn", "memcache_url": "--memcache-url"}
# PostgreSQL refusals that no wait repairs (libpq gives no SQLSTATE for a failed connect).
PG_FINAL = ("password authentication failed", "no password supplied", "does not exist",
            "pg_hba.conf", "invalid connection option", "invalid integer value")


class Unreachable(RuntimeError):
    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class Answer:
    """One service's answer to one round: ``problem`` None when it answered."""

    option: str
    url: str  # masked
    problem: str | None = None
    final: bool = False  # waiting will not help (authentication, a missing database)

    @property
    def message(self) -> str:
        return f"{self.url} unreachable: {self.problem}"


def _redis(url: str) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=PROBE_TIMEOUT_S,
                                  socket_timeout=PROBE_TIMEOUT_S, retry=None)
    try:
        client.ping()
    finally:
        client.close()


def _memcached(url: str) -> None:
    client = Memcache(url, timeout_s=PROBE_TIMEOUT_S)
    try:
        client.version()
    finally:
        client.close()


def _asker(name: str, url: str) -> Callable[[str], None]:
    if name == "origin_dsn":
        return _postgres
    return _memcached if url.startswith("memcache://") else _redis


def _postgres(dsn: str) -> None:
    with psycopg.connect(dsn, connect_timeout=int(PROBE_TIMEOUT_S)) as conn:
        conn.execute("SELECT 1")


def _final(exc: Exception) -> bool:
    """Whether ``exc`` says something a wait cannot change (everything else: not up yet)."""
    if isinstance(exc, redis.AuthenticationError | redis.ResponseError):
        return True
    if isinstance(exc, psycopg.Error):
        text = str(exc).lower()
        return not isinstance(exc, psycopg.OperationalError) or any(m in text for m in PG_FINAL)
    return False


def _one(name: str, url: str) -> Answer:
    option, masked = OPTIONS[name], mask_url(url)
    try:
        _asker(name, url)(url)
    except (redis.RedisError, psycopg.Error, OSError) as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        password = urlsplit(url).password
        if password:  # no driver is known to echo it; never let one through
            first = first.replace(password, "***")
        return Answer(option, masked, first[:160], _final(exc))
    return Answer(option, masked)


def check(services: Services) -> list[Answer]:
    """One round: every service given asked at once, answers in option order."""
    given = [name for name in OPTIONS if getattr(services, name)]
    with ThreadPoolExecutor(len(given)) as pool:
        return list(pool.map(lambda n: _one(n, getattr(services, n)), given))


def wait_for(services: Services, timeout_s: float, say: Callable[[str], None]) -> None:
    """Return once every service answers; raise Unreachable when one refuses for good, or when
    one is still not up after ``timeout_s`` seconds (0: ask once)."""
    started = time.monotonic()
    said: dict[str, tuple[float, str | None]] = {}  # option -> (when, problem) of its last line
    while True:
        down = [a for a in check(services) if a.problem]
        elapsed = time.monotonic() - started
        if not down:
            return
        if (final := next((a for a in down if a.final), None)) is not None:
            raise Unreachable(final.option, final.message)
        if elapsed >= timeout_s:
            waited = f" (not up after {elapsed:.0f} s of waiting: --service-timeout {timeout_s:g})"
            raise Unreachable(down[0].option, down[0].message + (waited if timeout_s > 0 else ""))
        for answer in down:  # a line per service when its error changes, else every few seconds
            when, problem = said.get(answer.option, (-REPORT_EVERY_S, None))
            if problem != answer.problem or time.monotonic() - when >= REPORT_EVERY_S:
                say(f"waiting for {answer.option} {answer.url} ({elapsed:.0f} s of {timeout_s:g} s):"
                    f" {answer.problem}")
                said[answer.option] = (time.monotonic(), answer.problem)
        time.sleep(min(POLL_S, timeout_s - elapsed))
