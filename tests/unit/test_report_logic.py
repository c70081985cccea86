"""Report and compare without a run: their pure parts, and the refusal of a directory with no run.

The report on a real run directory is in tests/e2e/test_report.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from results.outputs import compare
from results.outputs.report import html_report
from tests.helpers import assert_bad_input, run_cli


def test_compare_lists_unmatched_trials() -> None:
    a = [{"strategy": "naive", "repeat": 1, "rps": 10.0}]
    b = [{"strategy": "lock", "repeat": 1, "rps": 20.0}]
    lines = compare.rows(a, b)
    assert lines[0][2] == "(only in A)" and lines[1][2] == "(only in B)"


def test_report_and_compare_reject_a_directory_without_a_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["report", str(tmp_path)], ["compare", str(tmp_path), str(tmp_path)]):
        code, err = run_cli(args, capsys)
        assert_bad_input(code, err, "holds no trials.parquet")


def test_flag_cell_marks_untrustworthy_figures() -> None:
    row = {"p50_ms": 0.01, "p99_ms": 5.0, "floor_ms": 0.05, "error_rate": 0.1,
           "db_calls_match": False, "saturated": True, "strategy": "naive"}
    flagged = {k for k in row if html_report.flag_cell(row, k)}
    assert flagged == {"p50_ms", "error_rate", "db_calls_match", "saturated"}
    assert not html_report.flag_cell({"error_rate": 0.0, "saturated": None}, "error_rate")
