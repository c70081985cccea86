"""The summary table: one line per strategy, medians over repeats, every repeat's origin figure;
the consistency columns (issue 14) only in runs where a trial had writes."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from results.figures import repeats
from results.figures.checks import (
    had_losses,
    liveness_notes,
    origin_mismatch,
    saturation_reason,
    workers_cell,
)
from results.figures.intervals import Estimate
from results.outputs import sampled, verdicts
from results.outputs.text import grid

COLUMNS = ("strategy", "origin/expiry (each run)", "origin/expiry [95 %]", "per", "herd p50 [95 %]",
           "herd p90 [95 %]", "herd max", "rps [95 %]", "p50 ms [95 %]", "p99 ms [95 %]", "errors",
           "waits", "waits/event [95 %]", "stale", "stale share [95 %]", "stale age max ms",
           "local hits", "refresh", "cmds/req", "peak", "spread ms", "db check", "generator")
# Shown only when a trial of the run had writes (results.figures.consistency): a run without writes has
# nothing to say about them, and older runs lack the columns.
CONSISTENCY_COLUMNS = ("writes", "stale reads", "max stale ms", "stale sets")
# Shown only when a trial missed a worker's rows or had a slow worker (results.figures.checks).
LIVENESS_COLUMNS = ("workers",)


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


def strategy_line(name: str, rows: list[Mapping[str, Any]],
                  found: Mapping[str, Estimate] | None = None) -> list[str]:
    """One strategy's cells; ``found``: its figures over the repeats (results.figures.repeats)."""
    requests = sum(int(r["requests"]) for r in rows)
    errors = sum(int(r["errors"]) for r in rows)
    db = _db_check(rows)
    e = found if found is not None else repeats.strategy_estimates(rows, {})
    herd_max = [int(v) for r in rows if (v := r.get("herd_max")) is not None]
    return [
        name,
        " ".join(f"{float(r['origin_per_expiry']):.1f}" for r in rows),
        verdicts.cell(e["origin_per_expiry"], "origin_per_expiry"),
        _event_kind(rows),
        verdicts.cell(e["herd_median"], "herd_median"),
        verdicts.cell(e["herd_p90"], "herd_p90"),
        f"{max(herd_max)}" if herd_max else "n/a",
        verdicts.cell(e["rps"], "rps"),
        verdicts.cell(e["p50_ms"], "p50_ms", "!" if any(r["below_floor"] for r in rows) else ""),
        verdicts.cell(e["p99_ms"], "p99_ms"),
        f"{errors / requests:.2%}" if requests else "n/a",
        f"{sum(int(r['waits']) for r in rows):,}",
        verdicts.cell(e["waits_per_event"], "waits_per_event"),
        f"{sum(int(r['stale_served']) for r in rows):,}",
        verdicts.cell(e["stale_share"], "stale_share"),
        _fmt_ms(max((a for r in rows if not math.isnan(a := _get(r, "stale_age_max_ms"))),
                    default=float("nan"))),
        f"{sum(int(_get(r, 'local_hits', 0)) for r in rows):,}",
        f"{sum(int(_get(r, 'refreshes', 0)) for r in rows):,}",
        _commands_per_request(rows),
        "n/a" if sampled.is_sampled(rows) else f"{max(int(r['peak_origin_inflight']) for r in rows)}",
        _spread(rows),
        db,
        _generator(rows),
    ]


_KINDS = {"expiry": "expiry", "refresh cycle": "refresh", "expiry+refresh": "both",
          "delete": "delete", "inferred": "inferred"}
# Events the server did not report: the schedule, or a black box's own delete instants ('*').
_NOT_REPORTED = ("schedule", "scheduled-delete")
def _commands_per_request(rows: list[Mapping[str, Any]]) -> str:
    """Commands the cache and the lock store counted per client request (median over repeats);
    runs made before the servers were asked have none."""
    values = [_get(r, "cache_commands_per_request") + _get(r, "lock_commands_per_request")
              for r in rows]
    kept = [v for v in values if not math.isnan(v)]
    return f"{statistics.median(kept):.2f}" if kept else "n/a"


