"""The discrete-event model (simulate/): it runs the registered strategies' own cores, a defence
holds in it and stops holding when its mechanism is taken out, a seed gives one run, and
``coordinator simulate`` says what is wrong with bad input in one line, exit 2."""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import strategies
from bench import simulate as simulate_bench
from coordinator.cli import main
from simulate import calibrate
from simulate.driver import Origin, SimClock, SimDriver
from simulate.metrics import Figures, figures, herds
from simulate.world import WorldSpec, build, replicate
from strategies.core.cacheaside import LockCore
from strategies.core.flight import Flight
from strategies.lock import LockDoubleChecked
from tests.bench_figures import assert_figures

# 200 clients, as experiment 000; a short TTL keeps each replication well under a second
HERD = WorldSpec("", app_servers=8, clients=25, ttl_s=0.3, think_ms=5.0, expiries=2)
SEEDS = range(3)


@pytest.fixture(autouse=True)
def _runs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``coordinator simulate`` writes runs/<run_id>: here under tmp_path, not the checkout."""
    monkeypatch.chdir(tmp_path)


def runs(strategy: str, world: WorldSpec = HERD) -> list[Figures]:
    spec = replace(world, strategy=strategy)
    return [figures(replicate(spec, seed), spec.expiries, spec.ttl_s / 2) for seed in SEEDS]


def mean_herd(found: list[Figures]) -> float:
    return sum(f.origin_per_expiry for f in found) / len(found)


def test_lock_dc_fills_once_and_a_herd_comes_back_without_its_lock(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The mechanism-removed test: lock-dc gives ~1 origin call per expiry at 200 clients;
    naive, and lock-dc whose lock is granted to everyone (the registered class, its lock made
    void), give a herd far above 1."""
    locked = runs("lock-dc")
    assert all(f.events == HERD.expiries for f in locked)
    assert mean_herd(locked) <= 1.1 and max(f.herd_max for f in locked) <= 2
    assert sum(f.waits for f in locked) > 0  # the others waited for the filler
    assert mean_herd(runs("naive")) > 20

    def granted(self: Flight, key: str) -> Generator[Any, Any, bytes | None]:
        yield from ()
        return b"everyone"

    monkeypatch.setattr(Flight, "acquire", granted)
    unlocked = runs("lock-dc")
    assert mean_herd(unlocked) > 20, unlocked


