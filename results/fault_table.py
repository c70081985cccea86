"""The table under a fault: one line per trial, what each strategy did while the fault held."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from results.fault_stats import behaviour
from results.text import grid

COLUMNS = ("trial", "strategy", "fault", "at s", "complete", "requests", "errors", "served",
           "origin calls", "behaviour")


def fault_line(r: Mapping[str, Any]) -> list[str]:
    at = r.get("fault_at_s")
    requests, errors = int(r.get("fault_requests") or 0), int(r.get("fault_errors") or 0)
    lost = int(r.get("workers_lost") or 0)
    return [
        str(r["trial"]), str(r["strategy"]), str(r.get("fault") or "-"),
        "-" if at is None or math.isnan(float(at)) else f"{float(at):.2f}",
        "yes" if r.get("complete") else f"no ({lost} worker{'s' if lost != 1 else ''} lost)",
        f"{requests:,}", f"{errors:,}", f"{int(r.get('fault_served') or 0):,}",
        f"{int(r.get('fault_origin_calls') or 0):,}", behaviour(requests, errors),
    ]


def render(trials: Iterable[Mapping[str, Any]]) -> str:
    """Counts are over requests started while the fault held (its instant to its lift)."""
    return ("under fault (requests started while it held):\n"
            + grid(COLUMNS, [fault_line(r) for r in trials], left=len(COLUMNS)))
