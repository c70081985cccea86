"""A black-box run's checks before anything is written: the service answers (waited for up to
``--service-timeout``), the statement is one pg_stat_statements knows after a request to the
service, the counter can be read, the service's cache answers. Each failure is bad input naming
its option (exit 2); what was found is said and recorded (run.json's ``origin``)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import click
import psycopg
import redis
import urllib3

from coordinator import defaults
from coordinator.blackbox.cache import notifications
from coordinator.blackbox.settings import BlackBox
from coordinator.config import LaunchConfig
from coordinator.connect import pg_connect, redis_from_url
from coordinator.origin.user import NO_EXTENSION, http_check
from model.custom import InvalidOrigin
from model.services import mask_url

RETRY_S = 1.0
_ID = re.compile(r"-?\d+")


def resolve(config: LaunchConfig, say: Callable[[str], None]) -> LaunchConfig:
    """``config`` with the statement's query ids found; click.BadParameter names what is wrong."""
    box = config.service
    assert box is not None
    try:
        service_answers(config, box, say)
        if box.cache_url:
            cache_answers(box.cache_url)
        if box.counter.url:
            http_check(box.counter)
        ids = statement_ids(_dsn(config), box.statement) if box.statement else ()
    except InvalidOrigin as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None
    return replace(config, service=replace(box, query_ids=tuple(ids)))


def _dsn(config: LaunchConfig) -> str:
    services = config.services or config.given
    return services.origin_dsn if services is not None else ""


def service_answers(config: LaunchConfig, box: BlackBox, say: Callable[[str], None]) -> None:
    """One GET of the first key; refused, timed out or 5xx: again each second until
    ``--service-timeout``; a 4xx at once: the URL or the key is wrong."""
    url = box.url.replace("{key}", quote(config.keys[0], safe=""))
    headers = dict(config.http.headers)
    timeout = urllib3.Timeout(connect=config.http.connect_ms / 1000, read=config.http.read_ms / 1000)
    deadline = time.monotonic() + config.timing.service_wait_s
    while True:
        try:
            response = urllib3.request("GET", url, headers=headers, timeout=timeout, retries=False)
            problem = f"answered HTTP {response.status}" if response.status >= 400 else ""
            if 400 <= response.status < 500:
                raise InvalidOrigin("--service-url", f"{mask_url(url)} {problem} (a key of the "
                                                     "list, a path the service serves?)")
        except urllib3.exceptions.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        if not problem:
            return
        if time.monotonic() >= deadline:
            raise InvalidOrigin("--service-url", f"{mask_url(url)} {problem} (waited "
                                                 f"{config.timing.service_wait_s:g} s: "
                                                 "--service-timeout)")
        say(f"service: {mask_url(url)} {problem}; asking again")
        time.sleep(RETRY_S)


def statement_ids(dsn: str, statement: str) -> tuple[int, ...]:
    """The query ids pg_stat_statements has for ``statement`` (its text, spacing aside, or its
    query id); InvalidOrigin when it has none (the service has not run it since the last reset)."""
    text = " ".join(statement.strip().rstrip(";").split())
    try:
        with pg_connect(dsn, autocommit=True) as conn:
            if _ID.fullmatch(text):
                rows = conn.execute("SELECT DISTINCT queryid FROM pg_stat_statements "
                                    "WHERE queryid = %s", (int(text),)).fetchall()
            else:
                rows = conn.execute("SELECT DISTINCT queryid FROM pg_stat_statements WHERE "
                                    "regexp_replace(btrim(query), '\\s+', ' ', 'g') = %s",
                                    (text,)).fetchall()
            known = [] if rows else _most_called(conn)
    except psycopg.Error as exc:
        raise InvalidOrigin("--origin-dsn", f"{NO_EXTENSION}? {str(exc).strip().splitlines()[0]}"
                            ) from None
    if not rows:
        raise InvalidOrigin("--origin-statement", f"pg_stat_statements knows no statement "
                                                  f"{text[:80]!r} after a request to the service "
                                                  f"(most called: {'; '.join(known) or 'none'})")
    return tuple(int(r[0]) for r in rows)


def _most_called(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute("SELECT query FROM pg_stat_statements WHERE query NOT LIKE "
                        "'%%pg_stat_statements%%' ORDER BY calls DESC LIMIT 3").fetchall()
    return [" ".join(str(r[0]).split())[:70] for r in rows]


def cache_answers(url: str) -> None:
    client = redis_from_url(url, socket_timeout=5)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        raise InvalidOrigin("--service-cache-url", f"{mask_url(url)}: {type(exc).__name__}: "
                                                   f"{exc}".splitlines()[0][:200]) from None
    finally:
        client.close()


def describe(config: LaunchConfig, say: Callable[[str], None]) -> dict[str, Any]:
    """run.json's ``origin`` for a black box, and the lines that say it."""
    box = config.service
    assert box is not None
    say(f"service: {mask_url(box.url)}, {len(config.keys):,} key(s); its origin calls counted by "
        f"{' and '.join(c.value for c in box.counts)} samples at {defaults.SAMPLE_HZ:g} Hz"
        + (f" (query ids {', '.join(map(str, box.query_ids))})" if box.query_ids else ""))
    meta: dict[str, Any] = {"span_s": 3600.0, "products": 0, "kind": "service",
                            "keys": len(config.keys), **box.meta(), "events": _events(config, say)}
    return meta


def _events(config: LaunchConfig, say: Callable[[str], None]) -> str:
    """Where the events will come from, said once (the notifications are read, never set)."""
    box = config.service
    assert box is not None
    if not box.cache_url:
        say("service: no --service-cache-url: events inferred from the bursts in the samples")
        return "inferred"
    client = redis_from_url(box.cache_url, socket_timeout=5)
    try:
        found = notifications(client)
    finally:
        client.close()
    on = found.deleted if box.scheduled_delete else found.expired
    what = "deletes" if box.scheduled_delete else "expiries"
    if on:
        say(f"service cache: {found.detail}: its {what} are observed")
        return "server"
    fallback = ("the tool's delete instants" if box.scheduled_delete
                else "inferred from the bursts in the samples")
    say(f"service cache: its keyspace notifications are off for {what} ({found.detail}; never "
        f"turned on by stampede-lab): events are {fallback}")
    return "scheduled-delete" if box.scheduled_delete else "inferred"
