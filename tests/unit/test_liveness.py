"""Liveness logic without services: heartbeats on a fake clock, the roster and its policy, the
options and their manifest, and what the table says about a trial that lost a worker.

The real thing (a worker SIGKILLed or SIGSTOPped by PID mid-trial) is tests/e2e/test_liveness.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator import experiment
from coordinator.cli.commands import cli
from coordinator.cli.launch import config_from
from coordinator.console import Console
from coordinator.manifest import Manifest
from coordinator.trials import dispatch
from coordinator.trials.liveness import Health, Liveness, Loss, LossCause, LossPolicy, Roster, WorkersLost
from results.outputs import table
from tests.helpers import assert_bad_input, run_cli


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def beat(n: int, requests: int = 0) -> dict[str, int]:
    return {"requests": requests, "origin_calls": 0, "errors": 0, "beat": n}


def test_a_worker_silent_past_the_limit_is_lost_once_and_at_that_moment() -> None:
    clock = Clock()
    live = Liveness(["a", "b"], silence_s=2.0, trial=3, now=clock)
    for n in range(1, 5):
        clock.t += 0.5
        assert live.observe("a", "PROGRESS", beat(n)) is Health.RUNNING
        assert live.observe("b", "PROGRESS", beat(n if n < 2 else 1)) is Health.RUNNING  # b stops
    clock.t += 0.6  # b silent 2.1 s now
    assert live.observe("b", "PROGRESS", beat(1)) is Health.LOST
    loss = live.lost()["b"]
    assert loss.cause is LossCause.SILENT and loss.trial == 3 and 2.0 < loss.silent_s < 2.2
    assert live.observe("b", "SUCCESS", None) is Health.LOST  # a late result does not revive it
    assert live.waiting() == 1 and "a" not in live.lost()


def test_the_same_beat_is_silence_even_while_the_counts_stand_still_or_not() -> None:
    clock = Clock()
    live = Liveness(["a"], silence_s=1.0, now=clock)
    live.observe("a", "PROGRESS", beat(1, requests=5))
    clock.t += 1.2
    assert live.observe("a", "PROGRESS", beat(1, requests=5)) is Health.LOST


def test_pending_then_started_is_a_sign_of_life_and_the_dispatch_starts_the_clock() -> None:
    clock = Clock()
    live = Liveness(["a"], silence_s=1.0, now=clock)
    clock.t += 0.9
    assert live.observe("a", "PENDING", None) is Health.RUNNING
    clock.t += 0.2  # never picked up: 1.1 s since the dispatch
    assert live.observe("a", "PENDING", None) is Health.LOST


def test_a_long_gap_that_ends_is_slow_not_lost() -> None:
    clock = Clock()
    live = Liveness(["a"], silence_s=4.0, now=clock)
    live.observe("a", "PROGRESS", beat(1))
    for _ in range(5):  # paused for more than half the limit, read every 0.5 s
        clock.t += 0.5
        assert live.observe("a", "PROGRESS", beat(1)) is Health.RUNNING
    clock.t += 0.5
    assert live.observe("a", "PROGRESS", beat(2)) is Health.RUNNING
    clock.t += 0.5
    assert live.observe("a", "SUCCESS", {"rows": ""}) is Health.DONE
    assert live.slow() == {"a": 2.5} and live.lost() == {}


def test_a_pause_of_the_coordinators_own_is_no_workers_silence() -> None:
    """The coordinator did not read for 8 s (a starved CPU) and then saw a new beat: the worker
    beat meanwhile, as far as anyone knows; it is neither slow nor lost."""
    clock = Clock()
    live = Liveness(["a"], silence_s=4.0, now=clock)
    live.observe("a", "PROGRESS", beat(1))
    clock.t += 8.0
    assert live.observe("a", "PROGRESS", beat(33)) is Health.RUNNING
    assert live.slow() == {} and live.lost() == {}


def test_short_gaps_are_neither_slow_nor_lost() -> None:
    clock = Clock()
    live = Liveness(["a"], silence_s=4.0, now=clock)
    for n in range(1, 10):
        clock.t += 0.6
        live.observe("a", "PROGRESS", beat(n))
    assert live.slow() == {} and live.lost() == {}


def test_a_worker_our_injector_killed_is_given_up_not_lost() -> None:
    live = Liveness(["a"], silence_s=5.0)
    live.kill("a")
    assert live.watches["a"].health is Health.KILLED and live.lost() == {} and live.waiting() == 0


def loss(worker: str, trial: int = 1) -> Loss:
    return Loss(worker, LossCause.SILENT, trial, 5.2, 5.0, 1)


def test_the_roster_drops_a_lost_worker_from_later_trials_and_records_slow_ones() -> None:
    roster = Roster(["w1", "w2", "w3"], LossPolicy.CONTINUE, 5.0)
    roster.record(1, {"w3": loss("w3")}, {"w1": 3.4})
    assert roster.active == ["w1", "w2"] and roster.degraded
    data = roster.to_json()
    assert data["lost"][0]["worker"] == "w3" and data["lost"][0]["detail"] == "silent 5.2 s (limit 5 s)"
    assert data["slow"] == [{"worker": "w1", "trial": 1, "longest_silence_s": 3.4}]
    assert roster.describe() == "1 worker lost (w3 in trial 1: silent 5.2 s (limit 5 s)); 2 left"


class Quiet(Console):
    def __init__(self) -> None:
        super().__init__(quiet=True)


def test_between_trials_a_worker_that_does_not_answer_the_ping_is_lost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "ping", lambda app, workers, within_s: {"w1"})
    roster = Roster(["w1", "w2"], LossPolicy.CONTINUE, 1.0)
    experiment._recheck(object(), roster, 2, Quiet())
    assert roster.active == ["w1"] and roster.lost[0].cause is LossCause.NO_PING
    assert roster.lost[0].trial == 2


def test_fail_stops_at_the_first_loss_and_continue_stops_only_with_nobody_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "ping", lambda app, workers, within_s: set())
    failing = Roster(["w1", "w2"], LossPolicy.FAIL, 1.0)
    with pytest.raises(WorkersLost, match="--on-worker-loss fail"):
        experiment._recheck(object(), failing, 2, Quiet())
    empty = Roster(["w1"], LossPolicy.CONTINUE, 1.0)
    with pytest.raises(dispatch.DispatchError, match="no worker left"):
        experiment._recheck(object(), empty, 2, Quiet())


def _config(args: list[str]) -> Any:
    command = cli.commands["launch"]
    with command.make_context("launch", list(args)) as ctx:
        return config_from(dict(ctx.params))


def test_the_options_reach_the_config_and_round_trip_through_the_manifest() -> None:
    config = _config(["--out", "x", "--worker-silence", "2.5", "--on-worker-loss", "fail"])
    assert config.timing.worker_silence_s == 2.5 and config.on_worker_loss is LossPolicy.FAIL
    rebuilt = Manifest.of(config).config(Path("x"), None)
    assert rebuilt.timing.worker_silence_s == 2.5 and rebuilt.on_worker_loss is LossPolicy.FAIL
    default = _config(["--out", "x"])
    assert default.timing.worker_silence_s == 5.0 and default.on_worker_loss is LossPolicy.CONTINUE


@pytest.mark.parametrize(("args", "says"), [
    (["--worker-silence", "0.5"], "--worker-silence"),
    (["--worker-silence", "soon"], "--worker-silence"),
    (["--on-worker-loss", "retry"], "--on-worker-loss"),
])
def test_bad_liveness_options_are_one_line_and_exit_2(
        args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert_bad_input(*run_cli(["launch", *args], capsys), says)


BASE = {"trial": 1, "strategy": "naive", "repeat": 1, "requests": 100, "errors": 0,
        "origin_per_expiry": 1.0, "rps": 10.0, "p50_ms": 1.0, "p99_ms": 2.0, "waits": 0,
        "stale_served": 0, "peak_origin_inflight": 1, "below_floor": False, "db_calls_match": True,
        "origin_calls_total": 40, "db_calls": 40, "workers": 3, "workers_lost": 0}
LOST = {"db_calls_match": False, "db_calls": 52, "workers_lost": 1, "complete": False,
        "lost_workers": "w3@h: lost: silent 5.1 s (limit 5 s)"}


def cells(trials: list[dict[str, Any]], column: str) -> list[str]:
    columns = table.columns(trials)
    return [line[columns.index(column)] for line in table.summary_rows(trials)]


def test_a_mismatch_caused_by_a_lost_worker_is_explained_by_the_loss() -> None:
    trials = [{**BASE, **LOST}]
    assert cells(trials, "db check") == ["LOST 40≠52"]
    assert cells(trials, "workers") == ["2/3 lost 1"]
    notes = table.notes(trials)
    assert any("whose rows never arrived; not a miscount" in n for n in notes), notes
    assert any("1 of 3 workers lost (w3@h: lost: silent 5.1 s" in n for n in notes), notes
    assert not any("clients counted" in n for n in notes)  # not blamed on the client count


def test_a_mismatch_without_a_loss_is_still_a_mismatch_and_no_workers_column() -> None:
    trials = [{**BASE, "db_calls_match": False, "db_calls": 52}]
    assert cells(trials, "db check") == ["MISMATCH 40≠52"]
    assert "workers" not in table.columns(trials)  # older runs and runs without losses
    assert any("clients counted 40 origin calls, PostgreSQL counted 52" in n
               for n in table.notes(trials))


def test_a_slow_worker_is_shown_and_noted_without_a_loss() -> None:
    trials = [{**BASE, "slow_workers": "w1@h: silent up to 3.4 s"}]
    assert cells(trials, "workers") == ["3/3 slow 1"] and cells(trials, "db check") == ["ok"]
    assert any("slow, not lost: w1@h: silent up to 3.4 s" in n for n in table.notes(trials))
