"""Benchmark 1's per-stage breakdown: where a request's CPU goes between the loop and its row.

``bench.stages`` times each stage alone on one thread. The all-hit trial's worker processes
spend more a request than the sum of their stages (25 threads a process share one GIL and two
cores: hand-offs, waits, the scheduler) and more than the lean loop's, which does the round trip
alone: both differences are printed beside the stages, from the same run's rounds, and the
coordinator's per-row cost beside what its process spent in the trial.
"""

from __future__ import annotations

import statistics

from bench import stages
from bench.ratios import Figures
from model.services import Services

COORDINATOR_STAGE = "coordinator (decode, align, Parquet)"


def _median_us(figures: Figures, measurement: str, group: str) -> float:
    return statistics.median(r.cpu[measurement].get(group, 0.0) for r in figures.rounds
                             if measurement in r.cpu)


def run(services: Services, figures: Figures, requests: int, workers: int) -> dict[str, float]:
    """Measure and print the stages; return them (ns per request)."""
    found = stages.measure(services.cache_url, services.broker_url, n=requests)
    per_s = found.pop("sampler_per_s")
    hit_rps = statistics.median(r.all_hit for r in figures.rounds)
    found["self-check sampler (every 25 ms)"] = per_s / (hit_rps / workers)
    coordinator_ns = found.pop(COORDINATOR_STAGE)
    worker_us = sum(found.values()) / 1000
    trial_us = _median_us(figures, "all-hit trial", "worker processes")
    lean_us = _median_us(figures, "lean", "worker processes")
    print("[1] one client thread alone, CPU ns per request, each stage timed by itself "
          "(bench.stages, median of 5): " + "; ".join(f"{k} {v:,.0f}" for k, v in found.items()))
    print(f"    their sum {worker_us:.1f} us; the all-hit trial's worker processes spent "
          f"{trial_us:.1f} us a request ({trial_us - worker_us:+.1f} us beyond the sum: threads "
          f"sharing a GIL and the cores), the lean loop's {lean_us:.1f} us "
          f"({trial_us - lean_us:+.1f} us between the loop and a row)")
    print(f"    {COORDINATOR_STAGE}: {coordinator_ns:,.0f} ns a row alone; the trial's coordinator "
          f"process spent {_median_us(figures, 'all-hit trial', 'coordinator'):.1f} us a request")
    return {**found, COORDINATOR_STAGE: coordinator_ns}
