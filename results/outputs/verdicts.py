"""Figures with their intervals as text: the cells ``145.3 [121.0, 170.2]``, the verdicts of a
run with several strategies, the order of defences, and what a ``--target-width`` would take.

Every number comes from results.figures.repeats (computed once); this module only writes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from results.figures import intervals, repeats
from results.figures.intervals import Estimate
from results.outputs.text import grid

LABELS = {"origin_per_expiry": "origin/expiry", "p50_ms": "p50 ms", "p99_ms": "p99 ms",
          "rps": "rps", "stale_share": "stale share", "waits_per_event": "waits/event",
          "herd_median": "herd p50", "herd_p90": "herd p90"}
FORMATS = {"rps": ",.0f", "stale_share": ".2%"}
VERDICT_HEAD = ("strategy", "figure", "A", "B", "B - A [95 %]", "verdict")


def number(value: float, figure: str) -> str:
    """One figure's number: ms with the digits that matter, rps whole, shares in percent."""
    if math.isnan(value):
        return "n/a"
    if figure.endswith("_ms"):
        return f"{value:.3f}" if abs(value) < 0.1 else f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
    return format(value, FORMATS.get(figure, ".1f"))


def cell(e: Estimate, figure: str, mark: str = "") -> str:
    """``145.3 [121.0, 170.2]``; ``145.3 (n=3: too few events)`` when its method needs more."""
    text = number(e.value, figure) + mark
    if (few := e.too_few) is not None:
        return f"{text} ({few})"
    if e.known:
        return f"{text} [{number(e.lo, figure)}, {number(e.hi, figure)}]"
    return text


def signed(value: float, figure: str) -> str:
    text = number(value, figure)
    return text if text.startswith("-") or text == "n/a" else "+" + text


def difference_cell(d: repeats.Difference) -> str:
    if not (math.isfinite(d.lo) and math.isfinite(d.hi)):
        return signed(d.value, d.figure)
    return f"{signed(d.value, d.figure)} [{signed(d.lo, d.figure)}, {signed(d.hi, d.figure)}]"


def verdict_rows(pairs: Sequence[tuple[str, Mapping[str, Estimate], Mapping[str, Estimate]]]
                 ) -> list[list[str]]:
    """One line per (label, figure): A, B, B - A with its interval, the verdict."""
    out = []
    for label, a, b in pairs:
        for figure in repeats.VERDICT_FIGURES:
            d = repeats.difference(figure, a[figure], b[figure])
            if math.isnan(d.value) and math.isnan(a[figure].value):
                continue  # a figure neither side has (an older run)
            out.append([label, LABELS[figure], cell(a[figure], figure), cell(b[figure], figure),
                        difference_cell(d), d.verdict])
    return out


def order_line(figure: str, estimates: Mapping[str, Mapping[str, Estimate]]) -> str:
    """``lock-dc 1.0 < lock 2.0 ~ swr 2.1 < naive 145.3``, ascending."""
    ranked = repeats.order({name: e[figure] for name, e in estimates.items()})
    parts = [f"{rel} {name} {number(estimates[name][figure].value, figure)}".strip()
             for name, rel in ranked]
    return " ".join(parts)


def run_verdicts(estimates: Mapping[str, Mapping[str, Estimate]]) -> str:
    """A run with several strategies: each against the first, then the order per figure."""
    names = list(estimates)
    if len(names) < 2:
        return ""
    first = names[0]
    rows = verdict_rows([(name, estimates[first], estimates[name]) for name in names[1:]])
    order = [[LABELS[f], line] for f in repeats.VERDICT_FIGURES if (line := order_line(f, estimates))]
    return "\n".join([
        f"\nverdicts, each strategy (B) against {first} (A), at 95 %:",
        grid(VERDICT_HEAD, rows, left=2),
        "\norder, lowest first: '<' distinguishable from the one before at 95 %, '~' not "
        "(a tie: read pairwise between neighbours; latency and rps of one run each: within it):",
        grid(("figure", "order"), order, left=2)])


def target_notes(estimates: Mapping[str, Mapping[str, Estimate]],
                 trials: Sequence[Mapping[str, Any]], target_pct: float) -> list[str]:
    """For each strategy and headline figure wider than ``target_pct`` % (or without an
    interval): how many times the units, seconds per trial or repeats it would take."""
    out = []
    for name, found in estimates.items():
        mine = [t for t in trials if str(t["strategy"]) == name]
        for figure in repeats.HEADLINE:
            if (note := _target_note(found[figure], figure, mine, target_pct)) is not None:
                out.append(f"{name}: {note}")
    return out


def _target_note(e: Estimate, figure: str, mine: Sequence[Mapping[str, Any]],
                 target_pct: float) -> str | None:
    if math.isnan(e.value):
        return None
    if e.too_few is not None:
        factor, why = (e.need / e.n if e.n else math.inf), f"{e.too_few}, {e.need} needed"
    else:
        factor = intervals.needed(e, target_pct / 100)
        if math.isnan(factor) or factor <= 1:
            return None
        why = f"{cell(e, figure)} is {100 * e.width():.0f} % wide"
    window = statistics_mean(mine, "window_s")
    repeat = len(mine)
    if not math.isfinite(factor):
        return f"{LABELS[figure]}: {why}: no {e.unit} in the window to scale from"
    return (f"{LABELS[figure]}: {why}; {target_pct:g} % needs about {factor:.1f}x the {e.unit}: "
            f"a window of {window * factor:,.0f} s per trial (--seconds {window * factor:,.0f} "
            f"plus warm-up and drain), or --repeat {math.ceil(repeat * factor)}")


def statistics_mean(rows: Sequence[Mapping[str, Any]], key: str) -> float:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else math.nan
