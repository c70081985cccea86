"""Every preset, end to end in a shortened form, with its experiment's claim asserted; and the
observed events of a run with ``--expiry aligned`` and ``--repeat 3``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pytest

from results.figures import intervals
from results.figures.groups import stage_rows
from results.outputs import report_data
from results.store import rundir
from results.store.schema import LEGACY_WRITE_OP, REFRESH_OP, WRITE_OP
from tests.helpers import coordinator

# A TTL of 0.25 s allows a clock offset uncertainty of 12.5 ms; the embedded stack's workers
# share this host's clock, and on a loaded machine the measurement alone gave +-16.5 ms (issue 31)
SAME_HOST_CLOCK = ("--force-clock",)
SET_UP = {"hello", "client|setinfo", "select", "auth"}  # a client connection's handshake


def launch(out: Path, *args: str) -> list[dict[str, Any]]:
    proc = coordinator("launch", "--out", str(out), "--quiet", *args, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return rundir.read_trials(out).to_pylist()


def by_strategy(trials: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["strategy"]: t for t in trials}


def lock_store_commands(commands: list[dict[str, Any]], trial: dict[str, Any]) -> set[str]:
    """The commands the lock store counted during ``trial`` (commands.parquet's rows)."""
    return {c["command"] for c in commands if c["trial"] == trial["trial"]
            and c["server"] == "lock-store"}


def test_single_flight_naive_herd_is_far_above_lock_dc(tmp_path: Path) -> None:
    trials = by_strategy(launch(tmp_path / "sf", "--preset", "single-flight", "--workers", "2",
                                "--clients", "60", "--seconds", "6", "--scale", "100000"))
    naive, lock_dc = trials["naive"], trials["lock-dc"]
    assert naive["expiry_source"] == "server" and naive["expiry_events"] >= 1
    assert lock_dc["origin_per_expiry"] <= 1.5, lock_dc
    assert naive["origin_per_expiry"] >= 5 * lock_dc["origin_per_expiry"], (naive, lock_dc)


def test_experiment_000_gives_its_six_rows_with_intervals(tmp_path: Path) -> None:
    """000's whole table, shortened (TTL 0.25 s, 6 s: 19 periods; at 4 s, 11, naive's herds
    drifting 0.5-0.75 of a TTL each left 7 events under load, too few): every strategy's repeats,
    each headline figure with an interval that the trial's own events and rows give again (the
    check was ``lo <= value <= hi``, which the computation guarantees by clamping), naive's herds
    far above lock's."""
    out = tmp_path / "000"
    trials = launch(out, "--preset", "experiment-000", "--workers", "2", "--clients", "40",
                    "--ttl", "0.25", "--seconds", "6", "--repeat", "2", "--scale", "50000",
                    *SAME_HOST_CLOCK)
    names = ["naive", "lock", "xfetch", "xfetch:beta=10", "xfetch:beta=100", "swr"]  # beta=1: the default
    assert [t["strategy"] for t in trials] == names * 2
    events = rundir.read_expiries(out)
    not_client = [REFRESH_OP, WRITE_OP, LEGACY_WRITE_OP]  # the latencies are the clients' requests'
    requests = rundir.requests_dataset(out).to_table(
        columns=["trial", "latency_ns"], filter=pc.field("in_window") & ~pc.field("op").isin(not_client))
    assert events is not None
    for t in trials:  # each interval as the rows and events written give it (not clamped: computed)
        calls = events.filter(pc.and_(pc.equal(events["trial"], t["trial"]), events["in_window"]))
        sizes = np.asarray(calls["calls"].to_pylist(), np.float64)
        again = intervals.bootstrap(sizes)
        assert again.known and (t["origin_per_expiry_lo"], t["origin_per_expiry_hi"]) == pytest.approx(
            (again.lo, again.hi)), (t, sizes)
        assert intervals.bootstrap(sizes[:3]).too_few == "n=3: too few events"  # the pair: no interval
        latency = np.sort(requests.filter(pc.equal(requests["trial"], t["trial"]))["latency_ns"].to_numpy())
        ranks = intervals.order_ranks(latency.size, 0.99)
        assert ranks is not None and (t["p99_ms_lo"], t["p99_ms_hi"]) == pytest.approx(
            (latency[ranks[0]] / 1e6, latency[ranks[1]] / 1e6)), t
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


def test_bypass_ramp_light_endpoint_p99_is_the_wait_for_a_connection(tmp_path: Path) -> None:
    """003's finding: bypassed, the light endpoint's p99 is the wait for a pool connection that
    heavy rankings hold, not its own query. The bound is the run's own floor for a bypassed light
    request, its query's median in PostgreSQL, measured in the same stage: ten of them at p99.
    (It was ten times the cached stage's p99, a ratio of two latencies of one day's machine:
    56-143x measured, then 6x on a fresh clone, 63.5 ms against 10 x 10.5 ms: issue 31.)

    A pool of 4, not 003's 20: at 12 rankings/s of ~0.1 s, 20 connections were held only when
    PostgreSQL's 2 cores saturated, and on CI's machine they did not (pool wait p99 1.8 ms, the
    light query's own p99 13.2 ms). Four are held by rankings whenever a few overlap, the
    mechanism 003 found without depending on the machine's speed (here: pool wait p99 1,588 ms,
    query p99 8.0 ms, one run)."""
    out = tmp_path / "ramp"
    # 2M products: rankings heavy enough to hold the pool once bypassed, light enough while
    # cached (3M: each ranking refill took seconds on a 2-core machine). Jitter spreads the 24
    # rankings' first expiries, which would otherwise refill together inside the cached stage.
    launch(out, "--preset", "bypass-ramp", "--keys", "many:100", "--bypass", "0,100",
           "--stage-seconds", "5", "--ttl", "10", "--strategies", "naive:jitter=0.5",
           "--scale", "2000000", "--pool-size", "4")
    rows = rundir.requests_dataset(out).to_table()
    stages = {(r["stage"], r["endpoint"]): r for r in stage_rows(rows)}
    cached, bypassed = stages[(0, "product")], stages[(1, "product")]
    assert cached["hit_pct"] > 50 and bypassed["hit_pct"] == 0, (cached, bypassed)
    light = rows.filter((pc.field("stage") == 1) & (pc.field("op") == "product")
                        & (pc.field("origin_called") > 0))
    query_p50_ms = float(np.median(light["origin_ns"].to_numpy())) / 1e6
    assert bypassed["p99_ms"] >= 10 * query_p50_ms, (query_p50_ms, bypassed)
    print(f"bypassed light: p99 {bypassed['p99_ms']:.1f} ms, pool wait p99 "
          f"{bypassed['pool_wait_p99_ms']:.1f} ms, query p99 {bypassed['query_p99_ms']:.1f} ms, "
          f"query p50 {query_p50_ms:.2f} ms")
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
    Redis and memcached, PostgreSQL's count matching the rows in every trial.

    Two TTL periods a trial (7 s): with one (5 s), meta-memcache's first expiry, primed to the
    nearest whole second and dropped at memcached's next clock tick, fell past the window now and
    then (0 events, issue 31); the prime now takes the second below (adapters/meta_memcache_lease),
    and dogpile's mean herd rests on two or three refresh cycles, not one."""
    out = tmp_path / "libraries"
    trials = by_strategy(launch(out, "--preset", "libraries", "--workers", "2", "--clients", "40",
                                "--seconds", "7", "--scale", "50000"))
    assert all(t["db_calls_match"] for t in trials.values()), trials
    for name in ("lock-dc", "redis-py-lock", "python-redis-lock", "lease", "meta-memcache"):
        assert trials[name]["expiry_events"] >= 1 and trials[name]["origin_per_expiry"] <= 1.5, \
            trials[name]
    dogpile, distributed = trials["dogpile"], trials["dogpile:distributed_lock=true"]
    assert dogpile["event_kind"] == "refresh cycle" and dogpile["stale_served"] > 0, dogpile
    assert dogpile["origin_per_expiry"] >= 2, dogpile  # a threading.Lock per worker process
    # its lock is on the cache: the lock store sees no command but the handshakes of the clients'
    # connections (every client connects to it), which a client that connected after the count's
    # first read adds on a loaded machine (55 once: documented, docs/results.md `cache_commands`)
    commands = rundir.read_commands(out).to_pylist()
    assert lock_store_commands(commands, distributed) <= SET_UP < lock_store_commands(
        commands, trials["redis-py-lock"]) | SET_UP, commands
    assert distributed["cache_commands"] > 0
    memcached = trials["meta-memcache"]
    assert memcached["cache_server"] == "memcached" and memcached["expiry_source"] == "server"
    assert memcached["event_kind"] == "expiry" and memcached["waits"] > 0, memcached  # the lease
    # recache: one reader refreshes before the expiry (its call names the refresh cycle), and
    # without it none does. Not asserted: the trial's ``event_kind``. memcached keeps whole
    # seconds on a clock that ticks once a second, so a value set with TTL 2 lives 1-2 s, and a
    # refresh that came late in that span is one event with its generation's reported expiry
    # (results.figures.events.attribute): a fresh clone's make test saw its 4-s window hold one
    # such event, "expiry", with every refresh there.
    recache = trials["meta-memcache:recache_ttl=2"]
    assert recache["waits"] < memcached["waits"], recache
    refreshes = rundir.requests_dataset(out).to_table(
        columns=["strategy"], filter=pc.field("refresh_of_ns") > 0)["strategy"].to_pylist()
    assert refreshes.count("meta-memcache:recache_ttl=2") > 0
    assert refreshes.count("meta-memcache") == 0, "a refresh without recache"
    assert lock_store_commands(commands, trials["lease"]) <= SET_UP  # lease's lock is in the cache
    assert {c["kind"] for c in commands} == {"redis", "memcached"}
