"""``coordinator launch --observe`` with the Debian ``prometheus`` on loopback: live series during
the run, counters equal to Parquet afterwards, every dashboard query accepted and answered."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from coordinator.observe import dashboard
from coordinator.observe.prometheus import Prometheus, PromQLError, Targets, api, find_binary
from results.outputs.report import html_report
from tests.helpers import ROOT, coordinator_argv

CLIENT_OPS = pa.array(["write", "invalidate", "refresh"])
pytestmark = pytest.mark.skipif(find_binary() is None,
                                reason="prometheus not installed (apt-get install prometheus)")


class LiveRun:
    """A launch in a subprocess; its stderr read by a thread, so lines can be awaited."""

    def __init__(self, out: Path) -> None:
        argv = coordinator_argv("launch", "--workers", "2", "--clients", "16", "--seconds", "4",
                                "--ttl", "1", "--scale", "20000", "--origin-ms", "2",
                                "--strategies", "naive,lock", "--observe", "--out", str(out))
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, prefix: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = next((ln for ln in self.lines if ln.startswith(prefix)), None)
            if found is not None:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no line {prefix!r}:\n" + "\n".join(self.lines[-30:]))


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The run, what was seen live during it, and its kept series reopened after it."""
    out = tmp_path_factory.mktemp("observed") / "run"
    run = LiveRun(out)
    try:
        url = run.wait_line("prometheus: http://127.0.0.1:", 120).split()[1].removesuffix("/graph")
        live = _live_requests(url, run)
        stdout, _ = run.proc.communicate(timeout=240)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    run.reader.join(5)
    assert run.proc.returncode == 0, "\n".join(run.lines[-40:])
    binary = find_binary()
    assert binary is not None
    reopened = Prometheus(binary, tmp_path_factory.mktemp("reopen"), Targets(),
                          data=out / "prometheus" / "data")
    try:
        yield {"out": out, "url": url, "live": live, "prom": reopened, "stdout": stdout,
               "snapshot": json.loads((out / "prometheus" / "panels.json").read_text())}
    finally:
        reopened.stop()


def _live_requests(url: str, run: LiveRun) -> float:
    """Requests counted by Prometheus while the launch still runs (0 if none were seen)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and run.proc.poll() is None:
        result = api(url, "query", {"query": "sum(stampede_requests_total)"})["result"]
        if result and float(result[0]["value"][1]) > 0:
            return float(result[0]["value"][1])
        time.sleep(0.5)
    return 0.0


def _per_trial(prom: Prometheus, metric: str, selector: str, at_s: float) -> dict[int, float]:
    """Each trial's final counter total: series are per trial and start at 0, so the last value
    is the trial's increase (``increase()`` would extrapolate)."""
    expr = f"sum by (trial) (max_over_time({metric}{{{selector}}}[1h]))"
    return {int(r["metric"]["trial"]): float(r["value"][1]) for r in prom.query(expr, at_s)}


def test_live_series_while_the_run_goes_on(observed: dict[str, Any]) -> None:
    assert observed["live"] > 0
    with pytest.raises(PromQLError, match="refused"):  # stopped with the run
        api(observed["url"], "query", {"query": "up"})


def test_counters_equal_parquet_per_trial(observed: dict[str, Any]) -> None:
    out: Path = observed["out"]
    rows = ds.dataset(out / "requests", partitioning="hive").to_table()
    run_id, end = out.name, float(observed["snapshot"]["end_s"])
    origin = _per_trial(observed["prom"], "stampede_origin_calls_total", f'run_id="{run_id}"', end)
    requests = _per_trial(observed["prom"], "stampede_requests_total",
                          f'run_id="{run_id}", endpoint!~"write|invalidate|refresh"', end)
    assert sorted(origin) == sorted(requests) == [1, 2]
    for trial in (1, 2):
        trial_rows = rows.filter(pc.equal(rows["trial"], trial))
        assert origin[trial] == pc.sum(trial_rows["origin_called"]).as_py() > 0
        client_rows = trial_rows.filter(pc.invert(pc.is_in(trial_rows["op"], value_set=CLIENT_OPS)))
        assert abs(requests[trial] - client_rows.num_rows) <= 0.01 * client_rows.num_rows


def test_every_dashboard_query_is_accepted_and_returns_data(observed: dict[str, Any]) -> None:
    snapshot = observed["snapshot"]
    for query in dashboard.queries(dashboard.load()):
        expr = dashboard.render(query.expr, observed["out"].name)
        series = observed["prom"].query_range(expr, snapshot["start_s"], snapshot["end_s"], 1)
        assert series, f"{query.panel} {query.ref}: no data for {expr}"


def test_report_appendix_draws_every_panel(observed: dict[str, Any]) -> None:
    panels = observed["snapshot"]["panels"]
    assert panels and all(p.get("series") for p in panels), [p["panel"] for p in panels
                                                            if not p.get("series")]
    page = html_report.write_report(observed["out"]).html.read_text()
    assert "Appendix: the Grafana dashboard" in page
    for panel in panels:
        assert panel["panel"].replace("'", "&#x27;") in page
    assert page.count("<polyline") >= len(panels)
