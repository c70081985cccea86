"""Vectorised analysis of a run directory for the report: nothing here loops over request rows.

Each trial partition is read on its own with only the columns needed (pyarrow projection), so
memory holds one strategy's rows at most, never the whole run. The figures are results.figures':
exact percentiles (linear interpolation over all rows, errors included) over the clients' requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as ds

from results.figures import consistency, groups, repeats, scan
from results.figures.intervals import Estimate
from results.outputs import event_table
from results.store import rundir

BIN_NS = 100_000_000  # origin calls are counted per 100 ms


@dataclass
class Timeline:
    """Origin calls per 100 ms of one trial, with its expiry instants (seconds from start)."""

    trial: int
    strategy: str
    repeat: int
    counts: np.ndarray
    expiries_s: list[float]  # observed events (for runs made before they were: the scheduled)
    scheduled_s: list[float]  # scheduled instants an observed expiry did not keep (> 1 ms off)
    window_s: tuple[float, float]


@dataclass
class VersionPanel:
    """Versions served against versions committed on one trial's hottest written key."""

    trial: int
    strategy: str
    repeat: int
    start_ns: int  # the trial's common start instant: the plot's zero
    series: consistency.VersionSeries


@dataclass
class RunData:
    root: Path
    meta: dict[str, Any]
    trials: list[dict[str, Any]]
    columns: set[str]
    timelines: list[Timeline] = field(default_factory=list)
    latency: list[dict[str, Any]] = field(default_factory=list)  # one row per strategy
    endpoints: list[dict[str, Any]] = field(default_factory=list)  # per strategy and op
    stages: list[dict[str, Any]] = field(default_factory=list)  # per strategy, stage and op
    statements: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # expiries.parquet, per event
    versions: list[VersionPanel] = field(default_factory=list)  # per strategy with writes
    windows: dict[int, repeats.TrialEvents] = field(default_factory=dict)  # per trial, its events
    estimates: dict[str, dict[str, Estimate]] = field(default_factory=dict)  # per strategy


def load(root: Path) -> RunData:
    """Everything the report shows, computed from raw rows and the run's recorded configuration."""
    dataset = rundir.requests_dataset(root)
    meta = rundir.read_meta(root)
    trials = rundir.read_trials(root).to_pylist()
    statements = rundir.read_statements(root)
    data = RunData(root, meta, trials, set(dataset.schema.names),
                   statements=statements.to_pylist() if statements is not None else [])
    plans = {int(t["trial"]): t for t in meta.get("trials", [])}
    data.events = event_table.event_rows(root)
    events: dict[int, list[dict[str, Any]]] = {}
    for event in data.events:
        events.setdefault(int(event["trial"]), []).append(event)
    for row in trials:
        plan = plans.get(int(row["trial"]))
        if plan is not None:
            data.timelines.append(timeline(dataset, row, plan, float(meta["spec"]["seconds"]),
                                           events.get(int(row["trial"]))))
    data.latency, data.endpoints, data.stages = _strategy_figures(
        rundir.requests_dataset(root, dictionaries=True), trials)
    if len({r["stage"] for r in data.stages}) < 2:
        data.stages = []  # one stage: the per-endpoint table says it all
    data.versions = version_panels(dataset, trials, plans)
    data.windows = repeats.events_of(rundir.read_expiries(root))
    data.estimates = repeats.per_strategy(trials, data.windows)
    return data


def version_panels(dataset: ds.Dataset, trials: Sequence[Mapping[str, Any]],
                   plans: Mapping[int, Mapping[str, Any]]) -> list[VersionPanel]:
    """For the first trial with writes of each strategy (one panel per strategy keeps the report
    readable), its hottest written key's versions; none for runs made before versions."""
    if not set(consistency.COLUMNS) <= set(dataset.schema.names):
        return []
    first: dict[str, Mapping[str, Any]] = {}
    for t in trials:
        if (t.get("writes") or 0) > 0 and int(t["trial"]) in plans:
            first.setdefault(str(t["strategy"]), t)
    panels = []
    for strategy, t in first.items():
        rows = dataset.to_table(columns=list(consistency.COLUMNS),
                                filter=ds.field("trial") == int(t["trial"]))
        key = consistency.hottest_written_key(rows)
        if key is not None:
            panels.append(VersionPanel(int(t["trial"]), strategy, int(t["repeat"]),
                                       int(plans[int(t["trial"])]["start_ns"]),
                                       consistency.version_series(rows, key)))
    return panels


