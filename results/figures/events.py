"""Expiry events and their herds (BRIEF section 3), computed once from what was observed.

An **event** is the moment a cached value ended: an expiry the cache server reported
(``expired``), a delete it reported (``deleted``, the invalidation writer's), or, for a defence
that refreshes before the key expires (XFetch's early recompute, swr's revalidation), the
**refresh cycle**: the value that a refresh replaced, named by the expiry stamp in its envelope
(``refresh``). When the server cannot report expiries, the scheduled instants stand in
(``schedule``), and the trial says so.

Attribution rule: an origin call that refreshed a live value belongs to the refresh cycle of
that value; any other origin call belongs to the latest event of its key at or before the call
started (within ``TOLERANCE``: the listener stamps an event when it receives it, which can be a
little after the first miss it caused). A call with no such event is ``unattributed`` (a cold
key's first fill). An event in the measurement window counts with all its calls, even those
after the window's end.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from results.figures import expiry_reports, intervals
from results.figures.expiry_reports import Event, Source

TOLERANCE_NS = 250_000_000  # at most; a quarter of the TTL when that is shorter
DIFFER = 0.10  # the per-period cross-check flags a trial when the two figures differ by more


@dataclass
class Herd:
    """The origin calls of one event: (start, end) of each call, in start order."""

    event: Event
    calls: list[tuple[int, int]] = field(default_factory=list)
    waits: int = 0  # client requests that waited for this event's fill

    @property
    def size(self) -> int:
        return len(self.calls)

    def duration_ms(self) -> float:
        if not self.calls:
            return float("nan")
        return (max(end for _, end in self.calls) - self.calls[0][0]) / 1e6

    def first_fill_ms(self) -> float:
        """From the event to the end of its first origin call: how long the value was missing."""
        if not self.calls:
            return float("nan")
        return (min(end for _, end in self.calls) - self.event.at_ns) / 1e6


@dataclass(frozen=True)
class Attribution:
    herds: list[Herd]
    unattributed: int


def tolerance_ns(ttl_ns: int) -> int:
    return min(TOLERANCE_NS, ttl_ns // 4)


def origin_calls(rows: pa.Table) -> pa.Table:
    """The rows that reached the origin: key, start, end and the refreshed value's stamp. A
    request the origin answered because the cache failed (``fallback``) is no herd's call."""
    called = rows.filter(pc.greater(rows["origin_called"], 0))
    if "fallback" in called.column_names:  # runs made before on_cache_error have none
        called = called.filter(pc.invert(pc.fill_null(called["fallback"], False)))
    return pa.table({
        "key": called["key"],
        "start": called["origin_start_ns"],
        "end": pc.add(called["origin_start_ns"], called["origin_ns"]),
        "refresh_of": called["refresh_of_ns"],
    })


def waited(rows: pa.Table) -> list[tuple[str, int]]:
    """(key, start) of the requests that waited for another client's fill (no call of their own)."""
    if "outcome" not in rows.column_names:
        return []
    mask = pc.and_(pc.equal(rows["outcome"], "waited"), pc.equal(rows["origin_called"], 0))
    kept = rows.filter(pc.fill_null(mask, False))
    return list(zip(kept["key"].to_pylist(), kept["t_start_ns"].to_pylist(), strict=True))


def attribute(calls: pa.Table, events: Sequence[Event], tolerance: int,
              span_ns: int, waits: Sequence[tuple[str, int]] = ()) -> Attribution:
    """Each origin call to one event (module docstring); refresh cycles become events here.
    A wait belongs to an event by the calls' rule (the latest event of its key before it).

    A refresh cycle and a reported expiry of the same generation of values (XFetch's early
    refreshers racing the expiry) are one event.
    """
    columns = [calls[c].to_pylist() for c in ("key", "start", "end", "refresh_of")]
    ordered = sorted(zip(*columns, strict=True), key=lambda c: c[1])
    cycles = _refresh_cycles(ordered, span_ns)
    herds: dict[tuple[str, int], Herd] = {}
    for event in sorted(events, key=lambda e: e.at_ns):
        cycle = _same_value(cycles, event, tolerance, span_ns)
        herd = cycles.pop(cycle) if cycle else Herd(event)
        herds[(event.key, event.at_ns)] = Herd(event, herd.calls)
    by_key: dict[str, list[Herd]] = {}
    for herd in herds.values():
        by_key.setdefault(herd.event.key, []).append(herd)
    unattributed = _assign(ordered, by_key, tolerance)
    for key, start in waits:
        if (target := _latest(by_key.get(key, []), start + tolerance)) is not None:
            target.waits += 1
    everything = [*herds.values(), *cycles.values()]
    for herd in everything:
        herd.calls.sort()
        herd.event = _first_sign(herd)
    return Attribution(sorted(everything, key=lambda h: h.event.at_ns), unattributed)