def _db_check(rows: list[Mapping[str, Any]]) -> str:
    """``ok``, or each repeat's mismatch; ``LOST`` instead of ``MISMATCH`` when every mismatch
    is a trial whose lost workers' rows are missing (PostgreSQL counted their calls)."""
    if sampled.is_sampled(rows):
        return sampled.check_cell(rows)
    if any(r.get("db_check") == "unchecked" for r in rows):  # no counter: never "ok"
        return "unchecked"
    bad = [r for r in rows if not r["db_calls_match"]]
    if not bad:
        return "ok"
    lost = all(int(_get(r, "workers_lost", 0)) and r["db_calls"] > r["origin_calls_total"]
               for r in bad)
    return ("LOST " if lost else "MISMATCH ") + ",".join(
        f"{r['origin_calls_total']}≠{r['db_calls']}" for r in bad)


def _event_kind(rows: list[Mapping[str, Any]]) -> str:
    """What the origin/expiry figure is per: observed expiries, refresh cycles, or both; runs
    made before events were observed counted TTL periods."""
    kinds = {str(r.get("event_kind") or "") for r in rows}
    names = sorted({_KINDS.get(k, "period") for k in kinds})
    return "+".join(names) + ("*" if any(r.get("expiry_source") in _NOT_REPORTED for r in rows)
                              else "")


def _generator(rows: list[Mapping[str, Any]]) -> str:
    """``ok``, ``SATURATED`` (latencies inflated) or ``n/a`` for runs made before the check."""
    flags = [r.get("saturated") for r in rows]
    if all(f is None for f in flags):
        return "n/a"
    return "SATURATED" if any(flags) else "ok"


def had_writes(trials: Iterable[Mapping[str, Any]]) -> bool:
    """A trial of the run committed writes in its window (runs made before writes: none)."""
    return any(_get(t, "writes", 0) > 0 for t in trials)


