"""The table under a fault: one line per trial, what each strategy did while the fault held."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from results.figures.fault_stats import behaviour
from results.outputs.text import grid

COLUMNS = ("trial", "strategy", "fault", "at s", "complete", "requests", "errors", "served",
           "origin calls", "origin/s before", "origin/s", "pool wait p99 ms", "p99 ms",
           "behaviour")


def _num(r: Mapping[str, Any], key: str, spec: str) -> str:
    """A float column of the trial, ``-`` when absent (older runs) or NaN (nothing measured)."""
    value = r.get(key)
    if value is None or math.isnan(float(value)):
        return "-"
    return format(float(value), spec)


def fault_line(r: Mapping[str, Any]) -> list[str]:
    at = r.get("fault_at_s")
    requests, errors = int(r.get("fault_requests") or 0), int(r.get("fault_errors") or 0)
    lost = int(r.get("workers_lost") or 0)
    return [
        str(r["trial"]), str(r["strategy"]), str(r.get("fault") or "-"),
        "-" if at is None or math.isnan(float(at)) else f"{float(at):.2f}",
        "yes" if r.get("complete") else f"no ({lost} worker{'s' if lost != 1 else ''} lost)",
        f"{requests:,}", f"{errors:,}", f"{int(r.get('fault_served') or 0):,}",
        f"{int(r.get('fault_origin_calls') or 0):,}", _num(r, "pre_fault_origin_per_s", ",.0f"),
        _num(r, "fault_origin_per_s", ",.0f"), _num(r, "fault_pool_wait_p99_ms", ",.1f"),
        _num(r, "fault_p99_ms", ",.1f"), behaviour(requests, errors),
    ]


def render(trials: Iterable[Mapping[str, Any]]) -> str:
    """Counts are over requests started while the fault held (its instant to its lift);
    ``origin/s before`` is the same trial from its start to the fault: the load it rose from."""
    return ("under fault (requests started while it held):\n"
            + grid(COLUMNS, [fault_line(r) for r in trials], left=len(COLUMNS)))
