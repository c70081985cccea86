"""The intervals are calibrated, not decorative: synthetic herds, latencies and per-bin counts
with a known answer go through the same computation as a trial's rows (results.figures.events,
results.figures.scan, results.figures.rates) and their 95 % intervals must hold the truth in
about 95 % of draws.

Tolerance: DRAWS draws per case, so a true coverage of 95 % is seen within +-0.7 points (one
binomial standard error); the bootstrap's own small-sample shortfall at 14 events is about a
point for symmetric herds and two for skewed ones (measured: 94.7, 93.8 and 92.0 %). A case
passes when its coverage is within COVERAGE (91 % to 98.5 %: the skewed shortfall plus four
standard errors below, four above; the order-statistic intervals are conservative by
construction). Each case also checks that the same intervals made half as wide cover under HALF
(85 %; measured 67-71 %): the tolerance tells a calibrated interval from a decorative one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from results.figures import events, intervals, metrics, rates, repeats, scan
from results.figures.expiry_reports import Event, Source
from results.figures.intervals import Estimate
from results.outputs import verdicts
from tests.unit.test_metrics import rows

DRAWS = 1000
COVERAGE = (0.91, 0.985)
HALF = 0.85
EVENTS = 14  # experiment 000's events per trial: 30 s at a TTL of 2 s


def coverage(draw: Callable[[np.random.Generator], tuple[float, float, float]],
             truth: float, seed: int) -> tuple[float, float]:
    """(coverage, coverage at half the width) over DRAWS draws of (value, lo, hi)."""
    rng = np.random.default_rng(seed)
    held = halved = 0
    for _ in range(DRAWS):
        value, lo, hi = draw(rng)
        held += lo <= truth <= hi
        halved += value - (value - lo) / 2 <= truth <= value + (hi - value) / 2
    return held / DRAWS, halved / DRAWS


def assert_calibrated(found: tuple[float, float], what: str) -> None:
    held, halved = found
    assert COVERAGE[0] <= held <= COVERAGE[1], f"{what}: 95 % intervals held the truth in {held:.1%}"
    assert halved < HALF, f"{what}: half as wide still held it in {halved:.1%}: the test cannot tell"


def herds_of(sizes: np.ndarray) -> list[events.Herd]:
    return [events.Herd(Event("k", i * 10**9, Source.EXPIRED), [(i * 10**9, i * 10**9 + 1)] * int(s))
            for i, s in enumerate(sizes)]


# Herd sizes with a known mean: naive's large herds, lock's 1-3 calls, a skewed drift.
HERDS = {"naive": (lambda rng: 1 + rng.binomial(199, 0.7, EVENTS), 1 + 199 * 0.7),
         "lock": (lambda rng: 1 + rng.poisson(0.6, EVENTS), 1.6),
         "skewed": (lambda rng: 1 + rng.negative_binomial(1, 0.1, EVENTS), 10.0)}


@pytest.mark.parametrize("kind", sorted(HERDS))
def test_origin_calls_per_event_cover_the_true_mean(kind: str) -> None:
    sample, truth = HERDS[kind]

    def draw(rng: np.random.Generator) -> tuple[float, float, float]:
        f = events.figures(herds_of(sample(rng)), 0, 0, 1)
        return f["origin_per_expiry"], f["origin_per_expiry_lo"], f["origin_per_expiry_hi"]

    assert_calibrated(coverage(draw, truth, seed=len(kind)), f"{kind} herds")


@pytest.mark.parametrize(("q", "column"), [(0.5, "p50"), (0.99, "p99")])
def test_latency_percentiles_cover_the_true_percentile(q: float, column: str) -> None:
    """Log-normal latencies (median 1 ms), 3,000 requests: the two-pass scan's order statistics."""
    truth = math.exp(intervals.NormalDist().inv_cdf(q))

    def draw(rng: np.random.Generator) -> tuple[float, float, float]:
        values = (rng.lognormal(0, 1, 3000) * 1e6).astype(np.int64)
        found = scan.Quantiles(metrics.PERCENTILES, bounded=metrics.BOUNDED)
        for half in np.array_split(values, 2):
            found.count(half)
        for half in np.array_split(values, 2):
            found.keep(half)
        e = found.estimates_ms()[metrics.BOUNDED.index(q)]
        return e.value, e.lo, e.hi

    assert_calibrated(coverage(draw, truth, seed=int(q * 100)), column)


