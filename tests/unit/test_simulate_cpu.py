"""The app process's CPU queue (simulate/cpu.py): a reply waits for its process's interpreter,
which makes a saturated generator's fill windows, and so its naive herds, longer; the hits
counted in bulk take the queue's steady wait; --from calibrates it from the workers' floor."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import simpy

from simulate import calibrate
from simulate.cpu import Interpreter, closed_wait_s
from simulate.metrics import Figures, figures
from simulate.world import WorldSpec, replicate

# 2 processes x 25 clients at a 28 us floor, each process's interpreter 200 us a reply: the
# processes saturate at 5,000 requests/s each, a client's cycle is 25 x 200 us = 5 ms, longer
# than a fill without the queue (28 us + a 1 ms origin call), shorter than one with it
SATURATED = WorldSpec("naive", app_servers=2, clients=25, ttl_s=0.3, rtt_us=28.0, think_ms=0.5,
                      origin_ms=1.0, expiries=3, cpu_us=200.0)


def run(spec: WorldSpec, seed: int) -> Figures:
    return figures(replicate(spec, seed), spec.expiries, spec.ttl_s / 2)


def mean(found: list[Figures], figure: str) -> float:
    return sum(float(getattr(f, figure)) for f in found) / len(found)


def test_turns_are_first_come_first_served_and_hold_the_interpreter() -> None:
    cpu = Interpreter(simpy.Environment(), 0.001)
    assert cpu.turn(0.0) == pytest.approx(0.001)
    assert cpu.turn(0.0005) == pytest.approx(0.002)  # queued behind the first
    assert cpu.turn(0.010) == pytest.approx(0.011)  # idle meanwhile: served at once
    assert cpu.turn(0.010, 3e-6) == pytest.approx(0.011003)  # a local hit's own hold


def test_the_steady_wait_is_none_when_idle_and_the_rest_of_the_cycle_when_saturated() -> None:
    assert closed_wait_s(1, 1e-4, 1e-3) == 0.0
    assert closed_wait_s(5, 1e-4, 1.0) < 1e-6  # far from saturation
    # 50 clients, 1 ms away each: saturated at 10,000/s, so a cycle is 50 x 100 us = 5 ms
    assert closed_wait_s(50, 1e-4, 1e-3) == pytest.approx(5e-3 - 1e-3 - 1e-4, rel=1e-3)


def test_a_saturated_generators_naive_herd_is_its_whole_population_and_smaller_without() -> None:
    """The mechanism-removed test: with the queue every client comes round while the filler
    waits for its interpreter (herd = 50); without it, at the same rate (the 5 ms cycle as
    think time), the fill window is a fifth of a client's cycle and so is the herd."""
    queued = [run(SATURATED, seed) for seed in range(3)]
    free = [run(replace(SATURATED, cpu_us=0.0, think_ms=5.0 - 0.028), seed) for seed in range(3)]
    assert mean(queued, "origin_per_expiry") > 46 and max(f.herd_max for f in queued) == 50
    assert mean(free, "origin_per_expiry") < 25
    assert mean(queued, "rps") == pytest.approx(2 / 200e-6, rel=0.05)  # the interpreters' rate
    assert mean(queued, "p50_ms") > 10 * mean(free, "p50_ms")  # a hit waits for its turn


def test_hits_in_bulk_agree_with_the_per_request_queue() -> None:
    """Bulk hits take the queue's steady wait and stop a few cycles before the expiry: the
    herds, the rate and the median are the per-request path's."""
    bulk = [run(SATURATED, seed) for seed in range(3)]
    one_by_one = [run(replace(SATURATED, bulk_hits=False), seed) for seed in range(3)]
    for figure, rel in (("origin_per_expiry", 0.1), ("rps", 0.03), ("p50_ms", 0.05)):
        assert mean(bulk, figure) == pytest.approx(mean(one_by_one, figure), rel=rel), figure
    assert all(f.events == SATURATED.expiries for f in bulk)


def test_from_a_run_takes_the_floor_as_the_round_trip_and_the_rest_as_the_queue(
        tmp_path: Path) -> None:
    """4 workers x 200 clients at 16,000 requests/s, a 10 ms median hit over a 30 us floor:
    the round trip is the floor, the hold a process's time per request (4 / 16,000 s), the
    think time the cycle (12.5 ms) less the hit."""
    part = tmp_path / "requests" / "trial=1"
    part.mkdir(parents=True)
    pq.write_table(pa.table({
        "outcome": ["hit"] * 3 + ["filled"], "latency_ns": [9e6, 10e6, 11e6, 20e6],
        "origin_called": [False] * 3 + [True], "origin_start_ns": [0] * 3 + [10**9],
        "origin_ns": [0] * 3 + [2_000_000]}), part / "part-0.parquet")
    pq.write_table(pa.table({"workers": [4, 4], "clients": [200, 200], "ttl_s": [0.5, 0.5],
                             "rps": [16_000.0, 16_000.0], "floor_ms": [0.03, 0.03]}),
                   tmp_path / "trials.parquet")
    world = calibrate.from_run(tmp_path, WorldSpec(""))
    assert (world.rtt_us, world.cpu_us) == (pytest.approx(30.0), pytest.approx(250.0))
    assert world.think_ms == pytest.approx(12.5 - 10.0)
    assert "the workers' floor" in calibrate.describe(tmp_path, world)
    # a hit at the floor leaves no queue: the round trip is the hit, as before
    pq.write_table(pa.table({"workers": [4], "clients": [200], "ttl_s": [0.5], "rps": [16_000.0],
                             "floor_ms": [12.0]}), tmp_path / "trials.parquet")
    assert (calibrate.from_run(tmp_path, WorldSpec("")).cpu_us,
            calibrate.from_run(tmp_path, WorldSpec("")).rtt_us) == (0.0, 10_000.0)


def test_a_random_order_interpreter_serves_every_reply_once_at_the_same_rate() -> None:
    spec = replace(SATURATED, cpu_order="random")
    found = [run(spec, seed) for seed in range(2)]
    assert mean(found, "rps") == pytest.approx(2 / 200e-6, rel=0.05)
    assert all(f.events == spec.expiries for f in found)
    with pytest.raises(ValueError, match="CPU order"):
        run(replace(spec, cpu_order="lifo"), 0)
