"""The consistency figures where users read them: the launch table (columns only in runs with
writes, the servers' end-of-trial notes), and ``coordinator report`` (HTML columns, the plot)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from bench import report_rows
from results.figures.consistency import VersionSeries
from results.outputs import report_data, summary, table
from results.outputs.report import html_report, plots
from results.store.schema import TRIAL_SCHEMA, WRITE_OP

BASE = {"trial": 1, "strategy": "naive", "repeat": 1, "requests": 100, "errors": 0,
        "origin_per_expiry": 1.0, "rps": 10.0, "p50_ms": 1.0, "p99_ms": 2.0, "waits": 0,
        "stale_served": 0, "peak_origin_inflight": 1, "below_floor": False, "db_calls_match": True}
WRITES = {"writes": 40, "stale_after_write": 12, "stale_after_write_share": 0.12,
          "max_stale_ms": 85.25, "stale_sets": 3, "end_behind_keys": 0, "end_stale_sets": 0}


def cells(trials: list[dict[str, Any]], column: str) -> list[str]:
    """One column of the rendered table, by its heading."""
    columns = table.columns(trials)
    return [line[columns.index(column)] for line in table.summary_rows(trials)]


def test_consistency_columns_only_when_a_trial_had_writes() -> None:
    old = dict(BASE)  # a run made before writes: no such columns at all
    quiet = {**BASE, **WRITES, "writes": 0, "stale_after_write": 0, "stale_sets": 0,
             "stale_after_write_share": 0.0, "max_stale_ms": math.nan}
    for trials in ([old], [quiet]):
        assert table.columns(trials) == table.COLUMNS
        assert "stale sets" not in table.render(trials)
    written = [{**BASE, **WRITES}, {**BASE, **WRITES, "trial": 2, "repeat": 2, "stale_after_write": 8,
                                    "stale_after_write_share": 0.08, "max_stale_ms": 120.0,
                                    "stale_sets": 0},
               {**old, "trial": 3, "strategy": "lease"}]
    text = table.render(written)
    assert all(c in text.splitlines()[0] for c in table.CONSISTENCY_COLUMNS)
    assert cells(written, "writes") == ["80", "0"]
    assert cells(written, "stale reads") == ["20 (10.00%)", "0"]  # summed; the median share
    assert cells(written, "max stale ms") == ["120.0", "-"]
    assert cells(written, "stale sets") == ["3", "0"]


def test_notes_report_what_the_servers_proved_at_the_end() -> None:
    assert not [n for n in table.notes([{**BASE, **WRITES}]) if "stale set" in n]
    shown = table.notes([{**BASE, **WRITES, "end_stale_sets": 1}])
    assert any("cache holds a stale set at the end: proven by the servers" in n for n in shown)
    assert not any("did not show" in n for n in shown)
    missed = table.notes([{**BASE, **WRITES, "stale_sets": 0, "end_stale_sets": 2}])
    assert any("proven by the servers" in n and "the servers hold a stale set the rows did not show"
               in n for n in missed)
    assert not [n for n in table.notes([BASE]) if "stale" in n]  # older runs: nothing to say


def _with_writes(root: Path) -> None:
    """A synthetic run whose trial 1 had writes on its key: version rows and trial figures."""
    part = root / "requests" / "trial=1" / "part-0.parquet"
    rows = pq.read_table(part)
    t = rows["t_start_ns"].to_numpy()
    commits = np.linspace(t.min(), t.max(), 6).astype(np.int64)[1:-1]
    version = np.searchsorted(commits, t - 5_000_000)  # served 5 ms behind each commit
    rows = rows.set_column(rows.schema.get_field_index("version_served"), "version_served",
                           pa.array(version, pa.int64()))
    writes = rows.slice(0, len(commits)).to_pylist()
    for i, (w, c) in enumerate(zip(writes, commits, strict=True)):
        w.update(op=WRITE_OP, client=-1, outcome="filled", error=None, t_start_ns=int(c) - 1000,
                 latency_ns=2000, version_served=i + 1, commit_ns=int(c), in_window=True)
    pq.write_table(pa.concat_tables([rows, pa.Table.from_pylist(writes, schema=rows.schema)]), part)
    trials = pq.read_table(root / "trials.parquet").to_pylist()
    trials[0].update(WRITES, end_stale_sets=1)
    pq.write_table(pa.Table.from_pylist(trials, schema=TRIAL_SCHEMA), root / "trials.parquet")


def test_report_shows_the_consistency_columns_and_the_versions_plot(tmp_path: Path) -> None:
    root = tmp_path / "run"
    report_rows.build(root, rows=4_000)
    _with_writes(root)
    data = report_data.load(root)
    assert [(p.strategy, p.trial, p.series.key) for p in data.versions] == [("naive", 1, "orders:0")]
    assert data.versions[0].series.stale_reads > 0 and list(data.versions[0].series.committed) == [1, 2, 3, 4]
    written = html_report.write_report(root)
    page = written.html.read_text()
    assert root / "versions.png" in written.pngs
    assert "Consistency under writes" in page and "stale sets proven at end" in page
    assert "<th>stale reads</th>" in page  # the summary table's column too
    assert "proven by the servers" in summary.render_summary(root)


def test_report_without_writes_has_no_consistency_section() -> None:
    data = report_data.RunData(Path("run"), {}, [BASE, {**BASE, **WRITES, "writes": 0}], set())
    page = "".join(html_report._trials_section(data, {}))
    assert "Consistency under writes" not in page and "stale reads" not in page
    written = report_data.RunData(Path("run"), {}, [BASE, {**BASE, **WRITES}], set())
    assert "stale reads" in "".join(html_report._trials_section(written, {}))


def test_versions_of_a_run_made_before_versions_are_not_plotted(tmp_path: Path) -> None:
    part = tmp_path / "requests" / "trial=1"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"key": ["k"], "op": [WRITE_OP], "t_start_ns": [1]}), part / "p.parquet")
    dataset = ds.dataset(tmp_path / "requests", format="parquet", partitioning="hive")
    assert report_data.version_panels(dataset, [{**BASE, **WRITES}], {1: {"start_ns": 0}}) == []


def test_versions_plot_is_a_png_even_without_reads() -> None:
    empty = np.array([], np.int64)
    series = VersionSeries("k", empty, empty, empty.astype(bool), np.array([5]), np.array([1]), 0, 0)
    png = plots.version_timeline([report_data.VersionPanel(1, "naive", 1, 0, series)])
    assert png[:4] == b"\x89PNG"
