"""``coordinator report`` and ``compare`` on a real run directory; old runs still report."""

from __future__ import annotations

import base64
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from results.outputs import report_data
from results.outputs.report import html_report
from tests.helpers import coordinator

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_writes_html_and_pngs(real_run: Path) -> None:
    done = coordinator("report", str(real_run))
    assert done.returncode == 0, done.stderr
    assert "naive" in done.stdout and "report.html" in done.stdout
    page = (real_run / "report.html").read_text()
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(embedded) >= 2
    for data in embedded:
        width, height = png_size(base64.b64decode(data))
        assert 400 <= width <= 4000 and 200 <= height <= 4000
    for name in ("origin_timeline.png", "latency_percentiles.png"):
        assert png_size((real_run / name).read_bytes())[0] >= 400
    assert "Database time per statement" in page and "Per endpoint" in page
    assert "Per stage" not in page  # this run has no stage column


def test_timeline_shows_the_herd_under_naive_and_few_fills_under_lock(real_run: Path) -> None:
    data = report_data.load(real_run)
    by = {t.strategy: t for t in data.timelines}
    assert by["naive"].expiries_s and by["lock"].expiries_s
    naive, lock = int(by["naive"].counts.sum()), int(by["lock"].counts.sum())
    assert naive > lock and int(by["naive"].counts.max()) > int(by["lock"].counts.max())
    for row in data.latency:
        assert row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] <= row["p999_ms"] <= row["max_ms"]


def test_report_screenshot_in_headless_chromium(real_run: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    html_report.write_report(real_run)
    shot = tmp_path / "report.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1280,2400",
                    (real_run / "report.html").as_uri()], capture_output=True, timeout=120,
                   check=True)
    assert png_size(shot.read_bytes()) == (1280, 2400)
    assert shot.stat().st_size > 50_000  # a blank page compresses to a few kB


def _old_copy(real_run: Path, tmp_path: Path) -> Path:
    """The run as an older version wrote it: no new trial columns, no statements.parquet."""
    old = tmp_path / "old-run"
    shutil.copytree(real_run, old)
    (old / "statements.parquet").unlink()
    trials = pq.read_table(old / "trials.parquet")
    keep = trials.column_names[: trials.column_names.index("complete") + 1]
    pq.write_table(trials.select(keep), old / "trials.parquet")
    return old


def test_report_on_an_older_run_directory(real_run: Path, tmp_path: Path) -> None:
    old = _old_copy(real_run, tmp_path)
    done = coordinator("report", str(old))
    assert done.returncode == 0, done.stderr
    assert "n/a" in done.stdout  # generator check unknown for such a run
    page = (old / "report.html").read_text()
    assert "Database time per statement" not in page and "origin calls per 100 ms" in page


def test_staged_run_gets_per_stage_table_and_plot(real_run: Path, tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    shutil.copytree(real_run, staged)
    for part in (staged / "requests").glob("trial=*/*.parquet"):
        rows = pq.read_table(part)
        # two stages inside the window (by client parity), the rest warm-up (-1)
        parity = pc.bit_wise_and(rows["client"], 1).cast(pa.int16())
        stage = pc.if_else(rows["in_window"], parity, pa.scalar(-1, pa.int16()))
        if "stage" in rows.column_names:
            rows = rows.drop_columns(["stage"])
        pq.write_table(rows.append_column("stage", stage), part)
    written = html_report.write_report(staged)
    assert staged / "stages.png" in written.pngs
    data = report_data.load(staged)
    assert {(r["strategy"], r["stage"]) for r in data.stages} == {
        (s, stage) for s in ("naive", "lock") for stage in (0, 1)}
    assert all(r["pool_wait_p99_ms"] == r["pool_wait_p99_ms"] for r in data.stages
               if r["origin_calls"])
    assert "Per stage" in written.html.read_text()


def test_compare_shows_each_change(real_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(real_run, other)
    trials = pq.read_table(other / "trials.parquet")
    doubled = pc.multiply(trials["rps"], 2.0)
    pq.write_table(trials.set_column(trials.column_names.index("rps"), "rps", doubled),
                   other / "trials.parquet")
    done = coordinator("compare", str(real_run), str(other))
    assert done.returncode == 0, done.stderr
    per_trial = done.stdout.split("figures (B - A):", 1)[1]  # after the verdicts per strategy
    rps_lines = [line for line in per_trial.splitlines() if " rps " in line]
    assert len(rps_lines) == 2 and all("+100.0%" in line for line in rps_lines)
    assert "verdicts per strategy over its repeats" in done.stdout
