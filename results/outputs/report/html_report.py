"""``coordinator report RUN_DIR``: the summary table, ``report.html`` and the PNGs beside it.

The HTML is self-contained (plots embedded as base64 PNG) so it opens offline and can be mailed.
Runs made before a column existed still report: missing figures show as ``n/a``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from results.figures import repeats
from results.outputs import report_data, table, verdicts
from results.outputs.report import html as h
from results.outputs.report import observe_appendix

PLOTS_MISSING = ("the report's plots need matplotlib, which this install leaves out (the worker image "
                 "does): pip install 'stampede-lab[local]'")


class MissingExtra(RuntimeError):
    """A package of an optional extra that this command needs is not installed."""


TRIAL_COLUMNS: list[h.Column] = [
    ("trial", "trial", ""), ("strategy", "strategy", ""), ("repeat", "repeat", ""),
    ("origin_per_expiry", "origin/expiry", ".1f"), ("origin_per_expiry_lo", "95 % from", ".1f"),
    ("origin_per_expiry_hi", "95 % to", ".1f"), ("event_kind", "per", ""),
    ("expiry_events", "events", ""), ("herd_median", "herd p50", ".1f"),
    ("herd_p90", "herd p90", ".1f"), ("herd_max", "largest herd", ""),
    ("origin_per_period", "per TTL period", ".1f"), ("peak_origin_inflight", "peak in-flight", ""),
    ("rps", "rps", ",.0f"), ("p50_ms", "p50 ms", ".2f"), ("p99_ms", "p99 ms", ".1f"),
    ("p99_ms_lo", "p99 95 % from", ".1f"), ("p99_ms_hi", "p99 95 % to", ".1f"),
    ("error_rate", "error rate", ".2%"), ("floor_ms", "floor ms", ".3f"),
    ("origin_calls_total", "client origin calls", ","), ("db_calls", "db calls", ","),
    ("db_calls_match", "db match", ""), ("db_time_ms", "db time ms", ",.1f"),
    ("max_worker_cpu", "max worker CPU", ".0%"), ("max_loop_lag_ms", "loop lag p99 ms", ".1f"),
    ("max_release_late_ms", "release late ms", ".1f"), ("saturated", "saturated", ""),
    ("start_spread_ms", "start spread ms", ".1f"),
]
LATENCY_COLUMNS: list[h.Column] = [
    ("strategy", "strategy", ""), ("requests", "requests", ","), ("p50_ms", "p50 ms", ".3f"),
    ("p90_ms", "p90 ms", ".3f"), ("p99_ms", "p99 ms", ".2f"), ("p999_ms", "p99.9 ms", ".2f"),
    ("max_ms", "max ms", ".1f"), ("errors", "errors", ","), ("error_rate", "error rate", ".2%"),
    ("floor_ms", "floor ms", ".3f"),
]
GROUP_EXTRA: list[h.Column] = [("origin_calls", "origin calls", ","),
                               ("pool_wait_p99_ms", "pool wait p99 ms", ".2f"),
                               ("query_p99_ms", "query p99 ms", ".2f")]
STATEMENT_COLUMNS: list[h.Column] = [
    ("trial", "trial", ""), ("query", "statement", ""), ("calls", "calls", ","),
    ("mean_ms", "mean ms", ".3f"), ("total_ms", "total ms", ",.1f"), ("share", "share of DB time", ".1%"),
]
CONSISTENCY_TEXT = (
    "A read is stale when a newer version of its key had committed before it started; a stale "
    "set is a value written into the cache after a newer write's invalidation was done (the cache "
    "then serves the old value until it expires). Max stale: the longest time from a commit to "
    "the last read of an older version. The servers' own check at each trial's end stands beside "
    "them (flagged when a stale set is proven). The plot shows, for the first trial with writes "
    "of each strategy, its most-read written key: each read's version against the committed one.")
_PERCENTILE_KEYS = {"p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"}


CONSISTENCY_COLUMNS: list[h.Column] = [
    ("writes", "writes", ","), ("stale_after_write", "stale reads", ","),
    ("stale_after_write_share", "stale read share", ".2%"), ("max_stale_ms", "max stale ms", ".1f"),
    ("stale_sets", "stale sets", ","), ("end_behind_keys", "cache behind at end (keys)", ""),
    ("end_stale_sets", "stale sets proven at end", ""),
]
EVENT_COLUMNS: list[h.Column] = [
    ("trial", "trial", ""), ("strategy", "strategy", ""), ("key", "key", ""), ("at_s", "at s", ".3f"),
    ("scheduled_s", "scheduled s", ".3f"), ("source", "source", ""), ("in_window", "counted", ""),
    ("calls", "calls", ","), ("duration_ms", "duration ms", ".1f"),
    ("first_fill_ms", "first fill ms", ".1f"),
]


def _summary(data: report_data.RunData) -> str:
    """The text table's lines as HTML (with the consistency columns when a trial had writes)."""
    columns = table.columns(data.trials)
    rows = [dict(zip(columns, cells, strict=True))
            for cells in table.summary_rows(data.trials, data.windows, data.estimates)]
    return h.table(rows, [(c, c, "") for c in columns])


