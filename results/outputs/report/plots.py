"""The report's pictures as PNG bytes (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from results.figures import repeats
from results.figures.intervals import Estimate
from results.outputs.report_data import BIN_NS, Timeline, VersionPanel

_PERCENTILE_LABELS = (("p50_ms", "p50"), ("p90_ms", "p90"), ("p99_ms", "p99"),
                      ("p999_ms", "p99.9"), ("max_ms", "max"))


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def origin_timeline(timelines: Sequence[Timeline]) -> bytes:
    """Origin calls per 100 ms, one panel per strategy (repeats overlaid), expiries marked."""
    strategies = list(dict.fromkeys(t.strategy for t in timelines))
    fig, axes = plt.subplots(len(strategies), 1, figsize=(10, 2.6 * len(strategies) + 0.6),
                             sharex=True, squeeze=False)
    for ax, strategy in zip(axes[:, 0], strategies, strict=True):
        mine = [t for t in timelines if t.strategy == strategy]
        for t in mine:
            x = np.arange(len(t.counts)) * BIN_NS / 1e9
            ax.step(x, t.counts, where="post", label=f"repeat {t.repeat}", linewidth=1.2)
        for i, expiry in enumerate(mine[0].expiries_s):
            ax.axvline(expiry, color="red", linestyle="-", linewidth=0.9, alpha=0.8,
                       label="expiry (observed)" if i == 0 else None)
        for i, planned in enumerate(mine[0].scheduled_s):
            ax.axvline(planned, color="grey", linestyle=":", linewidth=1.0,
                       label="scheduled (missed)" if i == 0 else None)
        ax.axvspan(*mine[0].window_s, color="grey", alpha=0.08, label="measurement window")
        peak = max(int(t.counts.max()) if len(t.counts) else 0 for t in mine)
        ax.set_title(f"{strategy}: origin calls per 100 ms (peak {peak})", fontsize=10, loc="left")
        ax.set_ylabel("calls / 100 ms")
        ax.set_ylim(bottom=0, top=max(peak * 1.15, 2))
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("seconds since the common start instant")
    fig.tight_layout()
    return _png(fig)


def latency_percentiles(rows: Sequence[dict[str, Any]]) -> bytes:
    """Latency percentiles per strategy (log scale), with the error rate in a panel beside."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    names = [str(r["strategy"]) for r in rows]
    x = np.arange(len(_PERCENTILE_LABELS))
    width = 0.8 / max(len(rows), 1)
    for i, r in enumerate(rows):
        values = [float(r[key]) for key, _ in _PERCENTILE_LABELS]
        left.bar(x + i * width, values, width, label=names[i])
    floors = [float(r["floor_ms"]) for r in rows if r.get("floor_ms") == r.get("floor_ms")]
    if floors:
        left.axhline(min(floors), color="black", linestyle=":", linewidth=1,
                     label=f"cache round-trip floor {min(floors):.3f} ms")
    left.set_xticks(x + width * (len(rows) - 1) / 2, [label for _, label in _PERCENTILE_LABELS])
    left.set_yscale("log")
    left.set_ylabel("latency (ms, log)")
    left.set_title("latency percentiles per strategy (all requests, errors included)", fontsize=10)
    left.legend(fontsize=8)
    rates = [100 * float(r["error_rate"]) if r["requests"] else 0.0 for r in rows]
    bars = right.bar(names, rates, color=["tab:red" if v > 0 else "tab:green" for v in rates])
    right.bar_label(bars, labels=[f"{v:.2f}%" for v in rates], fontsize=8)
    right.set_ylabel("errors (% of requests)")
    right.set_title("error rate", fontsize=10)
    right.set_ylim(bottom=0, top=max(max(rates, default=0) * 1.2, 1))
    fig.tight_layout()
    return _png(fig)


