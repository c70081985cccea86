"""``coordinator compare RUN_A RUN_B``: how the runs were configured (what differs, first), then
per strategy the verdict of each figure (its difference with a 95 % interval: ``different`` or
``not distinguishable``), then the same trials side by side with the change of each figure.

Trials are matched by (strategy label, repeat); a trial present in only one run is listed as
such. Two runs of one strategy each, none in common, are compared with each other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from results.figures import repeats
from results.outputs import config_diff, verdicts
from results.outputs.text import grid

FIGURES = (("origin_per_expiry", "origin/expiry", ".1f"), ("rps", "rps", ",.0f"),
           ("p50_ms", "p50 ms", ".2f"), ("p99_ms", "p99 ms", ".1f"), ("max_ms", "max ms", ".1f"),
           ("error_rate", "error rate", ".2%"), ("peak_origin_inflight", "peak", ".0f"))
HEAD = ("strategy", "repeat", "figure", "A", "B", "change", "change %")


def _number(value: Any) -> float:
    return float(value) if value is not None else float("nan")


def _fmt(value: float, fmt: str) -> str:
    return "n/a" if math.isnan(value) else format(value, fmt)


def rows(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One line per matched trial and figure: A, B, B - A and the relative change."""
    index_b = {(str(t["strategy"]), int(t["repeat"])): t for t in b}
    out = []
    for ta in a:
        key = (str(ta["strategy"]), int(ta["repeat"]))
        tb = index_b.pop(key, None)
        if tb is None:
            out.append([key[0], str(key[1]), "(only in A)", "", "", "", ""])
            continue
        for name, label, fmt in FIGURES:
            va, vb = _number(ta.get(name)), _number(tb.get(name))
            rel = (vb - va) / va if va not in (0.0,) and not math.isnan(va) else float("nan")
            out.append([key[0], str(key[1]), label, _fmt(va, fmt), _fmt(vb, fmt),
                        ("+" if vb - va >= 0 else "") + _fmt(vb - va, fmt), _fmt(rel, "+.1%")])
    out.extend([s, str(r), "(only in B)", "", "", "", ""] for s, r in index_b)
    return out


def render(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> str:
    return grid(HEAD, rows(a, b), left=3)


def pairs(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The strategies compared: every label both runs have, in A's order; runs of one strategy
    each with none in common (a run of naive against a run of lock-dc): those two."""
    names_a = list(dict.fromkeys(str(t["strategy"]) for t in a))
    names_b = list(dict.fromkeys(str(t["strategy"]) for t in b))
    common = [(n, n) for n in names_a if n in names_b]
    if not common and len(names_a) == 1 and len(names_b) == 1:
        return [(names_a[0], names_b[0])]
    return common


def render_verdicts(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]],
                    events_a: Mapping[int, repeats.TrialEvents],
                    events_b: Mapping[int, repeats.TrialEvents]) -> str:
    """Per strategy over its repeats: each figure of A and B with its interval, B - A with its
    interval, and ``different`` or ``not distinguishable`` (results.figures.repeats)."""
    found_a, found_b = repeats.per_strategy(a, events_a), repeats.per_strategy(b, events_b)
    compared = [(x if x == y else f"{x} / {y}", found_a[x], found_b[y]) for x, y in pairs(a, b)]
    if not compared:
        return "verdicts: no strategy in both runs"
    return ("verdicts per strategy over its repeats (B - A, at 95 %):\n"
            + grid(verdicts.VERDICT_HEAD, verdicts.verdict_rows(compared), left=2))


def render_runs(meta_a: Mapping[str, Any], a: Sequence[Mapping[str, Any]],
                meta_b: Mapping[str, Any], b: Sequence[Mapping[str, Any]],
                events_a: Mapping[int, repeats.TrialEvents] | None = None,
                events_b: Mapping[int, repeats.TrialEvents] | None = None) -> str:
    """The configuration section first, then the verdicts, then the figures trial by trial."""
    return (f"{config_diff.render(meta_a, meta_b)}\n\n"
            f"{render_verdicts(a, b, events_a or {}, events_b or {})}\n\n"
            f"figures (B - A):\n{render(a, b)}")
