"""The expiry events of an HTTP cache in front of the app tier (nginx, Varnish), from its own
word: the cache status it put on each answer (``X-Cache-Status``, the rows' ``cache_status``, nginx's words).

An answer whose status says the entry was not fresh (``expired``, ``stale``, ``updating``,
``grace``, ``miss``) is a sign of an expiry; the signs of one key less than half a TTL apart are
one event, at the first of them (the entry's next expiry comes a whole TTL after its refill).
``pass`` and ``bypass`` (no entry at all: Varnish's ``return (pass)``) are no expiry: a trial
with only those has no event the cache reported, and the schedule stands in.
"""

from __future__ import annotations

from collections.abc import Sequence

from results.figures.expiry_reports import Event, Source

NOT_FRESH = ("EXPIRED", "STALE", "UPDATING", "GRACE", "MISS")  # the column's words (model.http.CacheStatus)


def front_events(keys: Sequence[str], starts_ns: Sequence[int], ttl_ns: int) -> list[Event]:
    """Events from the not-fresh answers (``keys[i]`` answered at ``starts_ns[i]``)."""
    gap = ttl_ns // 2
    last: dict[str, int] = {}
    events = []
    for at, key in sorted(zip(starts_ns, keys, strict=True)):
        if at - last.get(key, at - gap - 1) > gap:
            events.append(Event(key, at, Source.FRONT))
        last[key] = at
    return events
