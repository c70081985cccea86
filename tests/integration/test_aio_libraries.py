"""What the asyncio libraries promise, measured through their adapters on a real Redis (issue 34).

One event loop, N coroutines released at the same instant at an expiry (their connections opened
first), the origin a loader that sleeps 100 ms; each claim has its pair, the mechanism off and
the opposite outcome asserted: cashews ``protected`` gives one load per process (off: every
caller loads); cashews ``soft`` has a herd at its soft expiry where ``early`` at the same point
refreshes once in the background and serves the old value; cashews' lock with
``check_interval=0`` costs >= 10x the cache commands per request of ``check_interval=0.01``;
aiocache ``cached_stampede`` gives one load in a process when its waiters find the holder's
event (plain ``cached``: every caller loads), and across two processes the one that did not take
the lock does not wait at all (printed).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import redis

from adapters.aio import registry
from adapters.aio.base import AsyncStrategy
from strategies.base import Outcome, Probe
from strategies.version import stamp
from tests.aio_helpers import (
    KEY,
    LOAD_S,
    Refreshes,
    SleepLoader,
    commands_per_request,
    counts,
    deps,
    flush_cache,
    herd,
    run_herd,
)
from tests.helpers import ROOT

N = 50
OLD = stamp(7, b"old")  # a primed value: version 7


@pytest.fixture
def url(redis_server: Callable[[str], str], cache: redis.Redis) -> str:
    """The session's cache server, flushed (the ``cache`` fixture)."""
    return redis_server("cache")


def versions(results: list[tuple[Outcome, Probe]]) -> set[int]:
    return {p.version_served for _, p in results}


# --- cashews protected: one task per key per process ---------------------------------------

def test_cashews_protected_makes_one_load_per_process(url: str) -> None:
    loader, results = run_herd("cashews", url, N)
    print(f"\ncashews protected: {loader.calls} load(s) for {N} callers, {counts(results)}")
    assert loader.calls == 1
    assert counts(results) == {"filled": 1, "waited": N - 1}  # the others awaited its task
    assert versions(results) == {1}
    assert all(p.lock_wait_ns > 0.8 * LOAD_S * 1e9 for o, p in results if o is Outcome.WAITED)


def test_without_protection_every_cashews_caller_loads(url: str) -> None:
    loader, results = run_herd("cashews:protected=false", url, N)
    print(f"\ncashews protected=false: {loader.calls} loads for {N} callers")
    assert loader.calls == N
    assert counts(results) == {"filled": N}


# --- cashews soft vs early at their own expiry point ----------------------------------------

def _past_its_point(spec: str, url: str, point_ms: int,
                    settle_s: float = 0.0) -> tuple[SleepLoader, Refreshes, list[tuple[Outcome, Probe]],
                                                   Probe]:
    """N callers at once on a primed old value whose library expiry point is ``point_ms``; then,
    ``settle_s`` later (a background refresh's time), one more request."""
    loader, refreshes, after = SleepLoader(), Refreshes(), Probe()

    async def scenario() -> list[tuple[Outcome, Probe]]:
        strategy: AsyncStrategy = registry.build(spec, deps(url, loader, N, refreshes))
        try:
            await strategy.prime(KEY, OLD, point_ms)
            results = await herd(strategy, N)
            await asyncio.sleep(settle_s)
            await strategy.fetch(KEY, after)
            return results
        finally:
            await strategy.aclose()

    return loader, refreshes, asyncio.run(scenario()), after


def test_cashews_soft_has_a_herd_at_its_soft_expiry(url: str) -> None:
    """Past the soft point every caller recomputes in the foreground: no lock, no stale."""
    point = int(time.time() * 1000) - 500
    loader, _, results, _ = _past_its_point("cashews-soft:protected=false", url, point)
    print(f"\ncashews soft, past its soft expiry: {loader.calls} loads for {N} callers")
    assert loader.calls == N
    assert counts(results) == {"filled": N}