def test_the_model_runs_the_registered_strategy_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every generator the simulated driver runs is strategies.core's, of the class
    ``strategies.parse`` builds: no copy of the logic lives in simulate/."""
    import simpy

    from simulate.store import SimStore

    env = simpy.Environment()
    clock = SimClock(env)
    store = SimStore(env, clock.wall_ms)
    built = build("lock-dc", 300, clock, store, store, 3.0)
    assert type(built) is LockDoubleChecked and type(built) is type(
        strategies.parse("lock-dc").build(built._deps))
    assert isinstance(built.core, LockCore) and built.core.flight.double_check

    ran: list[tuple[str, str]] = []
    original = SimDriver.run

    def spying(self: SimDriver, steps: Generator[Any, Any, Any], probe: Any) -> Any:
        ran.append((steps.gi_code.co_filename, steps.gi_code.co_qualname))
        return original(self, steps, probe)

    monkeypatch.setattr(SimDriver, "run", spying)
    replicate(replace(HERD, strategy="lock-dc", app_servers=2, clients=5, expiries=1), 0)
    assert ("LockCore.miss" in {name for _, name in ran}), ran[:5]
    assert all(Path(path).parent == Path(strategies.__file__).parent / "core" for path, _ in ran)


def test_a_seed_gives_one_run_and_another_seed_another() -> None:
    spec = replace(HERD, strategy="xfetch", app_servers=2, clients=10)
    first, again, other = (figures(replicate(spec, seed), spec.expiries, spec.ttl_s / 2)
                           for seed in (7, 7, 8))
    assert first == again and first.herds == again.herds
    assert first != other


@pytest.mark.parametrize("strategy", ["swr", "lease", "xfetch-lock", "lock-dc:wake=notify"])
def test_the_other_ported_defences_run_and_hold(strategy: str) -> None:
    spec = replace(HERD, strategy=strategy, app_servers=4, clients=10)
    found = figures(replicate(spec, 1), spec.expiries, spec.ttl_s / 2)
    assert found.events == spec.expiries and found.errors == 0
    assert found.origin_per_expiry <= 1.5, found


@pytest.mark.parametrize("strategy", ["local-lock", "local-lock:wake=notify"])
def test_local_lock_runs_on_simpy_events_and_fills_once(strategy: str) -> None:
    spec = replace(HERD, strategy=strategy, app_servers=4, clients=10)
    found = figures(replicate(spec, 1), spec.expiries, spec.ttl_s / 2)
    assert found.events == spec.expiries and found.errors == 0
    assert found.origin_per_expiry <= 1.5 and found.waits > 0, found


def test_local_lock_alone_bounds_the_herd_by_the_processes() -> None:
    """``distributed=false``: one fill per app process at most, never one per client."""
    spec = replace(HERD, strategy="local-lock:distributed=false", app_servers=4, clients=10)
    found = figures(replicate(spec, 1), spec.expiries, spec.ttl_s / 2)
    assert found.events == spec.expiries and found.errors == 0
    assert 1 <= found.herd_max <= spec.app_servers and found.waits > 0, found


def test_herds_are_split_by_a_quiet_gap() -> None:
    calls = [(1.0, 1.1, False), (1.05, 1.2, False), (3.0, 3.1, True)]
    found = herds(calls, 0.5)
    assert [len(h.calls) for h in found] == [2, 1]
    assert [h.refresh for h in found] == [False, True]


def test_the_simulated_table_says_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--strategies", "naive,lock-dc", "--app-servers", "2", "--clients", "5",
              "--ttl", "0.2", "--think-ms", "5", "--expiries", "2", "--replications", "2"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    head, columns, _, naive, lock_dc, *_ = out.splitlines()
    assert head.startswith("simulated: 2 app servers x 5 clients")
    assert columns.split()[:2] == ["strategy", "origin/expiry"]
    assert "herd p50 [95 %]" in columns and "herd p90 [95 %]" in columns  # as measured tables
    assert naive.startswith("naive") and naive.endswith("simulated")
    assert lock_dc.startswith("lock-dc") and "too few replications" in lock_dc


@pytest.mark.parametrize(("args", "says"), [
    (["--app-servers", "0"], "'--app-servers'"),
    (["--strategies", "dogpile"], "not modelled"),  # a library adapter: no core
    (["--strategies", "nonesuch"], "'--strategies'"),
    (["--ttl", "-1"], "'--ttl'"),
    (["--from", "/nonexistent-run"], "'--from'"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1 and says in err, err


def test_from_a_run_takes_its_round_trip_and_origin_time(tmp_path: Path) -> None:
    part = tmp_path / "requests" / "trial=1"
    part.mkdir(parents=True)
    pq.write_table(pa.table({
        "outcome": ["hit", "hit", "hit", "filled"], "latency_ns": [300_000, 400_000, 500_000, 9e6],
        "origin_called": [False, False, False, True], "origin_start_ns": [0, 0, 0, 10**9],
        "origin_ns": [0, 0, 0, 5_000_000]}),
        part / "part-0.parquet")
    world = calibrate.from_run(tmp_path, HERD)
    assert (world.rtt_us, world.origin_ms) == (400.0, 5.0)
    with pytest.raises(calibrate.Unreadable):
        calibrate.from_run(tmp_path / "elsewhere", HERD)


def test_local_hits_are_not_the_cache_round_trip(tmp_path: Path) -> None:
    """Two-level's local hits never reach the cache: however many, the round trip is the
    median of the hits the cache answered (with them it was 1 us in a measured run)."""
    part = tmp_path / "requests" / "trial=1"
    part.mkdir(parents=True)
    pq.write_table(pa.table({
        "outcome": ["hit"] * 8 + ["filled"], "latency_ns": [400_000] * 3 + [1_000] * 5 + [9e6],
        "origin_called": [False] * 8 + [True], "origin_start_ns": [0] * 8 + [10**9],
        "origin_ns": [0] * 8 + [5_000_000], "local_hit": [0] * 3 + [1] * 5 + [0]}),
        part / "part-0.parquet")
    assert calibrate.from_run(tmp_path, HERD).rtt_us == 400.0
    # nor is its trial's rate a client's cycle on the cache (300k/s of local hits)
    pq.write_table(pa.table({"workers": [2, 2], "clients": [20, 20], "rps": [10_000.0, 300_000.0],
                             "ttl_s": [0.5, 0.5], "local_hits": [0, 1_000_000]}),
                   tmp_path / "trials.parquet")
    assert calibrate.from_run(tmp_path, HERD).think_ms == pytest.approx(2.0 - 0.4)


def test_benchmark_10_at_tiny_size_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    found = simulate_bench.run(simulate_bench.TINY)
    out = capsys.readouterr().out
    assert len(found) == 2 and all(line.startswith("[10] simulate") for line in found)
    assert_figures(out, at_least=20)


def test_open_loop_sends_at_its_rate_and_the_defence_still_holds() -> None:
    spec = replace(HERD, app_servers=4, clients=50, rate=20_000.0)
    naive, locked = (figures(replicate(replace(spec, strategy=s), 2), 2, spec.ttl_s / 2)
                     for s in ("naive", "lock-dc"))
    assert 18_000 < naive.rps < 22_000 and 18_000 < locked.rps < 22_000
    assert locked.origin_per_expiry == 1.0 and naive.origin_per_expiry > 20


def test_a_lock_wait_that_times_out_is_an_error_row_never_a_success() -> None:
    """The origin outlasts the waiters' max_wait_ms: they fail with the strategy's own error."""
    spec = replace(HERD, strategy="lock-dc:max_wait_ms=20", origin_ms=100.0, app_servers=2,
                   clients=10, expiries=1)
    rec = replicate(spec, 3)
    found = figures(rec, 1, spec.ttl_s / 2)
    assert set(rec.errors) == {"LockWaitTimeout"} and found.errors == rec.errors["LockWaitTimeout"]
    assert found.origin_per_expiry == 1.0


def test_simulate_from_a_run_prints_the_calibration(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    part = tmp_path / "requests" / "trial=1"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"outcome": ["hit", "filled"], "latency_ns": [250_000, 4e6],
                             "origin_called": [False, True], "origin_start_ns": [0, 10**9],
                             "origin_ns": [0, 2_000_000]}),
                   part / "part-0.parquet")
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--from", str(tmp_path), "--strategies", "lock-dc", "--app-servers", "2",
              "--clients", "5", "--ttl", "0.2", "--expiries", "1", "--replications", "1"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "cache round trip 250.0 us (median hit), origin 2.00 ms" in out
    assert "origin 2 ms (pool 4 per app), RTT 250 us" in out


def test_from_a_run_takes_its_topology_and_rate_but_the_command_line_wins(tmp_path: Path) -> None:
    """8 workers x 200 clients at 10,000 requests/s: each client spends 20 ms a request, of
    which the 400 us round trip is the model's; the rest becomes think time."""
    test_from_a_run_takes_its_round_trip_and_origin_time(tmp_path)
    pq.write_table(pa.table({"workers": [8, 8], "clients": [200, 200], "ttl_s": [2.0, 2.0],
                             "rps": [10_000.0, 10_000.0]}), tmp_path / "trials.parquet")
    world = calibrate.from_run(tmp_path, HERD)
    assert (world.app_servers, world.clients, world.ttl_s) == (8, 25, 2.0)
    assert world.think_ms == pytest.approx(20.0 - 0.4)
    kept = calibrate.from_run(tmp_path, HERD, given={"clients", "rtt_us"})
    assert (kept.clients, kept.rtt_us, kept.app_servers) == (HERD.clients, HERD.rtt_us, 8)


