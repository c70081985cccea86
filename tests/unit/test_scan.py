"""Flat-memory figures (results.figures.scan): exact quantiles in two passes equal numpy's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from results.figures import intervals, scan

QS = (0.0, 0.001, 0.5, 0.9, 0.99, 0.999, 1.0)


@pytest.mark.parametrize("seed", range(6))
def test_two_pass_quantiles_are_numpy_s_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200_000))
    values = (rng.lognormal(14, 1.5, n) * (rng.random(n) < 0.99)).astype(np.int64)  # zeros too
    values[rng.random(n) < 0.001] = -5  # and a few below zero (a clock step)
    chunks = np.array_split(values, int(rng.integers(1, 9)))
    q = scan.Quantiles(QS)
    for feed in (q.count, q.keep):
        for chunk in chunks:
            feed(chunk)
    assert q.result() == pytest.approx(np.quantile(values, QS).tolist(), rel=0, abs=1e-6)
    assert q.peak == values.max()


def test_buckets_follow_the_values_order_and_their_bounds_hold_them() -> None:
    values = np.unique(np.concatenate([np.arange(-3, 5000),
                                       np.geomspace(1, 2**52, 4000).astype(np.int64)]))
    found = scan.buckets(values)
    assert np.all(np.diff(found) >= 0)
    for value, bucket in zip(values[::97], found[::97], strict=True):
        low, high = scan.bucket_bounds(int(bucket))
        assert low <= value < high


def test_the_second_pass_keeps_few_values() -> None:
    values = np.random.default_rng(1).integers(0, 10**9, 1_000_000)
    q = scan.Quantiles((0.5, 0.99))
    q.count(values)
    q.keep(values)
    assert q.held_bytes() < 0.02 * values.nbytes


def test_a_narrow_distribution_is_counted_not_held() -> None:
    """An all-hit trial's latencies lie in a few 4-ns buckets: the second pass counts them per
    value, exactly, instead of holding them (it held a fifth of them: 1.7 GB in the coordinator
    after a 96-million-row soak). The slow tail's wide buckets still hold their few values."""
    rng = np.random.default_rng(3)
    values = rng.normal(431, 20, 2_000_000).astype(np.int64)
    values[rng.random(values.size) < 0.002] = rng.integers(10**7, 10**9, 1)[0]
    q = scan.Quantiles(QS, bounded=(0.5, 0.99))
    for feed in (q.count, q.keep):
        for chunk in np.array_split(values, 7):
            feed(chunk)
    assert q.result() == pytest.approx(np.quantile(values, QS).tolist(), rel=0, abs=1e-6)
    ordered = np.sort(values)
    for q_, found in zip((0.5, 0.99), q.estimates_ms(), strict=True):
        lo, hi = intervals.order_ranks(values.size, q_) or (0, 0)
        assert (found.lo, found.hi) == (ordered[lo] / 1e6, ordered[hi] / 1e6)
    assert q.held_bytes() < 0.01 * values.nbytes


def test_no_values_is_nan() -> None:
    q = scan.Quantiles((0.5,))
    q.keep(np.zeros(0, np.int64))
    assert np.isnan(q.result()[0])


def test_quantiles_of_a_source_with_a_selection() -> None:
    table = pa.table({"latency_ns": np.arange(1000), "keep": np.arange(1000) % 2 == 0})
    got = scan.quantiles_of(scan.table_source(table), "latency_ns", (0.5,),
                            lambda b: np.asarray(b.column("keep")), columns=("keep",))
    assert got.result() == [float(np.quantile(np.arange(0, 1000, 2), 0.5))]
