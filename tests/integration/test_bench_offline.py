"""Benchmarks 3 and 4 (recording, shipping a batch) and the report on synthetic rows, at a
thousand rows, and benchmark 9 (the hit path's A/B) at two thousand requests: every figure
they print finite and positive (tests/bench_figures.py)."""

from __future__ import annotations

import pytest

from bench import ab_hit_path, recording, report_rows
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