INTERVALS_TEXT = (
    "Each figure with its 95 % interval (docs/results.md, Intervals): origin calls and waits per "
    "event by a bootstrap over the events (over repeats: the repeats, then their events), p50 and "
    "p99 by order statistics of the requests, rps and the stale share by a bootstrap over the "
    "window's bins of whole TTL periods; over repeats those four are the median of the repeats. "
    "A figure from fewer events, requests or bins than its method needs has no interval and says "
    "so. A verdict is 'different' when the 95 % interval of the difference leaves out 0.")


def _intervals_section(data: report_data.RunData, images: Mapping[str, bytes]) -> list[str]:
    """The error bars, each strategy's verdicts against the first, and the order per figure."""
    out = ["<h2>How sure: 95 % intervals</h2>", f"<p>{html.escape(INTERVALS_TEXT)}</p>"]
    if "intervals.png" in images:
        out.append(h.image(images["intervals.png"], "figures with their 95 % intervals"))
    names = list(data.estimates)
    if len(names) > 1:
        first = data.estimates[names[0]]
        rows = verdicts.verdict_rows([(n, first, data.estimates[n]) for n in names[1:]])
        heads = list(verdicts.VERDICT_HEAD)
        out += [f"<h3>Each strategy (B) against {html.escape(names[0])} (A)</h3>",
                h.table([dict(zip(heads, r, strict=True)) for r in rows], [(c, c, "") for c in heads]),
                "<h3>Order, lowest first ('&lt;' distinguishable, '~' not)</h3>",
                h.table([{"figure": verdicts.LABELS[f], "order": line} for f in repeats.VERDICT_FIGURES
                         if (line := verdicts.order_line(f, data.estimates))],
                        [("figure", "figure", ""), ("order", "order", "")])]
    return out


@dataclass(frozen=True)
class Written:
    html: Path
    pngs: list[Path]


def flag_cell(row: Mapping[str, Any], key: str) -> bool:
    """Cells a reader must not trust as they stand."""
    value = row.get(key)
    if value is None:
        return False
    floor = row.get("floor_ms")
    if key in _PERCENTILE_KEYS and floor is not None:
        return bool(float(value) < float(floor))
    if key == "error_rate":
        return bool(float(value) > 0)
    if key == "db_calls_match":
        return value is False
    if key in ("stale_sets", "end_stale_sets"):
        return bool(int(value) > 0)
    return key in ("saturated", "below_floor") and value is True


def _plots() -> ModuleType:
    """results.outputs.report.plots, imported only here: matplotlib is an extra (``[local]``)
    the image leaves out, so ``coordinator --help`` and ``launch`` work without it and
    ``report`` says what is missing."""
    try:
        from results.outputs.report import plots  # noqa: PLC0415
    except ModuleNotFoundError as exc:
        if exc.name != "matplotlib":
            raise
        raise MissingExtra(PLOTS_MISSING) from None
    return plots


def write_report(root: Path) -> Written:
    """Compute everything from the run directory and write report.html plus the PNGs."""
    plots = _plots()
    data = report_data.load(root)
    images = {"origin_timeline.png": plots.origin_timeline(data.timelines) if data.timelines else None,
              "latency_percentiles.png": plots.latency_percentiles(data.latency) if data.latency else None,
              "stages.png": plots.stage_breakdown(data.stages) if data.stages else None,
              "versions.png": plots.version_timeline(data.versions) if data.versions else None,
              "intervals.png": (plots.interval_bars(data.estimates, data.trials)
                                if data.estimates else None)}
    pngs = []
    for name, png in images.items():
        if png is not None:
            (root / name).write_bytes(png)
            pngs.append(root / name)
    page = h.page(f"stampede-lab run {data.meta.get('run_id', root.name)}",
                  _sections(data, {k: v for k, v in images.items() if v is not None}))
    (root / "report.html").write_text(page, encoding="utf-8")
    return Written(root / "report.html", pngs)


