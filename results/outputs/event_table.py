"""The per-event table: every expiry event (or refresh cycle) of a run with its herd, read from
``expiries.parquet`` (results.figures.events computed it once), instants in seconds from each trial's
common start instant."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from results.outputs.text import grid
from results.store import rundir

COLUMNS = ("trial", "strategy", "key", "at s", "scheduled s", "source", "counted", "calls",
           "duration ms", "first fill ms")
PER_TRIAL = 12  # events listed per trial; the rest are summed up in one line


def event_rows(root: Path) -> list[dict[str, Any]]:
    """Every event of the run with ``at_s`` / ``scheduled_s`` from its trial's start; empty for
    runs made before events were observed."""
    table = rundir.read_expiries(root)
    if table is None:
        return []
    starts = {int(t["trial"]): int(t["start_ns"]) for t in rundir.read_meta(root).get("trials", [])}
    rows = []
    for event in table.to_pylist():
        start = starts.get(int(event["trial"]))
        if start is None:
            continue
        scheduled = event["scheduled_ns"]
        rows.append({**event, "at_s": (event["event_ns"] - start) / 1e9,
                     "scheduled_s": (scheduled - start) / 1e9 if scheduled is not None else None})
    return rows


def render(events: Sequence[Mapping[str, Any]]) -> str:
    """The table, at most PER_TRIAL events per trial."""
    lines: list[list[str]] = []
    shown: dict[int, int] = {}
    for e in events:
        trial = int(e["trial"])
        shown[trial] = shown.get(trial, 0) + 1
        if shown[trial] <= PER_TRIAL:
            lines.append(_cells(e))
    text = grid(COLUMNS, lines, left=3)
    more = {t: n - PER_TRIAL for t, n in shown.items() if n > PER_TRIAL}
    if more:
        text += "\n" + "; ".join(f"trial {t}: {n} more events" for t, n in more.items())
        text += " (all of them: expiries.parquet)"
    return text


def _cells(e: Mapping[str, Any]) -> list[str]:
    return [str(e["trial"]), str(e["strategy"]), str(e["key"]), f"{e['at_s']:.3f}",
            "-" if e["scheduled_s"] is None else f"{e['scheduled_s']:.3f}", str(e["source"]),
            "yes" if e["in_window"] else "no", f"{e['calls']:,}", _ms(e["duration_ms"]),
            _ms(e["first_fill_ms"])]


def _ms(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}"
