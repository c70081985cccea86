"""Every preset, end to end in a shortened form, with its experiment's claim asserted; and the
observed events of a run with ``--expiry aligned`` and ``--repeat 3``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from results.figures.groups import stage_rows
from results.outputs import report_data
from results.store import rundir
from tests.helpers import coordinator


def launch(out: Path, *args: str) -> list[dict[str, Any]]:
    proc = coordinator("launch", "--out", str(out), "--quiet", *args, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return rundir.read_trials(out).to_pylist()


def by_strategy(trials: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["strategy"]: t for t in trials}


def test_single_flight_naive_herd_is_far_above_lock_dc(tmp_path: Path) -> None:
    trials = by_strategy(launch(tmp_path / "sf", "--preset", "single-flight", "--workers", "2",
                                "--clients", "60", "--seconds", "6", "--scale", "100000"))
    naive, lock_dc = trials["naive"], trials["lock-dc"]
    assert naive["expiry_source"] == "server" and naive["expiry_events"] >= 1
    assert lock_dc["origin_per_expiry"] <= 1.5, lock_dc
    assert naive["origin_per_expiry"] >= 5 * lock_dc["origin_per_expiry"], (naive, lock_dc)


def test_experiment_000_gives_its_six_rows_with_intervals(tmp_path: Path) -> None:
    """000's whole table, shortened (TTL 0.25 s: ten expiries in 4 s): every strategy's repeats,
    each headline figure with an interval, naive's herds far above lock's."""
    out = tmp_path / "000"
    trials = launch(out, "--preset", "experiment-000", "--workers", "2", "--clients", "40",
                    "--ttl", "0.25", "--seconds", "4", "--repeat", "2", "--scale", "50000")
    names = ["naive", "lock", "xfetch", "xfetch:beta=10", "xfetch:beta=100", "swr"]  # beta=1: the default
    assert [t["strategy"] for t in trials] == names * 2
    for t in trials:
        assert t["origin_per_expiry_lo"] <= t["origin_per_expiry"] <= t["origin_per_expiry_hi"], t
        assert t["p99_ms_lo"] <= t["p99_ms"] <= t["p99_ms_hi"], t
    naive = [t for t in trials if t["strategy"] == "naive"]
    lock = [t for t in trials if t["strategy"] == "lock"]
    assert min(t["origin_per_expiry_lo"] for t in naive) > max(t["origin_per_expiry_hi"] for t in lock)
    shown = coordinator("report", str(out))
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line for line in shown.stdout.splitlines() if line.split()[:1] in (
        [n] for n in names)}
    assert set(rows) == set(names) and all("[" in line for line in rows.values()), shown.stdout
    assert "verdicts, each strategy (B) against naive (A)" in shown.stdout


def test_jitter_about_halves_the_peak_origin_rate(tmp_path: Path) -> None:
    # 100 keys primed to expire together; jitter=0.2 of the preset's 10 s TTL spreads them over
    # 4 s (with a 5 s TTL, 2 s, the peak second fell only to 0.72x: too close to call).
    trials = by_strategy(launch(tmp_path / "jitter", "--preset", "jitter", "--scale", "50000"))
    together, spread = trials["naive"], trials["naive:jitter=0.2"]
    assert together["peak_origin_per_s"] >= 80, together  # all 100 keys in one second
    assert spread["peak_origin_per_s"] <= 0.7 * together["peak_origin_per_s"], (together, spread)


def test_bypass_ramp_light_endpoint_p99_grows_tenfold(tmp_path: Path) -> None:
    out = tmp_path / "ramp"
    # 2M products: rankings heavy enough to hold the pool once bypassed (1M: the light p99 grew
    # 9.5-43x over runs, too close to call), light enough while cached (3M: each ranking refill
    # took seconds on a 2-core machine). Jitter spreads the 24 rankings' first expiries, which
    # would otherwise refill together inside the cached stage. Measured: 56-143x.
    launch(out, "--preset", "bypass-ramp", "--keys", "many:100", "--bypass", "0,100",
           "--stage-seconds", "5", "--ttl", "10", "--strategies", "naive:jitter=0.5",
           "--scale", "2000000")
    stages = {(r["stage"], r["endpoint"]): r for r in stage_rows(rundir.requests_dataset(out).to_table())}
    cached, bypassed = stages[(0, "product")], stages[(1, "product")]
    assert cached["hit_pct"] > 50, cached
    assert bypassed["p99_ms"] >= 10 * cached["p99_ms"], (cached, bypassed)
    assert bypassed["pool_wait_p99_ms"] > bypassed["query_p99_ms"], bypassed  # waits for a connection


def test_two_level_answers_mostly_from_the_local_cache(tmp_path: Path) -> None:
    trials = by_strategy(launch(tmp_path / "two", "--preset", "two-level", "--seconds", "6",
                                "--value-bytes", "200000", "--strategies", "lock-dc,two-level"))
    local = trials["two-level"]
    assert local["local_hits"] > 0.5 * local["requests"], local
    assert trials["lock-dc"]["local_hits"] == 0
    assert local["origin_per_expiry"] >= 1.0, local


@pytest.fixture(scope="module")
def aligned_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """naive and lock-dc, 3 repeats, every expiry on the trial's clock; a 20 ms origin makes a
    drifting herd obvious (40 clients over 8 pool connections: ~100 ms per herd)."""
    out = tmp_path_factory.mktemp("aligned") / "run"
    launch(out, "--workers", "2", "--clients", "40", "--ttl", "1", "--seconds", "4.5",
           "--strategies", "naive,lock-dc", "--repeat", "3", "--expiry", "aligned",
           "--origin-ms", "20", "--scale", "200000")
    return out


def test_aligned_expiries_happen_at_their_boundaries(aligned_run: Path) -> None:
    events = rundir.read_expiries(aligned_run)
    assert events is not None
    expired = events.filter(pc.and_(pc.equal(events["source"], "expired"), events["in_window"]))
    assert expired.num_rows >= 6 * 2, expired.to_pylist()  # 6 trials x 2 periods
    for event in expired.to_pylist():
        assert event["scheduled_ns"] is not None, event
        assert abs(event["event_ns"] - event["scheduled_ns"]) < 30_000_000, event


def test_repeats_show_each_figure_and_all_their_events(aligned_run: Path) -> None:
    """Each repeat's origin calls per event, then the figure over every repeat's events."""
    trials = rundir.read_trials(aligned_run).to_pylist()
    naive = [t for t in trials if t["strategy"] == "naive"]
    assert [t["repeat"] for t in naive] == [1, 2, 3]
    proc = coordinator("report", str(aligned_run))
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("naive "))
    figures = [f"{t['origin_per_expiry']:.1f}" for t in naive]
    pooled = sum(t["origin_calls"] for t in naive) / sum(t["expiry_events"] for t in naive)
    assert line.split()[1:5] == [*figures, f"{pooled:.1f}"], line
    assert "expiry events and their herds" in proc.stdout


def test_report_draws_the_observed_expiries(aligned_run: Path) -> None:
    data = report_data.load(aligned_run)
    events = rundir.read_expiries(aligned_run)
    assert events is not None
    starts = {t["trial"]: t["start_ns"] for t in data.meta["trials"]}
    seconds = float(data.meta["spec"]["seconds"])
    for timeline in data.timelines:
        mine = events.filter(pc.equal(events["trial"], timeline.trial)).to_pylist()
        drawn = [(e["event_ns"] - starts[timeline.trial]) / 1e9 for e in mine]
        assert timeline.expiries_s == pytest.approx([d for d in drawn if 0 <= d < seconds])
        assert timeline.expiries_s, timeline  # every trial had expiries to draw


def test_stale_sets_lease_refuses_what_naive_and_lock_dc_write(tmp_path: Path) -> None:
    # ~56 writes per trial on a 15 ms origin: naive's herd and lock-dc's single fill are each
    # caught by a write now and then (measured at full length: 432 and 46 stale sets per ~200
    # writes), lease's cancelled lease refuses every such set.
    trials = by_strategy(launch(tmp_path / "stale", "--preset", "stale-sets", "--seconds", "8",
                                "--ttl", "2", "--strategies", "naive,lock-dc,lease",
                                "--scale", "100000"))
    for trial in trials.values():
        assert trial["db_calls_match"] and trial["writes"] >= 20, trial
        assert trial["stale_after_write"] > 0, trial  # a read between a commit and its delete, at least
    lease = trials["lease"]
    assert lease["stale_sets"] == 0 and lease["end_stale_sets"] == 0, lease
    assert trials["naive"]["stale_sets"] + trials["lock-dc"]["stale_sets"] > 0, trials


def test_libraries_each_defence_as_installed_with_its_own_cost(tmp_path: Path) -> None:
    """Issue 24's preset, shortened: every library next to our own on the embedded stack with
    Redis and memcached, PostgreSQL's count matching the rows in every trial."""
    out = tmp_path / "libraries"
    trials = by_strategy(launch(out, "--preset", "libraries", "--workers", "2", "--clients", "40",
                                "--seconds", "5", "--scale", "50000"))
    assert all(t["db_calls_match"] for t in trials.values()), trials
    for name in ("lock-dc", "redis-py-lock", "python-redis-lock", "lease", "meta-memcache"):
        assert trials[name]["expiry_events"] >= 1 and trials[name]["origin_per_expiry"] <= 1.5, \
            trials[name]
    dogpile, distributed = trials["dogpile"], trials["dogpile:distributed_lock=true"]
    assert dogpile["event_kind"] == "refresh cycle" and dogpile["stale_served"] > 0, dogpile
    assert dogpile["origin_per_expiry"] >= 2, dogpile  # a threading.Lock per worker process
    assert distributed["lock_commands"] == 0 < distributed["cache_commands"]  # its lock: the cache
    memcached = trials["meta-memcache"]
    assert memcached["cache_server"] == "memcached" and memcached["expiry_source"] == "server"
    assert trials["redis-py-lock"]["lock_commands"] > 0 and trials["lease"]["lock_commands"] == 0
    commands = rundir.read_commands(out).to_pylist()
    assert {c["kind"] for c in commands} == {"redis", "memcached"}
