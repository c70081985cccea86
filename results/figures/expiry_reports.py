"""What the cache server reported, made ready for attribution (results.figures.events): reports of one
key close together merged into one event, each marked with the scheduled instant it happened at,
and the schedule itself standing in when the server reports nothing."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class Source(enum.StrEnum):
    EXPIRED = "expired"  # the cache server reported the key expired
    DELETED = "deleted"  # the cache server reported a DEL of the key (write-driven invalidation)
    REFRESH = "refresh"  # a refresh replaced a still-live value: the refresh cycle of that value
    SCHEDULE = "schedule"  # no server report could be had: the planned instant
    FRONT = "front"  # an HTTP cache in front answered from an expired or missing entry (its own word)
    INFERRED = "inferred"  # a black-box trial with no other source: a burst in the origin's samples


@dataclass(frozen=True)
class Event:
    key: str
    at_ns: int
    source: Source
    scheduled_ns: int | None = None
    reported_ns: int | None = None  # when the server's report came, where it came after at_ns


def schedule_events(keys: Sequence[str], first_ns: int, ttl_ns: int, end_ns: int) -> list[Event]:
    """The planned expiries, standing in when the server reports none (marked as such)."""
    instants = range(first_ns, end_ns, ttl_ns) if ttl_ns > 0 else range(0)
    return [Event(k, t, Source.SCHEDULE, t) for t in instants for k in keys]


def with_schedule(events: Sequence[Event], first_ns: int, ttl_ns: int, aligned: bool) -> list[Event]:
    """Mark each observed event with the scheduled instant it happened at, where there was one:
    the first expiry of every key, and under ``--expiry aligned`` every boundary."""
    seen: set[str] = set()
    out = []
    for e in sorted(events, key=lambda e: e.at_ns):
        scheduled = None
        if e.source is Source.EXPIRED and ttl_ns > 0 and (aligned or e.key not in seen):
            k = max(0, round((e.at_ns - first_ns) / ttl_ns))
            nearest = first_ns + k * ttl_ns
            if abs(e.at_ns - nearest) < ttl_ns // 4 and (aligned or k == 0):
                scheduled = nearest
        seen.add(e.key)
        out.append(Event(e.key, e.at_ns, e.source, scheduled))
    return out


def merge_close(events: Sequence[Event], tolerance: int) -> list[Event]:
    """Reports of one key's expiry less than ``tolerance`` after the one before are that same
    event: values written an instant before a boundary (``--expiry aligned``) expire with it."""
    last: dict[str, int] = {}
    out = []
    for e in sorted(events, key=lambda e: e.at_ns):
        if e.source is not Source.EXPIRED or e.at_ns - last.get(e.key, -tolerance - 1) > tolerance:
            out.append(e)
        if e.source is Source.EXPIRED:
            last[e.key] = e.at_ns
    return out