def _sections(data: report_data.RunData, images: Mapping[str, bytes]) -> list[str]:
    spec = data.meta.get("spec", {})
    origin = data.meta.get("origin", {})
    out = [f"<p>{html.escape(_describe(spec, origin, data.meta))}</p>",
           f"<p>{html.escape(_provenance(data.meta))}</p>",
           "<h2>Summary</h2>", _summary(data),
           *_intervals_section(data, images),
           "<h2>Self-checks</h2>", h.notes(table.notes(data.trials))]
    if "origin_timeline.png" in images:
        out += ["<h2>Origin calls per 100 ms</h2>",
                h.image(images["origin_timeline.png"], "origin calls per 100 ms")]
    out += ["<h2>Latency per strategy</h2>",
            "<p>Exact percentiles over every in-window request of the clients, errors included "
            "(linear interpolation; background refreshes and invalidating writes left out, as "
            "in trials.parquet). A value below the cache round-trip floor is marked !.</p>",
            h.table(data.latency, LATENCY_COLUMNS, flag_cell)]
    if "latency_percentiles.png" in images:
        out.append(h.image(images["latency_percentiles.png"], "latency percentiles"))
    out += _trials_section(data, images)
    if data.events:
        out += ["<h2>Expiry events and their herds</h2>",
                "<p>Every event the cache reported (or refresh cycle), with the origin calls "
                "attributed to it (expiries.parquet; seconds from the trial's start).</p>",
                h.table(data.events, EVENT_COLUMNS)]
    if data.endpoints:
        out += ["<h2>Per endpoint</h2>",
                h.table(data.endpoints, [*LATENCY_COLUMNS[:1], ("endpoint", "op", ""),
                                         *LATENCY_COLUMNS[1:], *GROUP_EXTRA], flag_cell)]
    if data.stages:
        out += ["<h2>Per stage</h2>",
                h.table(data.stages, [*LATENCY_COLUMNS[:1], ("stage", "stage", ""), ("endpoint", "op", ""),
                                      *LATENCY_COLUMNS[1:], *GROUP_EXTRA], flag_cell),
                h.image(images["stages.png"], "p99 per stage")]
    if data.statements:
        out += ["<h2>Database time per statement (pg_stat_statements)</h2>",
                h.table(data.statements, STATEMENT_COLUMNS)]
    return out + observe_appendix.sections(data.root)  # runs launched with --observe


def _trials_section(data: report_data.RunData, images: Mapping[str, bytes]) -> list[str]:
    """The per-trial table; with the consistency columns and the versions plot when a trial of
    the run had writes (a run without writes, or made before them, shows neither)."""
    if not table.had_writes(data.trials):
        return ["<h2>Trials</h2>", h.table(data.trials, TRIAL_COLUMNS, flag_cell)]
    out = ["<h2>Trials</h2>", h.table(data.trials, TRIAL_COLUMNS + CONSISTENCY_COLUMNS, flag_cell),
           "<h2>Consistency under writes</h2>", f"<p>{html.escape(CONSISTENCY_TEXT)}</p>"]
    if "versions.png" in images:
        out.append(h.image(images["versions.png"], "versions served against versions committed"))
    return out


def _provenance(meta: Mapping[str, Any]) -> str:
    """The command line and what ran, from the manifest; an older run says it has none."""
    manifest = meta.get("manifest")
    if not isinstance(manifest, Mapping):
        return "No manifest: run.json was written before manifest_version 1."
    versions = manifest.get("versions") or {}
    ran = ", ".join(f"{k} {v}" for k, v in versions.items() if isinstance(v, str))
    rerun = f" (a rerun of {manifest['rerun_of']})" if manifest.get("rerun_of") else ""
    return f"Command: {' '.join(manifest.get('command') or [])}{rerun}. Versions: {ran or '?'}."


def _describe(spec: Mapping[str, Any], origin: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    median = origin.get("median_ms")
    median_text = f"{median:.2f} ms" if isinstance(median, int | float) else "not recorded"
    return (f"{spec.get('workers', '?')} workers, {spec.get('clients', '?')} clients, "
            f"TTL {spec.get('ttl_s', '?')} s, {spec.get('seconds', '?')} s per trial, "
            f"{spec.get('repeat', '?')} repeat(s), {len(spec.get('keys', []))} key(s); "
            f"origin query median {median_text}; status {meta.get('status', '?')}, "
            f"started {meta.get('started', '?')}")
