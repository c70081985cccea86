"""A strategy's figures over its repeats, the difference of two, and the order of defences.

Computed once here from ``trials.parquet`` and ``expiries.parquet``; the summary table, its
verdicts, ``coordinator compare`` and the report read it (docs/results.md, "Intervals").

- **Per-event figures** (origin calls per event, waits per event, the herds' median and p90)
  pool the events of every repeat: calls of all the window's events / those events. Their
  interval is a two-stage bootstrap: draw the repeats with replacement, then each drawn
  repeat's events with replacement, and pool. One repeat: the trial's own bootstrap (the same
  numbers as its ``*_lo`` / ``*_hi``).
- **Other figures** (p50, p99, rps, stale share) are the median of the repeats, as experiment
  000 printed. Their interval draws the repeats with replacement, then each drawn repeat's
  figure from its own interval (results.figures.intervals.draws_from), and takes the median.
  One repeat: the trial's own interval.
- **A difference** B - A is the difference of independent draws of the two; it is
  ``different`` when its 95 % interval leaves out 0, else ``not distinguishable``.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from results.figures import intervals, rates
from results.figures.intervals import DRAWS, MIN_UNITS, NAN, Estimate

# Per-event figures: column of trials.parquet -> (expiries.parquet column, statistic, need)
EVENT_MEAN = {"origin_per_expiry": "calls", "waits_per_event": "waits"}
EVENT_QUANTILE = {"herd_median": 0.5, "herd_p90": 0.9}
# Median-of-repeats figures: column -> (unit, the trials.parquet column counting the units, need)
OTHERS: dict[str, tuple[str, str, int]] = {
    "p50_ms": ("requests", "requests", intervals.fewest_for(0.5)),
    "p99_ms": ("requests", "requests", intervals.fewest_for(0.99)),
    "rps": ("seconds", "rate_bins", MIN_UNITS),
    "stale_share": ("seconds", "rate_bins", MIN_UNITS),
}
HEADLINE = ("origin_per_expiry", "p50_ms", "p99_ms", "rps")
VERDICT_FIGURES = (*HEADLINE, "stale_share", "waits_per_event")
DIFFERENT, SAME = "different", "not distinguishable"
# A latency or rate interval of one trial holds its rows' sampling only, not how runs differ
# (measured: another run's p99 falls outside it far more often than 5 %: docs/results.md).
WITHIN_RUN = "(one run each side: --repeat to include run-to-run variation)"


@dataclass(frozen=True)
class TrialEvents:
    """A trial's window events: each one's origin calls and waits (None: not recorded)."""

    calls: np.ndarray
    waits: np.ndarray | None


def events_of(expiries: pa.Table | None) -> dict[int, TrialEvents]:
    """The window's events of each trial (none for runs made before events were observed)."""
    if expiries is None:
        return {}
    out: dict[int, TrialEvents] = {}
    has_waits = "waits" in expiries.column_names
    rows = expiries.select([c for c in ("trial", "in_window", "calls", "waits")
                            if c in expiries.column_names]).to_pylist()
    by_trial: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row["in_window"]:
            by_trial.setdefault(int(row["trial"]), []).append(row)
    for trial, mine in by_trial.items():
        waits = [r["waits"] for r in mine] if has_waits else None
        out[trial] = TrialEvents(np.array([r["calls"] for r in mine], np.float64),
                                 None if waits is None or None in waits
                                 else np.array(waits, np.float64))
    return out


def _number(row: Mapping[str, Any], key: str) -> float:
    value = row.get(key)
    return NAN if value is None else float(value)


