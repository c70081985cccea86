"""Benchmark 8's own code at a tiny size (1 s, two workers x two clients, one round): it runs
end to end (the HTTP trial through the TrialRunner into Parquet, on client threads and on
asyncio clients; the floor loop on the workers; Locust and wrk when installed) and every figure
it prints is a finite positive rate."""

from __future__ import annotations

import math
import re

import pytest

from bench import http
from bench.locust_bench import locust_binary
from bench.nginx_static import nginx_binary

pytestmark = pytest.mark.skipif(nginx_binary() is None,
                                reason="nginx is not installed (make test-deps installs it)")


def test_benchmark_8_prints_finite_positive_rates_at_a_tiny_size(
        capsys: pytest.CaptureFixture[str]) -> None:
    figures = http.run(http.TINY)
    out = capsys.readouterr().out
    print(out)  # the figures, in the test's log
    if locust_binary() is None:
        print("Locust is not installed (pip install -e '.[bench]'): its figures are skipped")
    assert len(figures.ours) == len(figures.floor) == len(figures.ours_asyncio) == http.TINY.rounds
    assert "[8] ours on asyncio clients / floor: " in out  # the same trial on coroutine clients
    rates = [*figures.ours, *figures.ours_asyncio, *figures.floor, *(figures.wrk or []),
             *(r.rps for r in figures.locust or [])]
    ratios = [r for r in figures.ratios().values() if r is not None]
    assert ratios and all(math.isfinite(v) and v > 0 for v in [*rates, *ratios]), (rates, ratios)
    assert figures.ratios()["floor"] is not None  # ours and the floor always run
    lines = [line for line in out.splitlines() if " rps" in line or "ours /" in line]
    printed = [float(n.replace(",", "")) for line in lines
               for n in re.findall(r"(?<![\w-])\d[\d,]*(?:\.\d+)?(?![\w-])", line.split(":", 1)[1])]
    assert printed and all(math.isfinite(v) and v > 0 for v in printed), lines