def stage_breakdown(rows: Sequence[dict[str, Any]]) -> bytes:
    """p99 per stage and endpoint, with pool wait p99 and query time p99 side by side."""
    labels = [f"{r['strategy']}\n{r['stage']} / {r['endpoint']}" for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(rows)), 4.2))
    for i, (key, name) in enumerate((("p99_ms", "request p99"), ("pool_wait_p99_ms", "pool wait p99"),
                                     ("query_p99_ms", "query p99"))):
        values = [float(r[key]) if r[key] == r[key] else 0.0 for r in rows]
        ax.bar(x + (i - 1) * 0.27, values, 0.27, label=name)
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("ms")
    ax.set_title("p99 per stage and endpoint: waiting for a connection vs the database", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def version_timeline(panels: Sequence[VersionPanel]) -> bytes:
    """Per strategy, on its hottest written key: each read's version (points; stale ones, served
    after a newer version had committed, in red) against the committed version (a step line)."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.6 * len(panels) + 0.6), squeeze=False)
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        s = panel.series
        x = (s.served_ns - panel.start_ns) / 1e9
        if len(s.commit_ns):  # behind the points; before the first write, one version below it
            at = (s.commit_ns - panel.start_ns) / 1e9
            first = min(float(x.min()) if len(x) else float(at[0]), float(at[0]))
            end = max(float(x.max()) if len(x) else 0.0, float(at[-1]))
            ax.step(np.concatenate([[first], at, [end]]),
                    np.concatenate([[s.committed[0] - 1], s.committed, [s.committed[-1]]]),
                    where="post", color="grey", linewidth=3, alpha=0.45, zorder=1, label="committed")
        ax.scatter(x[~s.stale], s.served[~s.stale], s=5, color="tab:blue", alpha=0.6,
                   linewidths=0, zorder=2, label="served")
        ax.scatter(x[s.stale], s.served[s.stale], s=16, color="tab:red", marker="x", zorder=3,
                   linewidths=1, label="served after a newer version had committed (stale)")
        shown = "" if len(x) == s.reads else f", {len(x):,} plotted"
        ax.set_title(f"{panel.strategy} (trial {panel.trial}), key {s.key}: {s.reads:,} reads, "
                     f"{s.stale_reads:,} stale{shown}", fontsize=10, loc="left")
        ax.set_ylabel("version")
        ax.legend(fontsize=7, loc="upper left", markerscale=2)
    axes[-1, 0].set_xlabel("seconds since the trial's common start instant")
    fig.tight_layout()
    return _png(fig)


INTERVAL_PANELS = (("origin_per_expiry", "origin calls per event"), ("herd", "herd per event: p50, p90, max"),
                   ("waits_per_event", "waits per event"), ("p50_ms", "p50 latency, ms"),
                   ("p99_ms", "p99 latency, ms"), ("rps", "requests per second"))


def _bar(ax: Any, x: float, e: Estimate, **style: Any) -> None:
    """One figure as a point with its 95 % interval as an error bar (a hollow point: none)."""
    if e.value != e.value:
        return
    if e.known:
        ax.errorbar([x], [e.value], yerr=[[e.value - e.lo], [e.hi - e.value]], capsize=4, **style)
    else:
        ax.plot([x], [e.value], linestyle="none", markerfacecolor="none", **style)


def interval_bars(estimates: Mapping[str, Mapping[str, Estimate]],
                  trials: Sequence[Mapping[str, Any]]) -> bytes:
    """Per strategy each headline figure over its repeats (black, with its 95 % interval) and
    each repeat's own (coloured, beside it); a hollow point has too few units for an interval."""
    names = list(estimates)
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5), squeeze=False)
    for ax, (figure, title) in zip(axes.flat, INTERVAL_PANELS, strict=True):
        for i, name in enumerate(names):
            mine = [t for t in trials if str(t["strategy"]) == name]
            shown = (("herd_median", "o"), ("herd_p90", "s")) if figure == "herd" else ((figure, "o"),)
            for key, marker in shown:
                _bar(ax, i, estimates[name][key], color="black", marker=marker, markersize=5)
                for j, t in enumerate(mine):
                    _bar(ax, i + 0.12 * (j + 1), repeats.trial_estimate(t, key), color=f"C{j}",
                         marker=marker, markersize=3, alpha=0.7)
            if figure == "herd":
                top = [float(t["herd_max"]) for t in mine if t.get("herd_max") is not None]
                if top:
                    ax.plot([i], [max(top)], "kx", markersize=6)
        ax.set_xticks(range(len(names)), names, fontsize=7, rotation=20)
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_ylim(bottom=0)
    fig.suptitle("95 % intervals: black over the repeats, coloured each repeat (hollow: too few "
                 "units for an interval; x: the largest herd)", fontsize=9)
    fig.tight_layout()
    return _png(fig)