def columns(trials: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The summary table's columns for these trials (``summary_rows`` fills them)."""
    trials = list(trials)
    return (COLUMNS + (CONSISTENCY_COLUMNS if had_writes(trials) else ())
            + (LIVENESS_COLUMNS if had_losses(trials) else ()))


def consistency_cells(rows: list[Mapping[str, Any]]) -> list[str]:
    """Writes and stale sets summed over repeats; stale reads summed, with the median of the
    repeats' shares (trials.parquet keeps the share, not its denominator); the longest stale."""
    share = _median([r for r in rows if r.get("stale_after_write_share") is not None],
                    "stale_after_write_share")
    stale = sum(int(_get(r, "stale_after_write", 0)) for r in rows)
    return [f"{sum(int(_get(r, 'writes', 0)) for r in rows):,}",
            f"{stale:,}" + ("" if math.isnan(share) else f" ({share:.2%})"),
            _fmt_ms(max((m for r in rows if not math.isnan(m := _get(r, "max_stale_ms"))),
                        default=float("nan"))),
            f"{sum(int(_get(r, 'stale_sets', 0)) for r in rows):,}"]


Found = Mapping[str, Mapping[str, Estimate]]  # per strategy label, its figures over the repeats


def summary_rows(trials: Iterable[Mapping[str, Any]],
                 events: Mapping[int, repeats.TrialEvents] | None = None,
                 found: Found | None = None) -> list[list[str]]:
    """One line per strategy, in the order of ``columns(trials)`` (text and HTML both show these);
    ``events``: the trials' window events (expiries.parquet), which per-event figures pool;
    ``found``: their figures, when already computed (results.figures.repeats.per_strategy)."""
    trials = list(trials)
    extra, losses = had_writes(trials), had_losses(trials)
    found = found if found is not None else repeats.per_strategy(trials, events or {})
    return [strategy_line(name, group, found[name]) + (consistency_cells(group) if extra else [])
            + ([workers_cell(group)] if losses else [])
            for name, group in group_by_strategy(trials).items()]


def render(trials: Iterable[Mapping[str, Any]],
           events: Mapping[int, repeats.TrialEvents] | None = None,
           found: Found | None = None) -> str:
    """A plain-text table; ``!`` after p50 marks a result faster than the physical floor,
    ``*`` after the event kind an expiry count taken from the schedule (the cache reported none),
    ``(n=3: too few events)`` a figure whose interval needs more than there were."""
    trials = list(trials)
    return grid(columns(trials), summary_rows(trials, events, found), left=2)


def notes(trials: Iterable[Mapping[str, Any]]) -> list[str]:
    """Warnings a reader must see under the table."""
    return [f"trial {r['trial']} ({r['strategy']}): {note}" for r in trials
            for note in [*_check_notes(r), *_figure_notes(r)]]


def _check_notes(r: Mapping[str, Any]) -> list[str]:
    """What the self-checks say of one trial: floor, origin count, workers, errors, generator."""
    out = []
    if r["below_floor"]:
        out.append(f"p50 {r['p50_ms']:.3f} ms is below the cache round-trip floor "
                   f"{r['floor_ms']:.3f} ms: check the errors")
    if r.get("db_check") == "unchecked":
        out.append(f"origin calls unchecked: {r.get('db_check_detail')}")
    if r.get("origin_source"):
        out.extend(sampled.notes(r))
    elif not r["db_calls_match"] and r.get("db_check") != "unchecked":
        out.append(origin_mismatch(r["origin_calls_total"], r["db_calls"],
                                   int(_get(r, "workers_lost", 0))))
    out.extend(liveness_notes(r))
    if r["errors"]:
        out.append(f"{r['errors']} errors: {r['error_types']}")
    if r.get("saturated"):
        out.append(f"load generator saturated ({saturation_reason(r)}): its latencies are inflated")
    if (ships := int(_get(r, "client_ships", 0))) > 0:
        out.append(f"the shipper threads fell behind (starved of the GIL): clients shipped their "
                   f"rows {ships:,} times, waiting {_get(r, 'client_wait_s', 0):,.1f} client-s "
                   "for it (the coordinator behind): the load was slowed to what it writes")
    return out


def _figure_notes(r: Mapping[str, Any]) -> list[str]:
    """What one trial's figures need said beside them: events, starved fills, consistency."""
    out = [*_event_notes(r)]
    if (starved := _starved_fills(r)) is not None:
        out.append(starved)
    out.extend(_consistency_notes(r))
    if (fallback := int(_get(r, "fallback_calls", 0))) > 0:
        out.append(f"{fallback:,} origin calls answered requests while the cache failed "
                   "(on_cache_error=origin): in no expiry's herd")
    return out


STARVED_FACTOR = 10.0  # client-side origin call this many times PostgreSQL's own time
STARVED_MIN_MS = 5.0


def _starved_fills(r: Mapping[str, Any]) -> str | None:
    """A trial whose own load held its fillers off the CPU: an origin call took far longer on
    the client than in PostgreSQL (two-level at full speed: local hits hold the GIL)."""
    client, calls = _get(r, "origin_call_p50_ms"), _get(r, "db_calls", 0)
    if math.isnan(client) or calls <= 0 or client < STARVED_MIN_MS:
        return None
    database = _get(r, "db_time_ms", 0) / calls
    if client < STARVED_FACTOR * database:
        return None
    return (f"fills starved: an origin call took {client:.1f} ms on the client (median) for "
            f"{database:.2f} ms in PostgreSQL: the trial's own load kept the fillers off the CPU, "
            "so waiters waited longer and herds grew (add think time or use an open loop)")


def _consistency_notes(r: Mapping[str, Any]) -> list[str]:
    """The servers' end-of-trial check (coordinator.consistency) against the rows: a stale set
    the servers prove stands whatever the rows say, and one the rows missed is called out."""
    proven = int(_get(r, "end_stale_sets", 0))
    if proven <= 0:
        return []
    note = (f"cache holds a stale set at the end: proven by the servers ({proven} key(s) older "
            "than the origin one value lifetime after the newer version committed)")
    if r.get("stale_sets") is not None and int(r["stale_sets"]) == 0:
        note += "; the servers hold a stale set the rows did not show"
    return [note]


def _event_notes(r: Mapping[str, Any]) -> list[str]:
    out = []
    if r.get("per_period_differs"):
        out.append(f"{r['origin_per_expiry']:.1f} origin calls per observed event, "
                   f"{r['origin_per_period']:.1f} per TTL period of the window: the herds drift "
                   "against the window (the first counts each herd whole)")
    if r.get("expiry_source") == "schedule":
        out.append("the cache reported no expiries (keyspace notifications refused): events "
                   "are the scheduled instants")
    elif r.get("expiry_source") == "server with gap":
        out.append("the cache stopped reporting expiries for a while: events in that gap are missing")
    if r.get("unattributed_calls"):
        out.append(f"{r['unattributed_calls']} origin calls had no event of their key before "
                   "them (cold keys' first fills): not in the headline")
    return out

