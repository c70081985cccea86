"""How sure each figure is: 95 % intervals, computed once here (issue 26; docs/results.md).

Three methods, each for the data it fits:

- **Bootstrap over units** (``bootstrap``): a figure that is a ratio of sums over independent
  units (origin calls per event: calls over the window's events; waits per event; rps: requests
  over the window's seconds; stale share: stale answers over requests, per second) is
  recomputed on ``DRAWS`` resamples of the units with replacement. The percentile interval is
  widened about the figure by ``widening(n)`` (the ratio of Student's t to the normal quantile,
  with the bootstrap's n / (n - 1) variance bias undone), so that few units give a t-like
  interval instead of a too-narrow one. Fewer than ``MIN_UNITS`` units: no interval.
- **Order statistics** (``order_ranks``): a percentile's interval is two order statistics of
  the sample, their ranks from the binomial (the count of values below the true quantile is
  Binomial(n, q)): distribution-free, exact for continuous values, conservative with ties. Too
  few values when even the smallest or the largest value would not do (a p99 needs 368).
- **Drawn from an interval** (``draws_from``): a figure known only by its value and interval
  (a trial's p99 across repeats, either side of a comparison) is drawn from a normal split at
  the value, each side as wide as its half of the interval.

Every method assumes its units independent: events of one trial, requests, seconds. Draws are
seeded from the data, so the same rows always give the same interval.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

LEVEL = 0.95
ALPHA = 1 - LEVEL
Z = NormalDist().inv_cdf(1 - ALPHA / 2)
DRAWS = 2000
MIN_UNITS = 8  # the bootstrap's fewest units: below, its coverage falls under 93 % (test_intervals)
NAN = float("nan")


@dataclass(frozen=True)
class Estimate:
    """A figure, its 95 % interval (NaN when its method cannot give one), and how many
    ``unit`` it rests on. ``draws``: the figure's bootstrap distribution, for comparisons."""

    value: float
    lo: float = NAN
    hi: float = NAN
    n: int = 0
    unit: str = "events"
    need: int = 0  # the fewest units the method needs
    draws: np.ndarray | None = field(default=None, compare=False, repr=False)
    runs: int = 1  # the repeats (trials) it is over

    @property
    def known(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    @property
    def too_few(self) -> str | None:
        """``n=3: too few events`` when the method needs more units than there were."""
        if math.isnan(self.value) or self.n >= self.need:
            return None
        return f"n={self.n}: too few {self.unit}"

    def width(self) -> float:
        """The interval's width relative to the figure (NaN: none, or a figure of 0)."""
        if not self.known or not self.value:
            return NAN
        return (self.hi - self.lo) / abs(self.value)

    def sample(self, size: int = DRAWS) -> np.ndarray | None:
        """Draws of the figure: the bootstrap's own, else drawn from its interval."""
        if self.draws is not None:
            return self.draws
        return draws_from(self.value, self.lo, self.hi, size) if self.known else None


def rng_for(*arrays: np.ndarray) -> np.random.Generator:
    """A generator seeded from the data: the same figures give the same interval every time."""
    digest = hashlib.blake2b(digest_size=8)
    for a in arrays:
        digest.update(np.ascontiguousarray(a, np.float64).tobytes())
        digest.update(b"|")
    return np.random.default_rng(int.from_bytes(digest.digest(), "little"))


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (Cornish-Fisher to the fourth term: within 1e-3 from 5 df)."""
    z = NormalDist().inv_cdf(p)
    terms = ((z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96,
             (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
             (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
    return float(z + sum(g / df ** (i + 1) for i, g in enumerate(terms)))


def widening(n: int) -> float:
    """How much wider than the bootstrap's own spread a 95 % interval from n units is."""
    if n < 2:
        return NAN
    return math.sqrt(n / (n - 1)) * t_quantile(1 - ALPHA / 2, n - 1) / Z


def bootstrap(num: np.ndarray, den: np.ndarray | None = None, unit: str = "events",
              need: int = MIN_UNITS, widen: int | None = None) -> Estimate:
    """sum(num) / sum(den) (den: one per unit) with its bootstrap interval over the units."""
    num = np.asarray(num, np.float64)
    den = np.ones_like(num) if den is None else np.asarray(den, np.float64)
    n = int(num.size)
    value = float(num.sum() / den.sum()) if n and den.sum() else NAN
    if n < need or math.isnan(value):
        return Estimate(value, n=n, unit=unit, need=need)
    if np.all(num == num[0]) and np.all(den == den[0]):  # every resample is the figure itself
        return Estimate(value, value, value, n, unit, need, np.full(DRAWS, value))
    picks = rng_for(num, den).integers(0, n, (DRAWS, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = num[picks].sum(axis=1) / den[picks].sum(axis=1)
        ratios = num[den > 0] / den[den > 0]
    bounds = (float(ratios.min()), float(ratios.max()))
    return widened(value, raw[np.isfinite(raw)], widen or n, unit, need, bounds)


def widened(value: float, raw: np.ndarray, n: int, unit: str, need: int,
            bounds: tuple[float, float] = (-math.inf, math.inf)) -> Estimate:
    """The percentile interval of ``raw`` about ``value``, widened for n units, kept within
    ``bounds`` (a ratio of sums lies between the smallest and largest unit's own ratio: a mean
    herd is never below the smallest herd)."""
    draws = np.clip(value + widening(n) * (raw - value), *bounds)
    lo, hi = np.quantile(draws, [ALPHA / 2, 1 - ALPHA / 2])
    return Estimate(value, float(min(lo, value)), float(max(hi, value)), n, unit, need, draws)


def binomial_cdf(n: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    """(k, P(B <= k)) for B ~ Binomial(n, q), over the ks that carry its mass (all for small n,
    twelve standard deviations about the mean for large n)."""
    sd = math.sqrt(n * q * (1 - q))
    lo = max(0, math.floor(n * q - 12 * sd - 12))
    hi = min(n, math.ceil(n * q + 12 * sd + 12))
    k = np.arange(lo, hi + 1)
    first = (math.lgamma(n + 1) - math.lgamma(lo + 1) - math.lgamma(n - lo + 1)
             + lo * math.log(q) + (n - lo) * math.log1p(-q))
    steps = np.log(n - k[:-1]) - np.log(k[:-1] + 1) + math.log(q) - math.log1p(-q)
    pmf = np.exp(first + np.concatenate([[0.0], np.cumsum(steps)]))
    return k, np.minimum(np.cumsum(pmf), 1.0)


def order_ranks(n: int, q: float) -> tuple[int, int] | None:
    """0-based ranks (l, u) with P(x[l] <= the q-quantile <= x[u]) >= 95 % for n sorted
    independent values; None when n is too small for the ends to hold it."""
    if n < 1:
        return None
    k, cdf = binomial_cdf(n, q)
    # x[l] (0-based) lies above the quantile when at most l values fall below it: P(B <= l)
    below = k[cdf <= ALPHA / 2]
    above = k[cdf >= 1 - ALPHA / 2]  # x[u] lies below it when more than u do: 1 - P(B <= u)
    if k[0] > 0:
        below = np.concatenate([[k[0] - 1], below])
    if not below.size or not above.size or above[0] > n - 1:
        return None
    return int(below[-1]), int(above[0])


def fewest_for(q: float) -> int:
    """The fewest values whose order statistics can hold the q-quantile at 95 %."""
    ends = max(q, 1 - q)  # the chance that every value falls on one side of the quantile
    return math.ceil(math.log(ALPHA / 2) / math.log(ends))


def quantile(values: np.ndarray, q: float, unit: str = "events") -> Estimate:
    """The q-quantile (linear interpolation) of a small sample, with its order-statistic
    interval."""
    ordered = np.sort(np.asarray(values, np.float64))
    n = int(ordered.size)
    need = fewest_for(q)
    value = float(np.quantile(ordered, q)) if n else NAN
    ranks = order_ranks(n, q)
    if ranks is None or n < need:
        return Estimate(value, n=n, unit=unit, need=need)
    return Estimate(value, float(ordered[ranks[0]]), float(ordered[ranks[1]]), n, unit, need)


def draws_from(value: float, lo: float, hi: float, size: int = DRAWS,
               rng: np.random.Generator | None = None) -> np.ndarray:
    """A figure drawn from a normal split at ``value``: each side's sd is its half-interval / Z."""
    rng = rng or rng_for(np.array([value, lo, hi, size]))
    z = rng.standard_normal(size)
    return np.where(z < 0, value + z * (value - lo) / Z, value + z * (hi - value) / Z)


def interval_of(draws: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(draws, [ALPHA / 2, 1 - ALPHA / 2])
    return float(lo), float(hi)


def per_bin(t_ns: np.ndarray, start_ns: int, window_ns: int, count: int,
            weights: np.ndarray | None = None) -> np.ndarray:
    """Counts of instants (weighted) in ``count`` equal bins of the window."""
    if count < 1 or window_ns <= 0:
        return np.zeros(0, np.int64)
    share = (np.asarray(t_ns, np.float64) - start_ns) / window_ns  # float: no int64 overflow
    index = np.clip(np.floor(share * count), 0, count - 1).astype(np.int64)
    return np.bincount(index, weights=weights, minlength=count)[:count]


def columns(name: str, e: Estimate) -> dict[str, float]:
    """``name_lo`` and ``name_hi`` for trials.parquet."""
    return {f"{name}_lo": e.lo, f"{name}_hi": e.hi}


def event_columns(sizes: Sequence[int], waits: Sequence[int]) -> dict[str, float | int]:
    """A trial's per-event intervals over its window's events (trials.parquet): the mean herd
    and waits per event by the bootstrap over events, the herds' median and p90 by order
    statistics."""
    calls, waited = np.asarray(sizes, np.float64), np.asarray(waits, np.float64)
    mean, per_wait = bootstrap(calls), bootstrap(waited)
    median, p90 = quantile(calls, 0.5), quantile(calls, 0.9)
    return {**columns("origin_per_expiry", mean), **columns("herd_median", median),
            "herd_p90": p90.value, **columns("herd_p90", p90),
            "event_waits": int(waited.sum()), "waits_per_event": per_wait.value,
            **columns("waits_per_event", per_wait)}


def needed(e: Estimate, target: float) -> float:
    """How many times the units an interval as wide as ``target`` (relative) would take
    (width falls as one over the square root of the units); NaN when there is no interval."""
    width = e.width()
    if math.isnan(width) or target <= 0:
        return NAN
    return max(1.0, (width / target) ** 2)


def spread(values: Sequence[float]) -> float:
    """Coefficient of variation (sample sd / mean) of finite values; NaN for fewer than two."""
    kept = np.array([v for v in values if math.isfinite(v)], np.float64)
    if kept.size < 2 or not kept.mean():
        return NAN
    return float(kept.std(ddof=1) / abs(kept.mean()))
