"""The progress line's rate is what the workers report sending (their beats), not the rows the
coordinator has written so far (issue 31: 24-26k rps shown during a 41k rps trial); every
``too few`` label names what it counts."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

import strategies
from coordinator.trials import dispatch
from coordinator.trials.columns import progress_line, sent_rate
from coordinator.trials.plan import Schedule, TrialPlan, plan_trial
from model.wire import beat_sent
from results.figures import metrics, rates, repeats
from worker import heartbeat


def plan_started(seconds_ago: float) -> TrialPlan:
    schedule = Schedule(2, 20, 2.0, 10.0, 1.0, ("orders:0",))
    return plan_trial(schedule, 3, strategies.parse("naive"), 1,
                      now_ns=time.time_ns() - round(seconds_ago * 1e9), lead_s=0)


def beat(number: int, start_ns: int, sent: int, elapsed_s: float) -> bytes:
    return f"{number} 1700000000000000000 {start_ns} {sent} {round(elapsed_s * 1e9)}".encode()


def test_the_rate_is_the_workers_own_not_the_rows_written() -> None:
    """Two workers sent 20,000 and 30,000 requests in 5 s; the coordinator has written 12,000."""
    plan = plan_started(5.0)
    beats = {"w1": beat(41, plan.start_ns, 20_000, 5.0), "w2": beat(40, plan.start_ns, 30_000, 5.0)}
    p = dispatch.Progress({"requests": 12_000, "origin_calls": 7, "errors": 0}, 2, beats)
    line = progress_line("trial 3/4 naive r1", plan, 10.0, p)
    assert "10,000 rps sent" in line and "origin 7" in line, line


def test_a_beat_of_another_trial_or_without_a_count_shows_the_rows_written() -> None:
    """Another trial: the one before, or trial 3 of an earlier run (trial numbers repeat)."""
    plan = plan_started(4.0)
    old = {"w1": beat(41, plan.start_ns - 12 * 10**9, 20_000, 10.0), "w2": b"12 1700000000000000000"}
    p = dispatch.Progress({"requests": 8_000, "origin_calls": 0, "errors": 0}, 2, old)
    line = progress_line("trial 3/4 naive r1", plan, 10.0, p)
    assert "rps written" in line and "2,000 rps" in line, line
    assert sent_rate(old, plan.start_ns, 10.0) is None


def test_past_the_trial_end_the_rate_is_over_the_trial_length() -> None:
    """A worker's last beat after its clients stopped: requests over at most the trial's length."""
    assert sent_rate({"w1": "9 1 77 50000 12000000000"}, 77, 10.0) == 5000.0


def test_a_garbled_beat_shows_no_rate() -> None:
    for garbled in (b"1 2 x 4 5", b"", None, 7, b"1 2 3 4 0", b"1 2 3 4 -5"):
        assert beat_sent(garbled, 3) is None, garbled


def test_the_count_goes_from_the_worker_to_its_beat(tmp_path: Path) -> None:
    """The worker's main thread writes, the beater (another process; here another map) reads."""
    writer = heartbeat.SentCount(tmp_path / "sent")
    reader = heartbeat.SentCount(tmp_path / "sent")
    writer.set(5, 123_456, 2_500_000_000)
    value = heartbeat.beat_value(17, reader)
    assert value.split()[0] == "17" and beat_sent(value, 5) == (123_456, 2_500_000_000)
    assert heartbeat.beat_value(18, None).split()[0] == "18" and beat_sent(
        heartbeat.beat_value(18, None), 5) is None
    reader.close()
    assert not (tmp_path / "sent").exists()
    writer.close()


def test_the_rate_bins_say_ttl_periods_when_each_is_one() -> None:
    """A 120 s trial at TTL 20 s: 5 bins, each a TTL period (the label said ``seconds``)."""
    ttl = 20 * 10**9
    per = rates.Seconds(metrics.Window(0, 5 * ttl, ttl))
    per.requests = np.full(per.count, 1000)
    rps, share = per.estimates()
    assert per.count == 5 and rps.too_few == "n=5: too few TTL periods" == share.too_few
    row = {"rps": 50.0, "rps_lo": math.nan, "rps_hi": math.nan, "rate_bins": 5, "ttl_s": 20.0}
    assert repeats.trial_estimate(row, "rps").too_few == "n=5: too few TTL periods"
    # TTL 0.25 s: bins of four periods, about a second each
    assert rates.bin_unit(250_000_000) == "seconds" and rates.bin_unit(0) == "seconds"
    assert repeats.trial_estimate({**row, "ttl_s": 0.25}, "rps").too_few == "n=5: too few seconds"