def test_cashews_soft_before_its_soft_expiry_serves_hits(url: str) -> None:
    """The pair: the same herd on the same value before its soft point: no load at all."""
    point = int(time.time() * 1000) + 10_000
    loader, _, results, _ = _past_its_point("cashews-soft:protected=false", url, point)
    assert loader.calls == 0
    assert counts(results) == {"hit": N} and versions(results) == {7}


def test_cashews_early_refreshes_once_in_the_background_and_serves_the_old_value(
        url: str) -> None:
    """At the same point as the soft herd, early's ``SET key:lock NX`` gives one refresh (a row
    of its own, named by the replaced value's early point) while all get the old value."""
    point = int(time.time() * 1000) - 500
    loader, refreshes, results, after = _past_its_point("cashews-early:protected=false", url,
                                                        point, settle_s=0.2)
    print(f"\ncashews early, past its early point: {loader.calls} load(s) for {N} callers, "
          f"{counts(results)}")
    assert loader.calls == 1
    assert counts(results) == {"stale": N} and versions(results) == {7}
    assert all(p.stale_age_ns >= 0.5e9 and p.origin_calls == 0 for _, p in results)
    (refresh,) = refreshes.probes
    assert refresh.origin_calls == 1 and refresh.refresh_of_ns == point * 1_000_000
    assert after.version_served == 1  # the refreshed value, next


# --- cashews' lock: check_interval=0 is a busy loop ------------------------------------------

LOCK_LOAD_S = 0.3  # long enough that a request's own few commands do not hide the loop
TRIES = 5  # the busy loop's speed is the host's: the best of five pairs, as timeit takes


def _locked_commands(url: str, check_interval: float, clients: int) -> float:
    client = redis.Redis.from_url(url)
    try:
        client.config_resetstat()
        loader, results = run_herd(f"cashews-locked:check_interval={check_interval:g}", url,
                                   clients, load_s=LOCK_LOAD_S)
        assert loader.calls == 1 and counts(results) == {"filled": 1, "waited": clients - 1}
        per_request = commands_per_request(client, clients)
        client.flushdb()
        return per_request
    finally:
        client.close()


def _ratio(url: str, clients: int, tries: int = TRIES) -> tuple[float, float]:
    pairs = [(_locked_commands(url, 0, clients), _locked_commands(url, 0.01, clients))
             for _ in range(tries)]
    return max(pairs, key=lambda pair: pair[0] / pair[1])


def test_cashews_lock_with_check_interval_0_costs_10x_the_commands(url: str) -> None:
    """One waiter (as each app process has with ``protected``): with ``check_interval=0`` it
    loops SET NX, PING, sleep(0) for the whole fill, as fast as the loop and Redis answer; with
    0.01 it sleeps between attempts. With 10 coroutines in one loop the loop itself is the
    bound, shared by the waiters (printed, not claimed)."""
    busy, polite = _ratio(url, 2)
    many_busy, many_polite = _ratio(url, 10, tries=2)
    print(f"\ncashews lock, cache commands per request, fill {LOCK_LOAD_S * 1000:g} ms, best "
          f"pair: 1 waiter: check_interval=0 {busy:.1f}, 0.01 {polite:.1f} "
          f"({busy / polite:.1f}x); 9 waiters in one loop: {many_busy:.1f}, {many_polite:.1f} "
          f"({many_busy / many_polite:.1f}x)")
    assert busy >= 10 * polite


# --- aiocache: cached_stampede's lock, in one process and across two ------------------------

HERDS = 5


