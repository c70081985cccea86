"""Benchmarks 3 and 4 (recording, shipping a batch) and the report on synthetic rows, at a
thousand rows, benchmark 9 (the hit path's A/B) at two thousand requests, benchmark 12
(Python beside a request) and benchmark 13 (the product's pieces on the floor, rung by rung) at
2 processes x 2 threads: every figure they print finite and positive (tests/bench_figures.py)."""

from __future__ import annotations

import pytest

from bench import ab_hit_path, gil_tax, ladder, recording, report_rows
from bench.nginx_static import nginx_binary
from tests.bench_figures import assert_figures


def test_benchmarks_3_and_4_print_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    recording.run(rows=1000)
    out = capsys.readouterr().out
    assert "[3] recording a row" in out and "[4] 1,000 rows" in out
    assert_figures(out, at_least=8)


def test_report_on_synthetic_rows_prints_its_time_and_memory(
        capsys: pytest.CaptureFixture[str]) -> None:
    report_rows.main(rows=1000)
    out = capsys.readouterr().out
    assert "coordinator report:" in out
    assert_figures(out, at_least=6)


def test_benchmark_9_hit_path_ab_prints_both_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    found = ab_hit_path.run(ab_hit_path.TINY)
    out = capsys.readouterr().out
    assert out.count("[9] hit path A/B") == 2 and set(found) == {"at-once cache", "lean GET on Redis"}
    assert_figures(out, at_least=8)


def test_benchmark_12_prints_the_floor_with_and_without_python_beside_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    found = gil_tax.run(gil_tax.TINY)
    out = capsys.readouterr().out
    assert set(found) == set(gil_tax.TINY.extra_us) and out.count("us of Python a request") == 2
    assert_figures(out, at_least=8)


def test_benchmark_13_prints_every_rung_of_the_ladder(capsys: pytest.CaptureFixture[str]) -> None:
    """Each rung really ran, over Redis and over HTTP (a rung with no request, a failed request
    or a row its shipper lost raises)."""
    if ladder.Over.HTTP in ladder.TINY.over and nginx_binary() is None:
        pytest.skip("nginx is not installed (make http-deps)")
    found = ladder.run(ladder.TINY)
    out = capsys.readouterr().out
    assert list(found) == list(ladder.Over)
    assert all(list(rungs) == list(ladder.Rung) for rungs in found.values())
    assert out.count("of the floor") == len(ladder.Over) * len(ladder.Rung)
    assert_figures(out, at_least=3 * len(ladder.Over) * len(ladder.Rung))
