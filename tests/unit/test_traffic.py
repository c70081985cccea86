"""Your own traffic, the pure parts: think time as Locust's wait_time (the draws' mean and
bounds), and a trace's replay schedule (recorded pace, speed, passes, workers interleaved)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from model.think import InvalidThink, ThinkTime
from model.trace import InvalidTrace, Trace, TraceArrivals, read_trace


def test_uniform_draws_between_the_bounds_with_their_mean() -> None:
    pause = ThinkTime.parse("uniform:1000:5000").pauses(seed=7)
    draws = [pause(0.0) for _ in range(20_000)]
    assert min(draws) >= 1.0 and max(draws) <= 5.0
    assert statistics.mean(draws) == pytest.approx(3.0, abs=0.03)


def test_exponential_constant_and_pacing() -> None:
    exp = ThinkTime.parse("exponential:50").pauses(seed=1)
    assert statistics.mean(exp(0.0) for _ in range(20_000)) == pytest.approx(0.05, rel=0.03)
    assert ThinkTime.parse("constant:10").pauses(1)(0.5) == 0.01
    pacing = ThinkTime.parse("pacing:100").pauses(1)
    assert pacing(0.03) == pytest.approx(0.07) and pacing(0.2) == 0.0  # a slow request: no pause


@pytest.mark.parametrize(("text", "says"), [
    ("uniform:5", "is not constant:MS"), ("between:1:2", "is not constant:MS"),
    ("uniform:50:10", "below the low one"), ("constant:-1", "outside"),
    ("pacing:x", "is not constant:MS"),
])
def test_bad_think_time(text: str, says: str) -> None:
    with pytest.raises(InvalidThink, match=says):
        ThinkTime.parse(text)


def test_a_trace_plays_its_recorded_pace_scaled_and_loops() -> None:
    trace = Trace((0, 1, 0), (0, 100_000, 400_000), speed=2.0)  # 0, 0.1 s, 0.4 s
    one = TraceArrivals(trace, 10**9, 10**9 + 500_000_000, worker=0, workers=1)
    # at twice the pace: 0, 50, 200 ms; the next pass 0.6 s (span + mean gap) later at pace 2
    assert [one.instant(k) for k in range(5)] == [10**9, 10**9 + 50_000_000, 10**9 + 200_000_000,
                                                  10**9 + 300_000_000, 10**9 + 350_000_000]
    assert one.instant(5) is None and [one.slot(k) for k in range(4)] == [0, 1, 2, 0]


def test_workers_interleave_the_trace() -> None:
    trace = Trace((0, 1, 2, 3), rate=10.0)  # no timestamps: 10 requests/s
    a = TraceArrivals(trace, 0, 10**10, worker=0, workers=2)
    b = TraceArrivals(trace, 0, 10**10, worker=1, workers=2)
    assert [a.slot(k) for k in range(3)] == [0, 2, 0] and [b.slot(k) for k in range(2)] == [1, 3]
    assert [a.instant(k) for k in range(2)] == [0, 200_000_000]


def test_reading_csv_and_parquet_traces(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("key,t\nb,10.5\na,10.0\nb,10.25\n")
    assert read_trace(tmp_path / "t.csv") == (["b", "a"], ["a", "b", "b"], [0, 250_000, 500_000])
    pq.write_table(pa.table({"key": [1, 2, 2]}), tmp_path / "t.parquet")
    assert read_trace(tmp_path / "t.parquet") == (["2", "1"], ["1", "2", "2"], None)
    (tmp_path / "bad.csv").write_text("name,t\nx,1\n")
    with pytest.raises(InvalidTrace, match="has no column 'key' \\(its columns: name, t\\)"):
        read_trace(tmp_path / "bad.csv")


@pytest.mark.parametrize(("args", "says"), [
    (["--keys-trace", "{dir}/nokey.csv", "--rate", "10"], "--keys-trace: {dir}/nokey.csv has no "
                                                           "column 'key'"),
    (["--keys-trace", "{dir}/plain.csv"], "has no t or timestamp column: give one --rate R"),
    (["--keys-trace", "{dir}/timed.csv", "--rate", "10"], "plays at their pace"),
    (["--keys-trace", "{dir}/timed.csv", "--keys", "many:2"], "the trace names the keys"),
    (["--keys-trace", "{dir}/timed.csv", "--mix", "shop"], "replays one endpoint"),
    (["--keys-trace", "{dir}/missing.csv", "--rate", "5"], "cannot read"),
    (["--trace-speed", "2"], "only with --keys-trace"),
    (["--think", "uniform:5"], "--think"),
    (["--think", "constant:5", "--think-ms", "5"], "give --think or --think-ms, not both"),
])
def test_bad_traffic_is_one_line(args: list[str], says: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import assert_bad_input, run_cli
    (tmp_path / "nokey.csv").write_text("name\nx\n")
    (tmp_path / "plain.csv").write_text("key\nx\ny\n")
    (tmp_path / "timed.csv").write_text("key,t\nx,1\ny,2\n")
    argv = [a.replace("{dir}", str(tmp_path)) for a in args]
    code, err = run_cli(["launch", "--out", str(tmp_path / "run"), *argv], capsys)
    assert_bad_input(code, err, says.replace("{dir}", str(tmp_path)))
    assert not (tmp_path / "run").exists()
