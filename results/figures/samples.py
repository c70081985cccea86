"""Origin calls from samples of a counter (a black-box trial, issue 33): the user's service makes
its origin calls where we cannot see them one by one, so the coordinator samples a count of them
through the trial (pg_stat_statements ``calls`` of the statement, or the service's own Prometheus
counter) and each increase becomes calls at the instant of the sample that saw it.

Those calls go through the same attribution as every other trial's (``results.figures.events``):
a herd is the increase of the samples that follow an event, up to the next one. The samples do
not say which key a call was for, so with several keys the events are pooled under ``ANY_KEY``.
Where no event source exists, events are inferred from the samples' bursts (``inferred_events``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from results.figures.events import Herd
from results.figures.expiry_reports import Event, Source

ANY_KEY = "*"  # the events' key when several keys share one count (the samples name none)
TOTAL_SLACK = 0.05  # two counts of one trial agree within 5 % ...
TOTAL_MIN = 2  # ... or 2 calls, whichever is more
HERD_SLACK = 1  # one event's herd by either count within one call ...
HERD_SHARE = 0.90  # ... for at least 90 % of the events


@dataclass(frozen=True)
class Samples:
    """One source's samples of a trial: instants (coordinator clock, ns) and the count then."""

    source: str
    t_ns: tuple[int, ...]
    values: tuple[int, ...]

    def increase(self, start_ns: int, end_ns: int) -> int:
        """Calls counted between the last sample before ``start_ns`` and the last before
        ``end_ns`` (0 without samples)."""
        return max(0, self._at(end_ns) - self._at(start_ns))

    def total(self) -> int:
        return max(self.values) - self.values[0] if self.values else 0

    def rate_hz(self) -> float:
        """Samples per second over the span they cover."""
        if len(self.t_ns) < 2:
            return 0.0
        return (len(self.t_ns) - 1) / ((self.t_ns[-1] - self.t_ns[0]) / 1e9)

    def _at(self, instant_ns: int) -> int:
        """The count as of ``instant_ns``: the highest read before it (a count never falls)."""
        before = [v for t, v in zip(self.t_ns, self.values, strict=True) if t < instant_ns]
        return max(before) if before else (self.values[0] if self.values else 0)


def calls_table(samples: Samples, key: str) -> pa.Table:
    """The calls the samples saw, as ``events.origin_calls`` gives a trial's rows: one row per
    call, at the instant of the sample whose increase counted it (start = end: the samples say
    when a call had ended, not how long it took). A count never falls: a sample lower than the
    one before it was read earlier on the server (reads overlap), and adds nothing."""
    instants: list[int] = []
    top = samples.values[0] if samples.values else 0
    for t, value in zip(samples.t_ns, samples.values, strict=True):
        if value > top:
            instants.extend([t] * (value - top))
            top = value
    return pa.table({"key": pa.array([key] * len(instants), pa.string()),
                     "start": pa.array(instants, pa.int64()),
                     "end": pa.array(instants, pa.int64()),
                     "refresh_of": pa.array([0] * len(instants), pa.int64())})


def pooled(events: Sequence[Event], key: str, gap_ns: int) -> list[Event]:
    """The events under one ``key`` (the samples' calls carry it), those less than ``gap_ns``
    after the one before merged (a delete of several keys at once is one event)."""
    out: list[Event] = []
    for e in sorted(events, key=lambda e: e.at_ns):
        if out and e.at_ns - out[-1].at_ns < gap_ns:
            continue
        out.append(replace(e, key=key))
    return out


def inferred_events(samples: Samples, key: str, quiet_ns: int) -> list[Event]:
    """Events where nothing else names them: an increase after at least ``quiet_ns`` without one
    starts a burst, whose event is the last quiet sample's instant (the increase came after it)."""
    events: list[Event] = []
    last_rise: int | None = None
    top = samples.values[0] if samples.values else 0
    for i in range(1, len(samples.values)):
        if samples.values[i] <= top:
            continue
        top, at = samples.values[i], samples.t_ns[i]
        if last_rise is None or at - last_rise >= quiet_ns:
            events.append(Event(key, samples.t_ns[i - 1], Source.INFERRED))
        last_rise = at
    return events


def totals_agree(a: int, b: int) -> bool:
    """Two counts of one trial within max(5 %, 2 calls) of each other."""
    return abs(a - b) <= max(TOTAL_SLACK * max(a, b), TOTAL_MIN)


def herds_agreeing(a: Sequence[Herd], b: Sequence[Herd]) -> tuple[int, int]:
    """Events whose herds by the two counts are within one call, and the events compared
    (the same events attributed twice, in event order)."""
    sizes_b = {(h.event.key, h.event.at_ns): h.size for h in b}
    pairs = [(h.size, sizes_b.get((h.event.key, h.event.at_ns))) for h in a]
    kept = [(x, y) for x, y in pairs if y is not None]
    return sum(abs(x - y) <= HERD_SLACK for x, y in kept), len(kept)


def herds_agree(agreeing: int, compared: int) -> bool:
    return compared == 0 or agreeing >= HERD_SHARE * compared