def test_aiocache_cached_stampede_makes_one_load_in_a_process_when_its_event_is_there(
        url: str) -> None:
    """The waiters wait on the holder's ``asyncio.Event``, made right after the holder's
    ``SET NX`` answer is read; a waiter whose refused ``SET NX`` is read first finds no event
    (``KeyError``, caught) and loads at once: so a herd gives one load, or more (printed: the
    loads of each of 5 herds; measured on a busy 2-core host: 1 in 24 of 30 herds, up to 50)."""
    herds = [run_herd("aiocache-stampede", url, N, flush=True) for _ in range(HERDS)]
    for loader, results in herds:
        assert counts(results).get("filled") == loader.calls  # every load is a filled row
        assert all(p.lock_wait_ns > 0.8 * LOAD_S * 1e9 for o, p in results if o is Outcome.WAITED)
    loads = [loader.calls for loader, _ in herds]
    print(f"\naiocache cached_stampede, loads in each of {HERDS} herds of {N}: {loads}")
    assert min(loads) == 1  # the lock, when the event is there in time


def test_aiocache_cached_without_the_lock_every_caller_loads(url: str) -> None:
    for _ in range(HERDS):
        loader, results = run_herd("aiocache", url, N, flush=True)
        assert loader.calls == N and counts(results) == {"filled": N}


CROSS_LOAD_S = 0.5  # far longer than two processes' skew at the instant, on a busy host


def across_processes(spec: str, url: str, clients: int, processes: int = 2) -> list[dict[str, Any]]:
    """``processes`` Python processes on the same Redis, each ``clients`` coroutines, released
    at the same wall-clock instant, sent once every process has connected (200 ms ahead); on a
    cache flushed first, so each run is a herd on a missing key."""
    flush_cache(url)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.aio_herd", spec, url, str(clients),
                               str(CROSS_LOAD_S)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              cwd=ROOT, env=env, text=True)
             for _ in range(processes)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        at_ns = time.time_ns() + 200_000_000
        for proc in procs:  # every process hears the instant before any is waited for
            assert proc.stdin is not None
            proc.stdin.write(f"{at_ns}\n")
            proc.stdin.flush()
        outs = [p.communicate(timeout=30)[0] for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert all(p.returncode == 0 for p in procs)
    return [orjson.loads(out) for out in outs]


def _summary(found: dict[str, Any]) -> str:
    outcomes, waits = found["outcomes"], found["lock_wait_ms"]
    named = {o: outcomes.count(o) for o in sorted(set(outcomes))}
    return f"{found['loads']} load(s) {named}, lock wait max {max(waits):g} ms"


def test_aiocache_cached_stampede_across_two_processes(url: str) -> None:
    """The process that did not take the lock finds no ``asyncio.Event`` of its own
    (``RedLock._EVENTS`` is per process): does it wait? Checked in every run; runs go on (up to
    5) until one in which the holder's own waiters found its event (see the in-process test)."""
    clients, holder = 20, None
    for _ in range(5):
        found = across_processes("aiocache-stampede", url, clients)
        print("\naiocache cached_stampede, 2 processes x 20 coroutines:\n  "
              + "\n  ".join(_summary(f) for f in found))
        holders = [f for f in found if "waited" in f["outcomes"]]
        assert len(holders) <= 1  # only the process that took the lock has waiters
        for other in (f for f in found if f not in holders):
            # It never waits: every one of its callers loads, at once (its lock attempt and
            # its next read, no wait for the holder's 500 ms fill).
            assert other["loads"] == clients and other["outcomes"] == ["filled"] * clients
            assert max(other["lock_wait_ms"]) < CROSS_LOAD_S * 1000 / 5
        if holders:
            (holder,) = holders
            break
    assert holder is not None, "in 5 runs the holder's own waiters never found its event"
    assert min(w for w, o in zip(holder["lock_wait_ms"], holder["outcomes"], strict=True)
               if o == "waited") > CROSS_LOAD_S * 1000 * 0.8


def test_cashews_protected_across_two_processes_makes_one_load_each(url: str) -> None:
    """The pair of the in-process claim: protection is per process, so the herd is the
    processes' number."""
    found = across_processes("cashews", url, 20)
    print("\ncashews protected, 2 processes x 20 coroutines:\n  "
          + "\n  ".join(_summary(f) for f in found))
    assert [f["loads"] for f in found] == [1, 1]
