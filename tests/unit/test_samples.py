"""A black-box trial's origin calls from samples of a count (results.figures.samples): the same
attribution as every trial's (results.figures.events), a herd being the increase of the samples
after an event up to the next; events pooled, or inferred from bursts; the two counts' checks."""

from __future__ import annotations

import pyarrow as pa

from results.figures import events, samples
from results.figures.events import EventPlan, Herd
from results.figures.expiry_reports import Event, Source
from results.figures.samples import Samples
from results.outputs import sampled

MS = 1_000_000
S = 1000 * MS
TICK = 10 * MS  # 100 Hz


def counted(rises: dict[int, int], until_ns: int = 4 * S) -> Samples:
    """Samples every 10 ms from 0 whose count rises by ``rises[t]`` at sample instant ``t``."""
    times, values, total = [], [], 100  # a count that did not start at 0
    for t in range(0, until_ns, TICK):
        total += rises.get(t, 0)
        times.append(t)
        values.append(total)
    return Samples("pg_stat_statements", tuple(times), tuple(values))


def plan(window: tuple[int, int] = (S, 3 * S)) -> EventPlan:
    return EventPlan(window, first_expiry_ns=1500 * MS, ttl_ns=500 * MS, periods=4, aligned=False,
                     tolerance_ns=0)


NO_ROWS = pa.table({"key": pa.array([], pa.string()), "origin_called": pa.array([], pa.int8())})


def attributed(count: Samples, observed: list[Event], key: str = "1") -> tuple[dict[str, object],
                                                                               list[Herd]]:
    window = count.increase(S, 3 * S)
    return events.trial_events(NO_ROWS, observed, plan(), window, samples.calls_table(count, key))


def test_a_herd_is_the_increase_after_its_event_up_to_the_next() -> None:
    # deletes at 1.5, 2.0, 2.5 s; herds of 20, 1 and 7 calls seen over the next samples
    count = counted({1510 * MS: 12, 1520 * MS: 8, 2010 * MS: 1, 2510 * MS: 3, 2600 * MS: 4,
                     500 * MS: 5})  # 5 before any event: a cold fill
    observed = [Event("1", t, Source.DELETED) for t in (1500 * MS, 2000 * MS, 2500 * MS)]
    figures, herds = attributed(count, observed)
    assert [h.size for h in herds] == [20, 1, 7]
    assert figures["origin_per_expiry"] == 28 / 3 and figures["expiry_events"] == 3
    assert figures["unattributed_calls"] == 5
    assert herds[0].calls[0] == (1510 * MS, 1510 * MS)  # at the sample that saw them


def test_an_increase_seen_before_an_event_is_not_its_herd() -> None:
    # a sample 1 ms before the delete: tolerance 0, those calls had ended before it
    count = counted({1490 * MS: 3, 1510 * MS: 9})
    observed = [Event("1", 1500 * MS, Source.DELETED), Event("1", 1000 * MS, Source.DELETED)]
    _, herds = attributed(count, observed)
    assert [h.size for h in herds] == [3, 9]


def test_increase_and_total_read_the_samples_before_each_instant() -> None:
    count = counted({1000 * MS: 4, 2000 * MS: 6})
    assert count.total() == 10
    assert count.increase(1000 * MS, 2000 * MS) == 4  # seen at 1.0 s: inside [1.0 s, 2.0 s)
    assert count.increase(1000 * MS + 1, 2000 * MS + 1) == 6
    assert round(count.rate_hz()) == 100
    assert Samples("counter", (), ()).increase(0, S) == 0


def test_overlapping_reads_out_of_order_add_nothing() -> None:
    # two lanes: the read stamped at 20 ms was served before the one stamped at 10 ms
    count = Samples("counter", (0, 10, 20, 30, 40), (10, 12, 11, 12, 13))
    table = samples.calls_table(count, "1")
    assert table["start"].to_pylist() == [10, 10, 40] and count.total() == 3
    assert count.increase(0, 35) == 2 and count.increase(15, 35) == 0


def test_events_of_several_keys_are_pooled_under_one_key() -> None:
    found = [Event("a", 1500 * MS, Source.DELETED), Event("b", 1500 * MS + 2 * MS, Source.DELETED),
             Event("a", 2000 * MS, Source.EXPIRED)]
    pooled = samples.pooled(found, samples.ANY_KEY, 100 * MS)
    assert [(e.key, e.at_ns, e.source) for e in pooled] == [
        ("*", 1500 * MS, Source.DELETED), ("*", 2000 * MS, Source.EXPIRED)]


def test_bursts_after_a_quiet_spell_are_inferred_events() -> None:
    count = counted({1510 * MS: 12, 1520 * MS: 8, 1530 * MS: 1, 2510 * MS: 3, 2600 * MS: 4})
    inferred = samples.inferred_events(count, "1", 250 * MS)
    assert [(e.at_ns, e.source) for e in inferred] == [(1500 * MS, Source.INFERRED),
                                                        (2500 * MS, Source.INFERRED)]
    _, herds = attributed(count, inferred)
    assert [h.size for h in herds] == [21, 7]


def test_the_two_counts_agree_within_five_percent_or_two_calls_and_herd_by_herd() -> None:
    assert samples.totals_agree(100, 105) and not samples.totals_agree(100, 106)
    assert samples.totals_agree(10, 12) and not samples.totals_agree(10, 13)
    a = [Herd(Event("1", t, Source.DELETED), [(t, t)] * n) for t, n in ((1, 20), (2, 1), (3, 5))]
    b = [Herd(Event("1", t, Source.DELETED), [(t, t)] * n) for t, n in ((1, 21), (2, 1), (3, 3))]
    assert samples.herds_agreeing(a, b) == (2, 3)
    assert not samples.herds_agree(2, 3) and samples.herds_agree(9, 10)
    assert samples.herds_agree(0, 0)


def test_the_table_names_the_count_read_and_its_check() -> None:
    row = {"origin_source": "pg_stat_statements", "db_check": "ok", "db_calls_match": True,
           "origin_calls_total": 80, "db_calls": 80, "sample_hz": 99.0,
           "expiry_source": "server", "deletes": 8, "deletes_observed": 8}
    assert sampled.check_cell([row]) == "ok pg+counter"
    assert sampled.notes(row) == []
    bad = {**row, "db_calls_match": False, "db_calls": 60, "db_check": "mismatch",
           "db_check_detail": "d", "sample_hz": 30.0, "deletes_observed": 7}
    assert sampled.check_cell([bad]) == "MISMATCH pg 80≠counter 60"
    assert len(sampled.notes(bad)) == 3
    alone = {**row, "origin_source": "counter", "db_check": "unchecked",
             "expiry_source": "scheduled-delete"}
    assert sampled.check_cell([alone]) == "counter only"
    assert sampled.notes(alone) == [sampled.EVENT_NOTES["scheduled-delete"]]