@pytest.mark.parametrize("strategy", ["naive", "lock-dc"])
def test_hits_counted_in_bulk_give_what_the_event_driven_model_gives(strategy: str) -> None:
    """simulate.bulk leaves the figures where one-by-one simulation puts them (the draws differ,
    so the herds agree in distribution, not to the call)."""
    bulk, one_by_one = runs(strategy), runs(strategy, replace(HERD, bulk_hits=False))
    assert mean_herd(bulk) == pytest.approx(mean_herd(one_by_one), rel=0.15)
    for figure in ("rps", "p50_ms", "p99_ms"):
        mean = [sum(getattr(f, figure) for f in found) / len(found) for found in (bulk, one_by_one)]
        assert mean[0] == pytest.approx(mean[1], rel=0.02), figure


def test_only_hits_that_decide_nothing_are_counted_in_bulk() -> None:
    import simpy

    from simulate import bulk
    from simulate.store import SimStore

    env = simpy.Environment()
    clock = SimClock(env)
    store = SimStore(env, clock.wall_ms)
    for label, plain in (("naive", True), ("lock", True), ("lock-dc", True), ("xfetch", True),
                         ("xfetch-lock", True), ("swr", False), ("lease", False),
                         ("naive:jitter=0.1", False), ("xfetch:jitter=0.1", False)):
        assert bulk.eligible(build(label, 300, clock, store, store, 3.0), label) is plain, label


def test_the_origin_curve_is_the_median_time_at_each_concurrency_measured() -> None:
    """20 lone calls of 2 ms, then 20 pairs of calls of 6 ms that start together: two levels."""
    lone = [(i * 10**8, 2_000_000) for i in range(20)]
    pairs = [(5 * 10**9 + i * 10**8, 6_000_000) for i in range(20) for _ in range(2)]
    starts, durations = (np.array(v) for v in zip(*lone, *pairs, strict=True))
    curve = calibrate.origin_curve(starts, durations)
    assert curve == ((1, 2.0), (2, 6.0))
    import simpy

    origin = Origin(simpy.Environment(), 1, 4, 0.00343, 0.0, random.Random(0), curve)
    assert [origin.median_s(k) for k in (1, 2, 5)] == [0.002, 0.006, 0.006]
    assert origin.median_s(1) * 1000 == pytest.approx(2.0)


def test_a_run_without_origin_start_times_gives_no_curve(tmp_path: Path) -> None:
    part = tmp_path / "requests" / "trial=1"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"outcome": ["hit", "filled"], "latency_ns": [300_000, 1],
                             "origin_called": pa.array([0, 1], pa.int8()),
                             "origin_ns": [0, 2_000_000]}), part / "part-0.parquet")
    world = calibrate.from_run(tmp_path, HERD)
    assert (world.rtt_us, world.origin_ms, world.origin_curve) == (300.0, 2.0, ())