def trial_estimate(row: Mapping[str, Any], figure: str) -> Estimate:
    """One trial's figure as trials.parquet holds it: its ends NaN when its method had too few
    units, null in runs made before intervals (then it claims nothing about them)."""
    if row.get(f"{figure}_lo") is None and row.get(f"{figure}_hi") is None:
        return Estimate(_number(row, figure))
    if figure in OTHERS:
        unit, counted, need = OTHERS[figure]
        if counted == "rate_bins" and row.get("ttl_s"):  # the bins: TTL periods or seconds
            unit = rates.bin_unit(round(float(row["ttl_s"]) * 1e9))
    else:
        unit, counted = "events", "expiry_events"
        need = intervals.fewest_for(EVENT_QUANTILE[figure]) if figure in EVENT_QUANTILE else MIN_UNITS
    n = _number(row, counted)
    return Estimate(_number(row, figure), _number(row, f"{figure}_lo"), _number(row, f"{figure}_hi"),
                    0 if math.isnan(n) else int(n), unit, need)


def strategy_estimates(trials: Sequence[Mapping[str, Any]],
                       events: Mapping[int, TrialEvents]) -> dict[str, Estimate]:
    """Every figure of one strategy over its repeats (``trials``: its rows)."""
    out = {f: _others(trials, f) for f in OTHERS}
    found = [events.get(int(t["trial"])) if t.get("trial") is not None else None for t in trials]
    known = [e for e in found if e is not None]
    for figure, column in EVENT_MEAN.items():
        groups = [e.calls if column == "calls" else e.waits for e in known]
        out[figure] = (_pooled(groups, np.nanmean, MIN_UNITS, widen=True)
                       if len(known) == len(trials) and all(g is not None for g in groups)
                       else _others(trials, figure))
    for figure, q in EVENT_QUANTILE.items():
        out[figure] = (_pooled([e.calls for e in known], _nan_quantile(q), intervals.fewest_for(q))
                       if len(known) == len(trials) and len(trials) > 1 else _others(trials, figure))
    return out


def per_strategy(trials: Sequence[Mapping[str, Any]],
                 events: Mapping[int, TrialEvents]) -> dict[str, dict[str, Estimate]]:
    """``strategy_estimates`` of every strategy label, in the run's order."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        groups.setdefault(str(t["strategy"]), []).append(t)
    return {name: strategy_estimates(rows, events) for name, rows in groups.items()}


def herd_max(trials: Sequence[Mapping[str, Any]], events: Mapping[int, TrialEvents]) -> Estimate:
    """The largest herd over one strategy's repeats' window events pooled, with the two-stage
    bootstrap interval (the largest of a resample: the same units as the per-event figures).
    Why here: ``coordinator simulate --validate`` gates on it, and it must be the measured
    readers' computation, not a copy."""
    found = [events.get(int(t["trial"])) for t in trials if t.get("trial") is not None]
    if len(found) != len(trials) or any(e is None for e in found):
        return Estimate(max((_number(t, "herd_max") for t in trials), default=NAN))
    return _pooled([e.calls for e in found if e is not None], _nan_max, MIN_UNITS)


def _nan_max(values: np.ndarray, axis: int) -> Any:
    return np.nanmax(values, axis=axis)


def _nan_quantile(q: float) -> Callable[..., Any]:
    def stat(values: np.ndarray, axis: int) -> Any:
        return np.nanquantile(values, q, axis=axis)
    return stat


def _pooled(groups: Sequence[np.ndarray | None], stat: Callable[..., Any], need: int,
            widen: bool = False) -> Estimate:
    """``stat`` over every repeat's events pooled, with the two-stage bootstrap interval."""
    kept = [np.asarray(g, np.float64) for g in groups if g is not None]
    pooled = np.concatenate(kept) if kept else np.zeros(0)
    n = int(pooled.size)
    value = float(stat(pooled[None, :], axis=1)[0]) if n else NAN
    if n < need or math.isnan(value):
        return Estimate(value, n=n, need=need)
    if len(kept) == 1 and widen:
        return intervals.bootstrap(pooled, need=need)
    rng = intervals.rng_for(*kept)
    slots, longest = len(kept), max(g.size for g in kept)
    picks = rng.integers(0, slots, (DRAWS, slots))
    drawn = np.full((DRAWS, slots * longest), np.nan)
    for slot in range(slots):
        for r, values in enumerate(kept):
            rows = np.flatnonzero(picks[:, slot] == r)
            if rows.size and values.size:
                chosen = values[rng.integers(0, values.size, (rows.size, values.size))]
                drawn[rows, slot * longest:slot * longest + values.size] = chosen
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a draw of empty repeats only: dropped
        raw = np.asarray(stat(drawn, axis=1), np.float64)
    raw = raw[np.isfinite(raw)]
    if widen:
        found = intervals.widened(value, raw, n, "events", need,
                                  (float(pooled.min()), float(pooled.max())))
        return replace(found, runs=len(kept))
    lo, hi = intervals.interval_of(raw)
    return Estimate(value, min(lo, value), max(hi, value), n, "events", need, raw, len(kept))


