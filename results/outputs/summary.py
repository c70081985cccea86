"""A finished run on the terminal: the summary table and its notes, the fault table, and the
workload's own tables. ``coordinator launch`` prints it at the end, ``coordinator report`` again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from model.workload import InvalidWorkload, KeyKind, Workload
from results.figures import repeats
from results.outputs import event_table, fault_table, report_data, table, verdicts
from results.outputs.text import grid
from results.store import rundir


def render_summary(root: Path, events: bool = False, target_width: float | None = None) -> str:
    """Everything printed about the run in ``root``, as one text; ``events``: with the
    per-event table (``coordinator report``); ``target_width``: the notes say what an interval
    that narrow (percent of the figure) would take."""
    trials = rundir.read_trials(root).to_pylist()
    windows = repeats.events_of(rundir.read_expiries(root))
    found = repeats.per_strategy(trials, windows)
    parts = [table.render(trials, windows, found), *(f"note: {note}" for note in table.notes(trials))]
    if target_width is not None:
        parts.extend(f"note: {n}" for n in verdicts.target_notes(found, trials, target_width))
    if text := verdicts.run_verdicts(found):
        parts.append(text)
    if any(t.get("fault") for t in trials):
        parts.append("\n" + fault_table.render(trials))
    load, stages = workload_tables(rundir.read_meta(root))
    if load:
        parts.append("\n" + render_load(trials))
    if stages:
        figures = report_data.stage_figures(rundir.requests_dataset(root, dictionaries=True), trials)
        parts.append("\nper stage and endpoint (after warm-up):\n" + render_stages(figures))
    rows = event_table.event_rows(root) if events else []
    if rows:
        parts.append("\nexpiry events and their herds (seconds from each trial's start):\n"
                     + event_table.render(rows))
    return "\n".join(parts)


def workload_tables(meta: Mapping[str, Any]) -> tuple[bool, bool]:
    """Which of the load table and the per-stage table the run's workload calls for: peak origin
    rate and open-loop sends for all but the plain hot-key closed loop; per stage and endpoint
    when there are several. A run made before workloads were recorded gets neither."""
    try:
        workload = Workload.from_json(meta.get("spec", {}).get("workload"))
    except InvalidWorkload:
        return False, False
    plain = not workload.open_loop and all(ep.keys.kind is KeyKind.HOT for ep in workload.endpoints)
    return not plain, workload.stages > 1 or len(workload.endpoints) > 1


# Per-stage and per-endpoint tables; their figures come from results.figures.groups.stage_rows.
STAGE_COLUMNS = ("strategy", "stage", "bypass", "endpoint", "requests", "rps", "hit %", "p50 ms",
                 "p99 ms", "pool wait p99 ms", "query p99 ms", "origin calls", "errors", "late",
                 "dropped")
LOAD_COLUMNS = ("strategy", "repeat", "origin calls", "peak origin/s", "late sends", "dropped sends")


def _cells(r: Mapping[str, Any]) -> list[str]:
    return [str(r["strategy"]), str(r["stage"]), f"{r['bypass_pct']:.0f}%", str(r["endpoint"]),
            f"{r['requests']:,}", f"{r['rps']:,.0f}", f"{r['hit_pct']:.0f}", f"{r['p50_ms']:.1f}",
            f"{r['p99_ms']:.1f}", f"{r['pool_wait_p99_ms']:.1f}", f"{r['query_p99_ms']:.1f}",
            f"{r['origin_calls']:,}", f"{r['errors']:,}", f"{r['late_sends']:,}",
            f"{r['dropped_sends']:,}"]


def render_stages(stage_figures: Iterable[Mapping[str, Any]]) -> str:
    """The per-stage, per-endpoint table (p99 next to pool-wait p99 and query p99)."""
    return grid(STAGE_COLUMNS, [_cells(r) for r in stage_figures])


def _window_calls(t: Mapping[str, Any]) -> int:
    """Origin calls started in the window (runs made before events were observed: origin_calls)."""
    value = t.get("window_origin_calls")
    return int(t["origin_calls"] if value is None else value)


def render_load(trials: Iterable[Mapping[str, Any]]) -> str:
    """Per trial: the origin calls started in the window (all of them, cold fills too), the peak
    in one second (the herd's rate) and the open-loop sends."""
    return grid(LOAD_COLUMNS, [[str(t["strategy"]), str(t["repeat"]), f"{_window_calls(t):,}",
                                f"{t['peak_origin_per_s'] or 0:,}", f"{t['late_sends'] or 0:,}",
                                f"{t['dropped_sends'] or 0:,}"] for t in trials])
