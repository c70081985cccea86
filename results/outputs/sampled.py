"""A black-box strategy's cells and notes in the summary table (issue 33): its origin calls came
from samples of a count (pg_stat_statements or the service's counter), checked against the
second count where one was given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SAMPLE_MIN_HZ = 50.0  # a black box's counts sampled slower (coordinator.defaults.SAMPLE_MIN_HZ)
_COUNTS = {"pg_stat_statements": "pg", "counter": "counter"}  # a black box's counts, short


def is_sampled(rows: list[Mapping[str, Any]]) -> bool:
    """A black-box strategy: its origin calls came from samples (no row holds one)."""
    return any(r.get("origin_source") for r in rows)


def check_cell(rows: list[Mapping[str, Any]]) -> str:
    """A black box's cell: the count read, and its check against the second (``pg+counter``)."""
    head = _COUNTS.get(str(rows[0]["origin_source"]), str(rows[0]["origin_source"]))
    if any(r.get("db_check") == "unchecked" for r in rows):
        return f"{head} only"
    other = "counter" if head == "pg" else "pg"
    bad = [r for r in rows if not r["db_calls_match"]]
    if not bad:
        return f"ok {head}+{other}"
    return "MISMATCH " + ",".join(f"{head} {r['origin_calls_total']}≠{other} {r['db_calls']}"
                                  for r in bad)


EVENT_NOTES = {
    "scheduled-delete": "the service's cache reported none of the tool's deletes (its keyspace "
                        "notifications are off): the events are the instants the deletes were sent",
    "inferred": "nothing reported the service's expiries (no --service-cache-url, or its keyspace "
                "notifications are off): the events are inferred from bursts in the samples",
}


def notes(r: Mapping[str, Any]) -> list[str]:
    """A black box's two counts against each other, a sample rate below what herds need, and
    events the cache did not report."""
    checked = r.get("db_check") != "unchecked"
    out = [] if r["db_calls_match"] or not checked else [
        f"the two counts disagree: {r.get('db_check_detail')}"]
    if not _hz(r) >= SAMPLE_MIN_HZ:
        out.append(f"its counts were sampled at {_hz(r):.1f} Hz, below "
                   f"{SAMPLE_MIN_HZ:g}: herds of short queries may merge")
    if (note := EVENT_NOTES.get(str(r.get("expiry_source")))) is not None:
        out.append(note)
    if int(r.get("deletes") or 0) > int(r.get("deletes_observed") or 0) and checked_deletes(r):
        out.append(f"{r['deletes']} scheduled deletes removed a key, the cache reported "
                   f"{r['deletes_observed']} of them")
    return out


def checked_deletes(r: Mapping[str, Any]) -> bool:
    """The cache was listened to for the deletes (its reports are the events)."""
    return str(r.get("expiry_source")).startswith("server")


def _hz(r: Mapping[str, Any]) -> float:
    value = r.get("sample_hz")
    return float("nan") if value is None else float(value)
