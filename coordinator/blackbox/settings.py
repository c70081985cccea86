"""What a black-box run is given (``--service-url`` and its options), frozen: the service, where
its origin calls are counted, and its cache (pure; the checks against the live services are in
``coordinator.blackbox.probe``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from coordinator.origin.user import Counter
from model.services import mask_url

KEY = "{key}"


class Count(enum.StrEnum):
    """Where the origin calls are counted (samples.parquet's ``source``)."""

    STATEMENT = "pg_stat_statements"  # calls of the statement (--origin-dsn, --origin-statement)
    COUNTER = "counter"  # the service's Prometheus counter (--origin-counter-url/-name)


class EventSource(enum.StrEnum):
    """Who names a black-box trial's events (trials.parquet's ``expiry_source``)."""

    SERVER = "server"  # the user's cache reported them (keyspace notifications it has on)
    SCHEDULED = "scheduled-delete"  # the tool's own deletes, the cache reporting none
    INFERRED = "inferred"  # nothing names them: bursts in the samples


@dataclass(frozen=True)
class BlackBox:
    """The user's running service; it holds its own cache and defence, the tool never its code."""

    url: str  # --service-url: the URL template, {key} once
    name: str = ""  # --service-name: the table's strategy column ("": the URL template)
    statement: str = ""  # --origin-statement: the statement's text or its query id
    counter: Counter = field(default_factory=Counter)
    cache_url: str = ""  # --service-cache-url: the service's own Redis (observed, never flushed)
    cache_key: str = KEY  # --service-cache-key: the key the service caches a key under
    scheduled_delete: bool = False  # --expiry scheduled-delete: the tool deletes at shared instants
    query_ids: tuple[int, ...] = ()  # the statement's, found at the start (probe.resolve)

    @property
    def label(self) -> str:
        return self.name or self.url

    @property
    def counts(self) -> tuple[Count, ...]:
        """The sources of origin calls given, the headline's first: the database's own count
        where it is given (every call that reached it), else the service's counter."""
        given = ((Count.STATEMENT, bool(self.statement)), (Count.COUNTER, bool(self.counter.url)))
        return tuple(c for c, on in given if on)

    def cache_name(self, key: str) -> str:
        """The Redis key the service caches ``key`` under."""
        return self.cache_key.replace(KEY, key)

    def meta(self) -> dict[str, Any]:
        """run.json's ``black_box`` (URLs masked)."""
        return {"url": mask_url(self.url), "name": self.label,
                "counts": [c.value for c in self.counts], "statement": self.statement,
                "query_ids": list(self.query_ids),
                "counter": {"url": mask_url(self.counter.url), "name": self.counter.name},
                "cache_url": mask_url(self.cache_url) if self.cache_url else "",
                "cache_key": self.cache_key, "scheduled_delete": self.scheduled_delete}


def check_cache_key(pattern: str) -> str:
    """``--service-cache-key``: ``{key}`` once, no other brace; ValueError otherwise."""
    if pattern.count(KEY) != 1 or pattern.replace(KEY, "").count("{") or "}" in pattern.replace(KEY, ""):
        raise ValueError(f"{pattern!r} must hold {KEY} once and no other brace (e.g. 'item:{{key}}')")
    return pattern
