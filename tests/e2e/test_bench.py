"""Benchmarks that cannot rot: each of make bench's benchmarks that needs a stack runs here at a
tiny size (two workers, a few clients, seconds), and every figure it prints must be finite and
positive (tests/bench_figures.py). Locust and redis-benchmark are installed by the test setup
(``make test-deps``: redis-tools, and the ``bench`` extra): a missing one fails, never skips."""

from __future__ import annotations

import shutil

import pytest

from bench import cluster, locust_bench, repeatability, soak
from tests.bench_figures import assert_figures

# --force-clock: one host, offsets of 0; on a loaded machine the estimate's uncertainty passed 5 % of
# the 0.5-s TTL (25 ms) and the launch refused to run.
TINY_DEMO = ("--workers", "2", "--clients", "4", "--ttl", "0.5", "--seconds", "6", "--scale", "2000",
             "--force-clock")


def test_locust_and_redis_benchmark_are_installed() -> None:
    """Benchmark 1's anchor and benchmark 2's ceiling: `make test-deps` installs both."""
    assert locust_bench.locust_binary() is not None, "Locust missing: make test-deps"
    assert shutil.which("redis-benchmark") or shutil.which("valkey-benchmark"), \
        "redis-benchmark missing: make test-deps (Debian's redis-tools)"


def test_benchmarks_1_2_and_5_print_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    figures = cluster.run(size=cluster.TINY)
    on_asyncio = figures.on_asyncio()
    assert on_asyncio is not None, "benchmark 1 ran no all-hit trial on asyncio clients"
    out = capsys.readouterr().out + "\n".join([
        figures.efficiency_line(), figures.vs_locust_line(),
        on_asyncio.efficiency_line(" on asyncio clients"),
        on_asyncio.vs_locust_line(" on asyncio clients")])
    for part in ("[1] all-hit trial", "--client-driver asyncio", "GET loop, plain socket",
                 "Locust 2.", "[1] CPU per request", "all-hit trial, asyncio clients: ",
                 "[1] one client thread alone", "shipping", "[2] redis-benchmark",
                 "[5] start spread", "generator efficiency", "vs Locust: ",
                 "generator efficiency on asyncio clients", "vs Locust on asyncio clients: "):
        assert part in out, f"{part!r} missing from:\n{out}"
    # two bare processes on two cores can wake within the same microsecond: a spread of 0
    assert_figures(out, zero_ok=[r"wake [\d.,]+ us apart"], at_least=48)
    assert figures.vs_locust is not None and figures.efficiency > 0
    assert on_asyncio.vs_locust is not None and on_asyncio.efficiency > 0


def test_benchmark_1_with_metrics_scraped(capsys: pytest.CaptureFixture[str]) -> None:
    figures = cluster.run(metrics=True, size=cluster.TINY)
    out = capsys.readouterr().out + figures.efficiency_line(" with metrics on")
    assert "metrics scraped" in out and "generator efficiency with metrics on" in out
    assert_figures(out, at_least=8)


def test_benchmark_6_repeatability(capsys: pytest.CaptureFixture[str]) -> None:
    found = repeatability.run(2, TINY_DEMO)
    out = capsys.readouterr().out
    assert found[0].startswith("[6] repeatability") and len(found) == 5
    assert_figures(out, zero_ok=[r"in \d+ of \d+", r"variation \d+\.\d%"], at_least=20)


def test_benchmark_7_soak(capsys: pytest.CaptureFixture[str]) -> None:
    found = soak.run(4.0, ("two-level",), workers=2, clients=4, every_s=0.1)
    out = capsys.readouterr().out
    assert len(found) == 1 and found[0].startswith("[7] soak two-level")
    assert_figures(out, at_least=8)
