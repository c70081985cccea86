"""The benchmarks' own code stays runnable as the schema grows (figures are not checked here)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from bench import locust_bench, recording, report_rows
from results.outputs.report import html_report


def test_synthetic_run_has_every_column_and_reports(tmp_path: Path) -> None:
    root = tmp_path / "run"
    report_rows.build(root, rows=40_000)
    written = html_report.write_report(root)
    assert written.html.exists() and written.pngs


def test_recorded_rows_ship_and_decode() -> None:
    recorder = recording.record_rows(1000)
    assert recorder.to_batch().num_rows == 1000


def test_locust_rate_is_read_from_its_last_json_summary() -> None:
    """Each forked Locust worker prints its own empty summary before the master's."""
    entry = {"num_requests": 3000, "num_failures": 2, "start_time": 100.0,
             "last_request_timestamp": 102.0}
    out = f'[]\n{json.dumps([entry, {**entry, "num_requests": 1000}])}\n[]\n'
    run = locust_bench.summarise(locust_bench.master_json(out), "PooledGet", processes=2)
    assert (run.requests, run.failures, run.rps) == (4000, 4, 2000.0)
    with pytest.raises(RuntimeError):
        locust_bench.summarise(locust_bench.master_json("[]\n[]"), "PooledGet", processes=1)


def test_the_closing_ratios_of_make_bench() -> None:
    """Each ratio is taken within a round, then the median over the rounds with their range."""
    from bench.ratios import Figures, Round

    runs = [locust_bench.LocustRun(user, n, 1, 0, rps) for user, n, rps in (
        ("PooledGet", 1, 5_000.0), ("PooledGet", 2, 6_000.0), ("PinnedGet", 2, 10_000.0))]
    rounds = [Round(30_000.0, {"socket": 40_000.0}, 10_000.0),
              Round(20_000.0, {"socket": 40_000.0}, 10_000.0),
              Round(36_000.0, {"socket": 40_000.0}, 9_000.0)]
    figures = Figures(rounds, runs)
    assert figures.efficiency == 0.75  # the middle round's 30k / 40k
    assert figures.vs_locust == 3.0  # per round 3.0, 2.0, 4.0: the median
    assert figures.efficiency_line() == (
        "generator efficiency (all-hit trial / plain-socket loop, each round): "
        "0.75 [0.50, 0.90] over 3 rounds")
    assert figures.vs_locust_line() == (
        "vs Locust: 3.00 x [2.00, 4.00] over 3 rounds against its fastest, PinnedGet at "
        "--processes 2, run in each round (the sweep's best of each, against the rounds' median "
        "all-hit rate: 5.0 x against PooledGet (--processes 2); 3.0 x against PinnedGet "
        "(--processes 2))")
    lone = Figures([Round(1.0, {"socket": 2.0})])
    assert lone.vs_locust is None and lone.vs_locust_line().startswith("vs Locust: n/a")
    assert figures.on_asyncio() is None  # no round ran the trial on asyncio clients


def test_the_asyncio_ratios_take_the_same_floor_and_locust_runs() -> None:
    from bench.ratios import Figures, Round

    rounds = [Round(30_000.0, {"socket": 40_000.0}, 10_000.0, all_hit_asyncio=36_000.0),
              Round(20_000.0, {"socket": 40_000.0}, 8_000.0, all_hit_asyncio=32_000.0)]
    on_asyncio = Figures(rounds).on_asyncio()
    assert on_asyncio is not None
    assert [r.efficiency for r in on_asyncio.rounds] == [0.9, 0.8]
    assert [r.vs_locust for r in on_asyncio.rounds] == [3.6, 4.0]
    assert on_asyncio.vs_locust_line(" on asyncio clients").startswith(
        "vs Locust on asyncio clients: n/a")  # no sweep: no fastest configuration to name
    assert Figures([rounds[0], Round(1.0, {"socket": 1.0})]).on_asyncio() is None


def test_cpu_line_names_the_groups_that_spent_nothing() -> None:
    from bench.ratios import Figures, Round

    cpu = {"all-hit trial": {"worker processes": 30.0, "cache server": 5.0, "lock store": 0.0}}
    line = Figures([Round(1.0, {"socket": 1.0}, cpu=cpu)]).cpu_line("all-hit trial")
    assert line.startswith("35.0 us = worker processes 30.0 + cache server 5.0 (nothing measurable:")
    assert "lock store" in line and "postgres" in line


def test_repeatability_counts_how_often_a_run_held_the_others_median(
        capsys: pytest.CaptureFixture[str]) -> None:
    from bench import repeatability

    trials = [{"origin_per_expiry": v, "origin_per_expiry_lo": v - 5, "origin_per_expiry_hi": v + 5}
              for v in (100.0, 104.0, 96.0, 130.0)]
    found = repeatability.held(trials, "origin_per_expiry")
    # 100 and 104 hold the others' median (104, 100); 96's [91, 101] misses 104, 130's misses 100
    assert (found.held, found.of) == (2, 4)
    assert found.cv == pytest.approx(statistics.stdev([100, 104, 96, 130]) / 107.5)
    assert repeatability.runs_from([], {}) == repeatability.DEFAULT_RUNS
    assert repeatability.runs_from([], {repeatability.ENV: "7"}) == 7
    assert repeatability.main(["one"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "python -m bench.repeatability: error: runs: 'one' is not a whole number"]
    with pytest.raises(repeatability.BadRuns, match="from 2 to 50"):
        repeatability.runs_from(["1"], {})