def test_rps_covers_the_true_rate() -> None:
    """28 bins of two TTL periods' requests (Poisson, 500 per bin of 2 s): 250 rps."""
    window = metrics.Window(0, 28 * 2 * 10**9, 2 * 10**9)

    def draw(rng: np.random.Generator) -> tuple[float, float, float]:
        per = rates.Seconds(window)
        per.requests = rng.poisson(500, per.count)
        rps, _ = per.estimates()
        return rps.value, rps.lo, rps.hi

    assert rates.bins(28 * 2 * 10**9, 2 * 10**9) == 28
    assert_calibrated(coverage(draw, 250.0, seed=3), "rps")


def test_the_trial_scan_gives_the_order_statistics_of_its_rows() -> None:
    """metrics.scan_trial keeps the interval's ranks in its second pass: the same values as a
    sort of the rows."""
    rng = np.random.default_rng(5)
    latency = np.round(rng.lognormal(1, 1, 1000), 3).tolist()
    table = rows(latency, ["hit"] * 1000, [0] * 1000, list(range(100, 200)) * 10)
    f = metrics.summarise(table, metrics.Window(100, 200), 0.0)
    ordered = np.sort(np.asarray(table["latency_ns"].to_numpy(), np.int64))
    lo, hi = intervals.order_ranks(1000, 0.99) or (0, 0)
    assert (f["p99_ms_lo"], f["p99_ms_hi"]) == (ordered[lo] / 1e6, ordered[hi] / 1e6)
    assert f["p99_ms_lo"] <= f["p99_ms"] <= f["p99_ms_hi"]


def test_order_ranks_are_the_binomials() -> None:
    """n = 10: the median lies between the 2nd and 9th values with 97.9 % (the 3rd and 8th
    hold it only 89 %); a p99 needs 368 values."""
    assert intervals.order_ranks(10, 0.5) == (1, 8)
    assert intervals.fewest_for(0.99) == 368
    assert intervals.order_ranks(367, 0.99) is None and intervals.order_ranks(368, 0.99) is not None
    assert intervals.t_quantile(0.975, 7) == pytest.approx(2.3646, abs=1e-3)


def test_too_few_events_are_said_not_given_an_interval() -> None:
    f = events.figures(herds_of(np.array([120, 200, 180])), 0, 0, 1)
    assert math.isnan(f["origin_per_expiry_lo"]) and math.isnan(f["origin_per_expiry_hi"])
    e = repeats.trial_estimate({**f, "expiry_events": 3}, "origin_per_expiry")
    assert e.too_few == "n=3: too few events"
    assert verdicts.cell(e, "origin_per_expiry") == "166.7 (n=3: too few events)"
    p99 = repeats.trial_estimate({"p99_ms": 9.0, "p99_ms_lo": math.nan, "p99_ms_hi": math.nan,
                                  "requests": 200}, "p99_ms")
    assert verdicts.cell(p99, "p99_ms") == "9.00 (n=200: too few requests)"


def test_repeats_pool_their_events_and_compare() -> None:
    """Per-event figures over repeats pool every repeat's events; a difference far from 0 is
    different, two draws of the same herds are not distinguishable."""
    rng = np.random.default_rng(9)
    naive = [1.0 + rng.binomial(199, 0.7, EVENTS) for _ in range(3)]
    lock = [1.0 + rng.poisson(0.6, EVENTS) for _ in range(3)]
    trials, windows = [], {}
    for number, sizes in enumerate([*naive, *lock], start=1):
        strategy = "naive" if number <= 3 else "lock"
        trials.append({"trial": number, "strategy": strategy, "expiry_events": EVENTS,
                       **events.figures(herds_of(sizes), 0, 0, 1)})
        windows[number] = repeats.TrialEvents(sizes, np.zeros(EVENTS))
    found = repeats.per_strategy(trials, windows)
    pooled = found["naive"]["origin_per_expiry"]
    assert pooled.value == pytest.approx(np.concatenate(naive).mean())
    assert pooled.lo < pooled.value < pooled.hi and pooled.n == 3 * EVENTS
    apart = repeats.difference("origin_per_expiry", found["naive"]["origin_per_expiry"],
                               found["lock"]["origin_per_expiry"])
    assert apart.verdict == repeats.DIFFERENT and apart.hi < 0
    again = repeats.strategy_estimates(trials[:3], {n: windows[n] for n in (1, 2, 3)})
    same = repeats.difference("origin_per_expiry", pooled, again["origin_per_expiry"])
    assert same.verdict == repeats.SAME
    ranked = repeats.order({"naive": pooled, "lock": found["lock"]["origin_per_expiry"],
                            "naive again": again["origin_per_expiry"]})
    assert [rel for _, rel in ranked] == ["", "<", "~"]