def _others(trials: Sequence[Mapping[str, Any]], figure: str) -> Estimate:
    """The median of the repeats' figure, each drawn from its own interval (module docstring)."""
    each = [trial_estimate(t, figure) for t in trials]
    values = [e.value for e in each if not math.isnan(e.value)]
    value = statistics.median(values) if values else NAN
    fewest = min(each, key=lambda e: e.n)
    if len(each) == 1:
        return each[0]
    if not all(e.known for e in each):
        return Estimate(value, n=fewest.n, unit=fewest.unit, need=fewest.need, runs=len(each))
    rng = intervals.rng_for(np.array([[e.value, e.lo, e.hi] for e in each]))
    picks = rng.integers(0, len(each), (DRAWS, len(each)))
    v, lo, hi = (np.array([getattr(e, k) for e in each]) for k in ("value", "lo", "hi"))
    z = rng.standard_normal(picks.shape)
    width = np.where(z < 0, v[picks] - lo[picks], hi[picks] - v[picks]) / intervals.Z
    raw = np.median(v[picks] + z * width, axis=1)
    low, high = intervals.interval_of(raw)
    return Estimate(value, min(low, value), max(high, value), fewest.n, fewest.unit, fewest.need, raw,
                    len(each))


@dataclass(frozen=True)
class Difference:
    """B - A of one figure, with its 95 % interval and the verdict."""

    figure: str
    a: Estimate
    b: Estimate
    value: float
    lo: float = NAN
    hi: float = NAN

    @property
    def verdict(self) -> str:
        for side, e in (("A", self.a), ("B", self.b)):
            if (few := e.too_few) is not None:
                return f"{side} {few}"
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            return "no interval"
        if not (self.lo > 0 or self.hi < 0):
            return SAME
        if self.figure in OTHERS and min(self.a.runs, self.b.runs) == 1:
            return f"{DIFFERENT} {WITHIN_RUN}"
        return DIFFERENT


def difference(figure: str, a: Estimate, b: Estimate) -> Difference:
    """B - A; its interval from independent draws of the two (none when either has none)."""
    value = b.value - a.value
    da, db = a.sample(), b.sample()
    if da is None or db is None or not da.size or not db.size:
        return Difference(figure, a, b, value)
    rng = intervals.rng_for(da[:50], db[:50])
    diff = rng.choice(db, DRAWS) - rng.choice(da, DRAWS)
    lo, hi = intervals.interval_of(diff)
    return Difference(figure, a, b, value, min(lo, value), max(hi, value))


def order(estimates: Mapping[str, Estimate]) -> list[tuple[str, str]]:
    """The names by ascending figure, each with how it stands to the one before: ``<``
    (distinguishable at 95 %) or ``~`` (not, or no interval to tell); the first has ``""``."""
    ranked = sorted((n for n, e in estimates.items() if not math.isnan(e.value)),
                    key=lambda n: estimates[n].value)
    out: list[tuple[str, str]] = []
    for i, name in enumerate(ranked):
        if i == 0:
            out.append((name, ""))
            continue
        step = difference("", estimates[ranked[i - 1]], estimates[name])
        out.append((name, "<" if step.verdict.startswith(DIFFERENT) else "~"))
    return out
