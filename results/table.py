"""The summary table: one line per strategy, medians over repeats, every repeat's origin figure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from results import metrics
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


def _ms(value: float) -> str:
    """Milliseconds with the digits that matter: 0.012 (a local hit), 6.51, 104.4."""
    if math.isnan(value):
        return "n/a"
    return f"{value:.3f}" if value < 0.1 else f"{value:.2f}" if value < 10 else f"{value:.1f}"


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
        _ms(p50) + ("!" if any(r["below_floor"] for r in rows) else ""),
        _ms(_median(rows, "p99_ms")),
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


# Per-stage and per-endpoint figures (issue 4): functions of raw rows, reused by reports.
STAGE_COLUMNS = ("strategy", "stage", "bypass", "endpoint", "requests", "rps", "hit %", "p50 ms",
                 "p99 ms", "pool wait p99 ms", "query p99 ms", "origin calls", "errors", "late",
                 "dropped")


def stage_rows(rows: pa.Table) -> list[dict[str, Any]]:
    """One dict per (strategy, stage, endpoint) over the rows after warm-up (stage >= 0).

    Pool wait and query time are over the rows that reached the origin, so a light endpoint
    whose latency is pool wait (experiment 003) shows it next to its short query time.
    """
    rows = metrics.reads(rows.filter(pc.greater_equal(rows["stage"], 0)))
    out = []
    keys = rows.select(["strategy", "stage", "op"]).group_by(["strategy", "stage", "op"]).aggregate([])
    for strategy, stage, op in sorted(zip(*(keys[c].to_pylist() for c in keys.column_names),
                                          strict=True)):
        group = rows.filter(pc.and_(pc.and_(pc.equal(rows["strategy"], strategy),
                                            pc.equal(rows["stage"], stage)),
                                    pc.equal(rows["op"], op)))
        out.append({"strategy": strategy, "stage": stage, "endpoint": op, **_stage_figures(group)})
    return out


def _stage_figures(group: pa.Table) -> dict[str, Any]:
    n = group.num_rows
    span_ns = (pc.max(group["t_intended_ns"]).as_py() or 0) - (pc.min(group["t_intended_ns"]).as_py() or 0)
    called = group.filter(pc.greater(group["origin_called"], 0))
    p50, p99 = metrics.percentiles_ms(group["latency_ns"], (0.5, 0.99))
    (pool99,) = metrics.percentiles_ms(called["pool_wait_ns"], (0.99,))
    (query99,) = metrics.percentiles_ms(called["origin_ns"], (0.99,))
    return {
        "bypass_pct": 100 * (pc.sum(group["bypass"]).as_py() or 0) / n,
        "requests": n, "rps": n / (span_ns / 1e9) if span_ns > 0 else float("nan"),
        "hit_pct": 100 * (pc.sum(pc.equal(group["outcome"], "hit")).as_py() or 0) / n,
        "p50_ms": p50, "p99_ms": p99, "pool_wait_p99_ms": pool99, "query_p99_ms": query99,
        "origin_calls": int(pc.sum(group["origin_called"]).as_py() or 0),
        "errors": int(pc.sum(pc.equal(group["outcome"], "error")).as_py() or 0),
        **metrics.sends(group),
    }


def _cells(r: Mapping[str, Any]) -> list[str]:
    return [str(r["strategy"]), str(r["stage"]), f"{r['bypass_pct']:.0f}%", str(r["endpoint"]),
            f"{r['requests']:,}", f"{r['rps']:,.0f}", f"{r['hit_pct']:.0f}", f"{r['p50_ms']:.1f}",
            f"{r['p99_ms']:.1f}", f"{r['pool_wait_p99_ms']:.1f}", f"{r['query_p99_ms']:.1f}",
            f"{r['origin_calls']:,}", f"{r['errors']:,}", f"{r['late_sends']:,}",
            f"{r['dropped_sends']:,}"]


def render_grid(columns: Sequence[str], cells: list[list[str]]) -> str:
    """Left-aligned first column, the rest right-aligned."""
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c)
              for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(columns, widths,
                                                                                       strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths,
                                                                                     strict=True)))
              for r in cells]
    return "\n".join(lines)


def render_stages(stage_figures: Iterable[Mapping[str, Any]]) -> str:
    """The per-stage, per-endpoint table (p99 next to pool-wait p99 and query p99)."""
    return render_grid(STAGE_COLUMNS, [_cells(r) for r in stage_figures])


def render_load(trials: Iterable[Mapping[str, Any]]) -> str:
    """Per trial: the peak origin calls in one second (the herd's rate) and the open-loop sends."""
    cells = [[str(t["strategy"]), str(t["repeat"]), f"{t['origin_calls']:,}",
              f"{t['peak_origin_per_s'] or 0:,}", f"{t['late_sends'] or 0:,}",
              f"{t['dropped_sends'] or 0:,}"] for t in trials]
    return render_grid(("strategy", "repeat", "origin calls", "peak origin/s", "late sends",
                        "dropped sends"), cells)
