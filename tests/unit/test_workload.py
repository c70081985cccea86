"""Pure workload logic: key choice, endpoint mix, stages, open-loop instants."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from model.workload import InvalidWorkload, KeyKind, KeySet, Query, Workload, shop, single
from worker.schedule import (
    Arrivals,
    Segment,
    Stages,
    key_table,
    segments,
    uniform_table,
    weighted_table,
)

S = 10**9


def test_key_sets_parse_and_reject() -> None:
    assert KeySet.parse("hot") == KeySet()
    assert KeySet.parse("many:100") == KeySet(KeyKind.MANY, 100)
    assert KeySet.parse("zipf:1000:1.1") == KeySet(KeyKind.ZIPF, 1000, 1.1)
    assert KeySet.parse("zipf:1000,1.1") == KeySet(KeyKind.ZIPF, 1000, 1.1)
    for bad in ("cold", "many", "many:0", "many:x", "zipf:10", "zipf:10:0", "hot:3"):
        with pytest.raises(InvalidWorkload):
            KeySet.parse(bad)


def test_hot_key_table_is_one_key() -> None:
    assert set(key_table(KeySet(), random.Random(1), size=1000)) == {0}


def test_many_keys_are_about_uniform() -> None:
    table = key_table(KeySet(KeyKind.MANY, 10), random.Random(1), size=100_000)
    counts = Counter(table)
    assert set(counts) == set(range(10))
    assert all(8_500 < c < 11_500 for c in counts.values())


def test_zipf_popularity_follows_rank() -> None:
    table = key_table(KeySet(KeyKind.ZIPF, 100, 1.0), random.Random(2), size=200_000)
    counts = Counter(table)
    harmonic = sum(1 / (r + 1) for r in range(100))
    # rank 0 gets 1/H of the draws, rank 1 half of that, rank 9 a tenth
    assert counts[0] / len(table) == pytest.approx(1 / harmonic, rel=0.05)
    assert counts[0] / counts[1] == pytest.approx(2.0, rel=0.1)
    assert counts[0] / counts[9] == pytest.approx(10.0, rel=0.2)


def test_endpoint_mix_is_exact_over_a_table() -> None:
    table = weighted_table([97, 3], random.Random(3), size=10_000)
    assert Counter(table) == {0: 9_700, 1: 300}
    assert list(table[:200]) != sorted(table[:200])  # shuffled, not 9,700 zeros first


def test_bypass_draws_give_exact_fractions() -> None:
    draws = uniform_table(random.Random(4), size=4096)
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        assert sum(1 for u in draws if u < fraction) == round(fraction * 4096)


def test_stage_boundaries() -> None:
    stages = Stages(start_ns=100 * S, length_ns=10 * S, count=3)
    assert stages.at(99 * S) == -1  # warm-up
    assert stages.at(100 * S) == 0
    assert stages.at(110 * S - 1) == 0
    assert stages.at(110 * S) == 1
    assert stages.at(129 * S) == 2
    assert stages.at(500 * S) == 2  # the last stage runs on to the end
    assert Stages(0, 0, 1).at(5 * S) == 0


def test_arrivals_interleave_workers_and_sum_to_the_rate() -> None:
    segs = [Segment(0, 100.0, 100)]  # 100 sends per second for one second, in total
    workers = [Arrivals(segs, w, 3) for w in range(3)]
    instants = sorted(t for a in workers for k in range(a.total) if (t := a.instant(k)) is not None)
    assert [a.total for a in workers] == [34, 33, 33]
    assert instants == [j * 10_000_000 for j in range(100)]
    assert workers[1].instant(0) == 10_000_000  # worker 1 takes global send 1
    assert workers[0].instant(34) is None


def test_staged_rates_follow_stage_boundaries() -> None:
    stages = Stages(start_ns=1 * S, length_ns=2 * S, count=2)
    segs = segments(0, 5 * S, stages, [10.0, 50.0])
    # warm-up 1 s at the first rate, stage 0 (2 s) at 10/s, stage 1 (2 s) at 50/s
    assert [(s.start_ns, s.rate, s.count) for s in segs] == [(0, 10.0, 10), (S, 10.0, 20),
                                                              (3 * S, 50.0, 100)]
    one = Arrivals(segs, 0, 1)
    assert one.total == 130
    assert one.instant(10) == S
    assert one.instant(30) == 3 * S
    assert one.instant(31) == 3 * S + S // 50
    gaps = {one.instant(k + 1) - one.instant(k) for k in range(30, 129)}  # type: ignore[operator]
    assert gaps == {S // 50}


def test_workload_round_trips_and_validates() -> None:
    work = Workload(shop(KeySet(KeyKind.MANY, 1000), 24, 60_000), rates=(200.0,),
                    bypass=(0, 0.25, 0.5, 0.75, 1.0), stage_s=10)
    again = Workload.from_json(work.to_json())
    assert again == work
    assert again.stages == 5 and again.bypass_at(3) == 0.75 and again.rate_at(4) == 200.0
    assert [e.weight for e in again.endpoints] == [97, 3]
    with pytest.raises(InvalidWorkload, match="stage-seconds"):
        Workload(single(Query.ORDERS, KeySet(), 1000), bypass=(0, 1))
    with pytest.raises(InvalidWorkload, match="different numbers of stages"):
        Workload(single(Query.ORDERS, KeySet(), 1000), rates=(1, 2, 3), bypass=(0, 1), stage_s=1)
    with pytest.raises(InvalidWorkload):
        Workload.from_json({"endpoints": [{"name": "x"}]})
