"""The benchmarks' own code stays runnable as the schema grows (figures are not checked here)."""

from __future__ import annotations

from pathlib import Path

from bench import recording, report_10m
from results import report


def test_synthetic_run_has_every_column_and_reports(tmp_path: Path) -> None:
    root = tmp_path / "run"
    report_10m.build(root, rows=40_000)
    written = report.write_report(root)
    assert written.html.exists() and written.pngs


def test_recorded_rows_ship_and_decode() -> None:
    recorder = recording.record_rows(1000)
    assert recorder.to_batch().num_rows == 1000
