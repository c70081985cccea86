"""The summary table: one line per strategy, medians over repeats, every repeat's origin figure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from results.checks import origin_mismatch, saturation_reason

COLUMNS = ("strategy", "origin/expiry (each run)", "median", "rps", "p50 ms", "p99 ms",
           "errors", "waits", "stale", "stale age max ms", "local hits", "refresh", "peak",
           "spread ms", "db check", "generator")


def group_by_strategy(trials: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in trials:
        groups.setdefault(str(row["strategy"]), []).append(row)
    return groups


def _median(rows: list[Mapping[str, Any]], key: str) -> float:
    values = [float(r[key]) for r in rows if r[key] is not None and not math.isnan(float(r[key]))]
    return statistics.median(values) if values else float("nan")


def _spread(rows: list[Mapping[str, Any]]) -> str:
    """The worst start spread over repeats: how far apart the workers' first requests were."""
    values = [float(v) for r in rows if (v := r.get("start_spread_ms")) is not None
              and not math.isnan(float(v))]
    return f"{max(values):.1f}" if values else "n/a"


def _get(row: Mapping[str, Any], key: str, default: float = float("nan")) -> float:
    """A column that older runs lack (columns are only ever added)."""
    value = row.get(key)
    return default if value is None else float(value)


def _fmt_ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"


def strategy_line(name: str, rows: list[Mapping[str, Any]]) -> list[str]:
    requests = sum(int(r["requests"]) for r in rows)
    errors = sum(int(r["errors"]) for r in rows)
    matches = all(bool(r["db_calls_match"]) for r in rows)
    db = "ok" if matches else "MISMATCH " + ",".join(
        f"{r['origin_calls_total']}≠{r['db_calls']}" for r in rows if not r["db_calls_match"])
    p50 = _median(rows, "p50_ms")
    return [
        name,
        " ".join(f"{float(r['origin_per_expiry']):.1f}" for r in rows),
        f"{_median(rows, 'origin_per_expiry'):.1f}",
        f"{_median(rows, 'rps'):,.0f}",
        f"{p50:.2f}" + ("!" if any(r["below_floor"] for r in rows) else ""),
        f"{_median(rows, 'p99_ms'):.1f}",
        f"{errors / requests:.2%}" if requests else "n/a",
        f"{sum(int(r['waits']) for r in rows):,}",
        f"{sum(int(r['stale_served']) for r in rows):,}",
        _fmt_ms(max((a for r in rows if not math.isnan(a := _get(r, "stale_age_max_ms"))),
                    default=float("nan"))),
        f"{sum(int(_get(r, 'local_hits', 0)) for r in rows):,}",
        f"{sum(int(_get(r, 'refreshes', 0)) for r in rows):,}",
        f"{max(int(r['peak_origin_inflight']) for r in rows)}",
        _spread(rows),
        db,
        _generator(rows),
    ]


def _generator(rows: list[Mapping[str, Any]]) -> str:
    """``ok``, ``SATURATED`` (latencies inflated) or ``n/a`` for runs made before the check."""
    flags = [r.get("saturated") for r in rows]
    if all(f is None for f in flags):
        return "n/a"
    return "SATURATED" if any(flags) else "ok"


def render(trials: Iterable[Mapping[str, Any]]) -> str:
    """A plain-text table; ``!`` after p50 marks a result faster than the physical floor."""
    rows = [strategy_line(name, group) for name, group in group_by_strategy(trials).items()]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(COLUMNS, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(v.ljust(w) if i < 2 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(lines)


def notes(trials: Iterable[Mapping[str, Any]]) -> list[str]:
    """Warnings a reader must see under the table."""
    out = []
    for r in trials:
        where = f"trial {r['trial']} ({r['strategy']})"
        if r["below_floor"]:
            out.append(f"{where}: p50 {r['p50_ms']:.3f} ms is below "
                       f"the cache round-trip floor {r['floor_ms']:.3f} ms: check the errors")
        if not r["db_calls_match"]:
            out.append(f"{where}: {origin_mismatch(r['origin_calls_total'], r['db_calls'])}")
        if r["errors"]:
            out.append(f"{where}: {r['errors']} errors: {r['error_types']}")
        if r.get("saturated"):
            out.append(f"{where}: load generator saturated ({saturation_reason(r)}): "
                       "its latencies are inflated")
    return out