def test_a_table_from_a_trials_table_alone_reads_the_stored_intervals() -> None:
    """An older run (no expiries.parquet) and a run with one repeat read the trial's columns."""
    row = {"trial": 1, "strategy": "naive", "origin_per_expiry": 150.0,
           "origin_per_expiry_lo": 140.0, "origin_per_expiry_hi": 160.0, "expiry_events": 14}
    e = repeats.strategy_estimates([row], {})["origin_per_expiry"]
    assert (e.value, e.lo, e.hi) == (150.0, 140.0, 160.0)
    assert pa.Table.from_pylist([row]).num_rows == 1


def test_target_width_says_how_many_seconds_or_repeats() -> None:
    """145 [121, 170] is 34 % wide: 10 % takes (34 / 10)^2 = 11.4x the events; three events
    where eight are needed take 2.7x."""
    wide = {"origin_per_expiry": Estimate(145.0, 121.0, 170.0, 14, "events", 8),
            **{f: Estimate(1.0, 0.99, 1.01, 10_000, "requests", 6) for f in ("p50_ms", "p99_ms")},
            "rps": Estimate(100.0, n=3, unit="seconds", need=8)}
    trials = [{"strategy": "naive", "window_s": 28.0}]
    notes = verdicts.target_notes({"naive": wide}, trials, 10.0)
    assert notes == [
        "naive: origin/expiry: 145.0 [121.0, 170.0] is 34 % wide; 10 % needs about 11.4x the "
        "events: a window of 320 s per trial (--seconds 320 plus warm-up and drain), or --repeat 12",
        "naive: rps: n=3: too few seconds, 8 needed; 10 % needs about 2.7x the seconds: a window "
        "of 75 s per trial (--seconds 75 plus warm-up and drain), or --repeat 3"]


def test_a_mean_carried_by_a_rare_tail_keeps_its_interval_within_the_herds() -> None:
    """Thirteen refresh cycles of 1-2 calls and three expiries with herds of 161-433 (XFetch
    beta=10, experiment 000's preset): the widened interval stays above the smallest herd."""
    sizes = np.array([1, 1, 1, 1, 2, 2, 1, 1, 4, 7, 18, 1, 2, 161, 233, 433], np.float64)
    f = events.figures(herds_of(sizes), 0, 0, 1)
    assert 1.0 <= f["origin_per_expiry_lo"] < f["origin_per_expiry"] < f["origin_per_expiry_hi"] <= 433
    e = repeats.trial_estimate({**f, "expiry_events": 16}, "origin_per_expiry")
    assert e.known and e.too_few is None


def test_a_latency_verdict_of_one_run_each_says_it_is_within_the_run() -> None:
    """A trial's p99 interval is its rows' sampling alone: two single runs that differ are said
    to differ within their runs, and over repeats the plain verdict stands."""
    a, b = Estimate(100.0, 98.0, 102.0, 10_000, "requests", 368), Estimate(120.0, 118.0, 122.0,
                                                                            10_000, "requests", 368)
    single = repeats.difference("p99_ms", a, b)
    assert single.verdict == f"{repeats.DIFFERENT} {repeats.WITHIN_RUN}"
    over = repeats.difference("p99_ms", replace(a, runs=3), replace(b, runs=3))
    assert over.verdict == repeats.DIFFERENT
    events_only = repeats.difference("origin_per_expiry", a, b)
    assert events_only.verdict == repeats.DIFFERENT