def _assign(ordered: Iterable[tuple[str, int, int, int]], by_key: Mapping[str, list[Herd]],
            tolerance: int) -> int:
    """Each call that refreshed no live value to the latest event of its key before it; the
    calls with none (unattributed) counted."""
    unattributed = 0
    for key, start, end, refresh_of in ordered:
        if refresh_of:
            continue
        target = _latest(by_key.get(key, []), start + tolerance)
        if target is None:
            unattributed += 1
        else:
            target.calls.append((start, end))
    return unattributed


def _first_sign(herd: Herd) -> Event:
    """A reported expiry moves to its herd's first origin call when that came first: the server
    reports an expiry when it gets to it (late under load), and the call proves the value was
    gone by then. A refresh cycle keeps its stamp (its calls come before it by design)."""
    e = herd.event
    if e.source is Source.REFRESH or not herd.calls or herd.calls[0][0] >= e.at_ns:
        return e
    return replace(e, at_ns=herd.calls[0][0], reported_ns=e.at_ns)


def _refresh_cycles(calls: Iterable[tuple[str, int, int, int]],
                    span_ns: int) -> dict[tuple[str, int], Herd]:
    """The refreshes of live values, one cycle per generation of values replaced.

    A value is named by the expiry stamp its filler wrote. The fills of one herd write values
    whose stamps lie close together (XFetch without a lock lets every filler write): stamps of a
    key less than ``span_ns`` after the first stamp of a cycle are that cycle's generation.
    """
    stamps: dict[str, list[tuple[int, int, int]]] = {}
    for key, start, end, refresh_of in calls:
        if refresh_of:
            stamps.setdefault(key, []).append((refresh_of, start, end))
    cycles: dict[tuple[str, int], Herd] = {}
    for key, found in stamps.items():
        first = None
        for stamp, start, end in sorted(found):
            if first is None or stamp - first >= span_ns:
                first = stamp
                cycles[(key, first)] = Herd(Event(key, first, Source.REFRESH))
            cycles[(key, first)].calls.append((start, end))
    return cycles


def _same_value(cycles: Mapping[tuple[str, int], Herd], event: Event, tolerance: int,
                span_ns: int) -> tuple[str, int] | None:
    """The refresh cycle of the generation of values this expiry ended, if one was refreshed."""
    if event.source is not Source.EXPIRED:
        return None
    found = [c for c in cycles
             if c[0] == event.key and -tolerance <= event.at_ns - c[1] <= span_ns + tolerance]
    return min(found, key=lambda c: abs(event.at_ns - c[1])) if found else None


def _latest(herds: list[Herd], before_ns: int) -> Herd | None:
    """The herd of the latest event at or before ``before_ns`` (``herds`` in event order)."""
    i = int(np.searchsorted([h.event.at_ns for h in herds], before_ns, side="right")) - 1
    return herds[i] if i >= 0 else None


def in_window(herds: Iterable[Herd], start_ns: int, end_ns: int) -> list[Herd]:
    return [h for h in herds if start_ns <= h.event.at_ns < end_ns]


def event_kind(herds: Sequence[Herd]) -> str:
    """What the headline figure is per: expiries, refresh cycles, or both."""
    refresh = any(h.event.source is Source.REFRESH for h in herds)
    expiry = any(h.event.source is not Source.REFRESH for h in herds)
    if refresh and expiry:
        return "expiry+refresh"
    return "refresh cycle" if refresh else "expiry"


