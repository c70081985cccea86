"""Benchmark 11 (bench.aio_clients) at the tests' size: both client drivers on one worker, then
the asyncio driver alone with ten times the clients; every figure it prints finite and positive."""

from __future__ import annotations

import pytest

from bench import aio_clients
from tests.bench_figures import assert_figures


def test_benchmark_10_asyncio_clients_vs_threads(capsys: pytest.CaptureFixture[str]) -> None:
    results = aio_clients.run(aio_clients.TINY)
    out = capsys.readouterr().out
    print(out)
    assert out.startswith("[11] asyncio clients vs client threads")
    assert [(r.driver.value, r.clients) for r in results] == [
        ("threads", 20), ("asyncio", 20), ("asyncio", 200)]
    assert all(r.rps > 0 and r.requests > 0 for r in results)
    # a small trial's RSS may not grow at all; a release can be on time to the tenth of a ms
    assert_figures(out, zero_ok=[r"memory [\d.,]+ KB per client", r"released [\d.,]+ ms late",
                                 r"memory per client x[\d.]+"], at_least=30)