def _strategy_figures(dataset: ds.Dataset, trials: Sequence[Mapping[str, Any]]
                      ) -> tuple[list[dict[str, Any]], ...]:
    """Per strategy its latency over the window's client requests, per strategy and endpoint
    and per strategy, stage and endpoint their figures: one two-pass scan of every row, in the
    run's order of strategies, each with its cache round-trip floor."""
    groupings = [groups.Grouping(("strategy",), groups.window_requests, latency_only=True),
                 groups.Grouping(("strategy", "op"), groups.window_reads),
                 groups.Grouping(groups.STAGE_KEYS, groups.after_warmup)]
    found = groups.scan_groups(scan.dataset_source(dataset), groupings)
    order = {s: i for i, s in enumerate(dict.fromkeys(str(t["strategy"]) for t in trials))}
    floor = {s: min((float(t["floor_ms"]) for t in trials if t["strategy"] == s),
                    default=float("nan")) for s in order}
    return tuple(sorted(({**g, "floor_ms": floor.get(g["strategy"], float("nan"))} for g in rows),
                        key=lambda g: order.get(g["strategy"], len(order))) for rows in found)


def stage_figures(dataset: ds.Dataset, trials: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per strategy, stage and endpoint after warm-up (results.figures.groups.stage_rows), in
    one scan of flat memory; none for runs made before stages were recorded."""
    if "stage" not in dataset.schema.names:
        return []
    return groups.stage_rows(scan.dataset_source(dataset))


def timeline(dataset: ds.Dataset, row: Mapping[str, Any], plan: Mapping[str, Any],
             seconds: float, events: Sequence[Mapping[str, Any]] | None = None) -> Timeline:
    start, ttl_ns = int(plan["start_ns"]), int(float(row["ttl_s"]) * 1e9)
    end = start + int(seconds * 1e9)
    called = dataset.to_table(
        columns=["origin_called", "origin_start_ns"],
        filter=(ds.field("trial") == int(row["trial"])) & (ds.field("origin_called") > 0))
    offsets = pc.subtract(called["origin_start_ns"], start).to_numpy()
    weights = called["origin_called"].to_numpy().astype(np.int64)
    keep = (offsets >= 0) & (offsets < end - start)
    bins = int(np.ceil((end - start) / BIN_NS))
    counts = np.bincount(offsets[keep] // BIN_NS, weights=weights[keep], minlength=bins)
    window = ((int(plan["window_start_ns"]) - start) / 1e9, (int(plan["window_end_ns"]) - start) / 1e9)
    observed, scheduled = _instants(plan, events, start, end, ttl_ns)
    return Timeline(int(row["trial"]), str(row["strategy"]), int(row["repeat"]),
                    counts[:bins].astype(np.int64), observed, scheduled, window)


def _instants(plan: Mapping[str, Any], events: Sequence[Mapping[str, Any]] | None, start: int,
              end: int, ttl_ns: int) -> tuple[list[float], list[float]]:
    """Observed events, and the scheduled instants they missed; a run made before events were
    observed has only the schedule (first expiry, then one every TTL)."""
    if events is None:
        first = int(plan["first_expiry_ns"])
        return ([(t - start) / 1e9 for t in range(first, end, ttl_ns)] if ttl_ns > 0 else []), []
    inside = [e for e in events if 0 <= e["at_s"] < (end - start) / 1e9]
    missed = [e["scheduled_s"] for e in inside
              if e["scheduled_s"] is not None and abs(e["at_s"] - e["scheduled_s"]) > 1e-3]
    return [e["at_s"] for e in inside], missed