def figures(counted: Sequence[Herd], unattributed: int, window_calls: int,
            periods: int) -> dict[str, Any]:
    """The per-trial event figures of ``trials.parquet``: one computation, every output reads it."""
    sizes = [h.size for h in counted]
    calls = sum(sizes)
    per_event = calls / len(counted) if counted else float("nan")
    per_period = window_calls / periods if periods else float("nan")
    return {
        "origin_calls": calls,
        "expiry_events": len(counted),
        "origin_per_expiry": per_event,
        "event_kind": event_kind(counted),
        "herd_median": statistics.median(sizes) if sizes else float("nan"),
        "herd_max": max(sizes, default=0),
        "herd_duration_p50_ms": _median(h.duration_ms() for h in counted),
        "herd_duration_max_ms": max((h.duration_ms() for h in counted if h.size), default=float("nan")),
        "first_fill_p50_ms": _median(h.first_fill_ms() for h in counted),
        "unattributed_calls": unattributed,
        "window_origin_calls": window_calls,
        "period_events": periods,
        "origin_per_period": per_period,
        "per_period_differs": differs(per_event, per_period),
        **intervals.event_columns([h.size for h in counted], [h.waits for h in counted]),
    }


def differs(a: float, b: float) -> bool:
    """More than DIFFER apart, relative to the larger (both NaN or both 0: they agree)."""
    if np.isnan(a) or np.isnan(b):
        return bool(np.isnan(a) != np.isnan(b))
    top = max(abs(a), abs(b))
    return bool(top and abs(a - b) / top > DIFFER)


def _median(values: Iterable[float]) -> float:
    kept = [v for v in values if not np.isnan(v)]
    return statistics.median(kept) if kept else float("nan")


def _reported(e: Event) -> int | None:
    """When the server's report came (None for a refresh cycle or a scheduled stand-in)."""
    if e.source in (Source.REFRESH, Source.SCHEDULE):
        return None
    return e.at_ns if e.reported_ns is None else e.reported_ns


def event_rows(herds: Sequence[Herd], window: tuple[int, int],
               context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One ``expiries.parquet`` row per event, with its herd's figures."""
    return [{
        **context,
        "key": h.event.key,
        "event_ns": h.event.at_ns,
        "scheduled_ns": h.event.scheduled_ns,
        "reported_ns": _reported(h.event),
        "source": h.event.source.value,
        "in_window": window[0] <= h.event.at_ns < window[1],
        "calls": h.size,
        "first_call_ns": h.calls[0][0] if h.calls else None,
        "last_end_ns": max(end for _, end in h.calls) if h.calls else None,
        "duration_ms": h.duration_ms(),
        "first_fill_ms": h.first_fill_ms(),
        "waits": h.waits,
    } for h in herds]


@dataclass(frozen=True)
class EventPlan:
    """What the attribution needs of a trial's plan (coordinator clock)."""

    window: tuple[int, int]
    first_expiry_ns: int
    ttl_ns: int
    periods: int  # TTL periods x primed keys: the per-period cross-check's denominator
    aligned: bool
    # How late an event may be stamped after its first call (None: ``tolerance_ns`` of the TTL).
    # 0 for calls seen in samples (results.figures.samples): a sample sees a call after it ended.
    tolerance_ns: int | None = None


def trial_events(rows: pa.Table, observed: Sequence[Event], plan: EventPlan,
                 window_calls: int, calls: pa.Table | None = None) -> tuple[dict[str, Any], list[Herd]]:
    """The trial's event figures and every herd (for ``expiries.parquet``): computed once.
    ``calls``: the origin calls when they come from elsewhere than ``rows`` (samples)."""
    tolerance = tolerance_ns(plan.ttl_ns) if plan.tolerance_ns is None else plan.tolerance_ns
    merged = expiry_reports.merge_close(observed, tolerance)
    events = expiry_reports.with_schedule(merged, plan.first_expiry_ns, plan.ttl_ns, plan.aligned)
    found = origin_calls(rows) if calls is None else calls
    attribution = attribute(found, events, tolerance, plan.ttl_ns // 2, waited(rows))
    counted = in_window(attribution.herds, *plan.window)
    out = figures(counted, attribution.unattributed, window_calls, plan.periods)
    offsets = [abs(h.event.at_ns - h.event.scheduled_ns) / 1e6 for h in counted
               if h.event.scheduled_ns is not None and h.event.source is Source.EXPIRED]
    out["aligned_max_ms"] = max(offsets, default=float("nan"))
    return out, attribution.herds
