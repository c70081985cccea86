"""Metrics folded from recorder rows, the coordinator's phase, the dashboard's structure and
names, and ``--observe`` / ``--metrics-port`` bad input."""

from __future__ import annotations

import itertools
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator.observe import board, dashboard
from coordinator.trials.plan import TrialPlan
from model.wire import TrialSpec
from strategies import Outcome, Probe, parse
from tests.helpers import assert_bad_input, run_cli, trial_spec
from worker import metrics
from worker.recorder import Recorder

OPS = ["orders", "write", "refresh"]


def scrape(collector: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """name + sorted labels -> value, as Prometheus would read the text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **match: str) -> float:
    return sum(v for (n, labels), v in samples.items()
               if n == name and all(dict(labels).get(k) == val for k, val in match.items()))


def add(rec: Recorder, latency_ms: float, outcome: Outcome, origin: bool = False,
        error: str | None = None, stale_age_ms: float = 0) -> None:
    probe = Probe()
    probe.origin_calls = int(origin)
    probe.origin_start_ns, probe.origin_ns = (1_000_000, 3_000_000) if origin else (0, 0)
    probe.stale_age_ns = int(stale_age_ms * 1e6)
    rec.add(0, 1, int(latency_ms * 1e6), outcome, probe, error)


def ship(collector: metrics.WorkerCollector, spec: TrialSpec, recs: list[Recorder]) -> None:
    """What the shipper does each interval: drain every recorder into the live metrics."""
    fold = collector.folder(spec)
    assert fold is not None
    for rec in recs:
        fold(rec.drain(), rec.error_names())


@pytest.fixture
def collector() -> metrics.WorkerCollector:
    c = metrics.WorkerCollector()
    c.enabled, c.worker = True, "w1@test"
    return c


def test_rows_are_counted_once_across_scrapes(collector: metrics.WorkerCollector) -> None:
    spec = trial_spec(2, 1.0, run_id="r1", strategy="lock")
    recs = [Recorder(0, ["orders:0"], OPS), Recorder(1, ["orders:0"], OPS)]
    collector.watch(spec, OPS)
    add(recs[0], 0.2, Outcome.HIT)
    add(recs[1], 4.0, Outcome.FILLED, origin=True)
    ship(collector, spec, recs)
    first = scrape(collector)
    assert total(first, "stampede_requests_total") == 2
    add(recs[0], 12.0, Outcome.WAITED)
    add(recs[1], 1.0, Outcome.ERROR, error="LockWaitTimeout")
    ship(collector, spec, recs)
    again = scrape(collector)
    labels = {"run_id": "r1", "trial": "1", "worker": "w1@test", "strategy": "lock", "endpoint": "orders"}
    assert total(again, "stampede_requests_total", **labels) == 4
    assert total(again, "stampede_requests_total", outcome="waited") == 1
    assert total(again, "stampede_origin_calls_total", **labels) == 1
    assert total(again, "stampede_errors_total", type="LockWaitTimeout") == 1
    assert total(again, "stampede_request_duration_seconds_count") == 4
    assert total(again, "stampede_request_duration_seconds_bucket", le="0.0003") == 1
    assert total(again, "stampede_request_duration_seconds_bucket", le="0.005") == 3
    assert total(again, "stampede_request_duration_seconds_sum") == pytest.approx(0.0172)
    ship(collector, spec, recs)
    assert scrape(collector) == again  # nothing new: nothing added


def test_rows_appended_during_drains_are_each_counted_once(
        collector: metrics.WorkerCollector) -> None:
    """A client thread appends while the shipper drains and the scrapes read: every total only
    grows, and the last one counts every row exactly once (a row is appended whole, and a drain
    takes whole rows, never one half written)."""
    rec = Recorder(0, ["orders:0"], OPS)
    spec = trial_spec(1, 1.0)
    collector.watch(spec, OPS)
    rows = 20_000
    appender = threading.Thread(target=lambda: [add(rec, 1.0, Outcome.HIT) for _ in range(rows)])
    appender.start()
    seen = []
    while appender.is_alive():
        ship(collector, spec, [rec])
        seen.append(total(scrape(collector), "stampede_requests_total"))
    appender.join()
    ship(collector, spec, [rec])
    seen.append(total(scrape(collector), "stampede_requests_total"))
    assert seen == sorted(seen) and seen[-1] == rows
    assert total(scrape(collector), "stampede_request_duration_seconds_count") == rows


def test_finished_trial_keeps_its_totals_and_drops_its_rows(collector: metrics.WorkerCollector) -> None:
    spec = trial_spec(1, 1.0)
    rec = Recorder(0, ["orders:0"], OPS)
    collector.watch(spec, OPS)
    for _ in range(5):
        add(rec, 30.0, Outcome.STALE, stale_age_ms=400)
    ship(collector, spec, [rec])
    collector.finish(spec)
    samples = scrape(collector)
    assert total(samples, "stampede_requests_total", outcome="stale") == 5
    assert total(samples, "stampede_stale_answers_total") == 5
    assert total(samples, "stampede_stale_age_seconds_bucket", le="0.5") == 5
    assert total(samples, "stampede_stale_age_seconds_bucket", le="0.25") == 0
    assert all(f.pool is None for f in collector._feeds.values())


def test_off_by_default_follows_nothing() -> None:
    idle = metrics.WorkerCollector()
    idle.watch(trial_spec(1, 1.0), OPS)
    assert not idle._feeds and idle.folder(trial_spec(1, 1.0)) is None


def test_peak_overlap_of_origin_intervals() -> None:
    starts = np.array([0, 5, 10, 30], np.int64)
    durations = np.array([20, 10, 1, 5], np.int64)
    assert metrics.peak_overlap(starts, durations) == 3
    assert metrics.peak_overlap(np.array([0, 10]), np.array([10, 5])) == 1  # end, then start
    assert metrics.peak_overlap(np.array([], np.int64), np.array([], np.int64)) == 0


def test_metrics_port_from_environment() -> None:
    assert metrics.metrics_port({}) is None
    assert metrics.metrics_port({metrics.PORT_ENV: "9100"}) == 9100
    for bad in ("0", "70000", "abc"):
        with pytest.raises(ValueError, match=metrics.PORT_ENV):
            metrics.metrics_port({metrics.PORT_ENV: bad})


def test_buckets_reach_from_sub_millisecond_to_pile_ups() -> None:
    bounds = metrics.LATENCY_BUCKETS
    assert bounds[0] <= 0.0001 and bounds[-1] >= 10 and list(bounds) == sorted(bounds)
    assert max(b / a for a, b in itertools.pairwise(bounds)) <= 2.0


def _plan(**instants: int) -> TrialPlan:
    base = {"start_ns": 100, "window_start_ns": 200, "window_end_ns": 300, "end_ns": 400,
            "first_expiry_ns": 250, "ttl_ms": 0}
    base.update(instants)
    return TrialPlan(trial=1, strategy=parse("naive"), repeat=1, periods=1, keys=("k",), shares=(),
                     **base)


def test_phase_from_the_plan_instants() -> None:
    plan = _plan()
    seen = [board.phase_at(plan, t, done=False) for t in (50, 150, 250, 350, 450)]
    assert seen == ["lead", "warmup", "window", "drain", "gathering"]
    assert board.phase_at(plan, 250, done=True) == "idle"
    aligned = _plan(first_expiry_ns=1_000_000_000, ttl_ms=1000)
    assert board.next_scheduled_ns(aligned, 2_500_000_000, aligned=True) == 3_000_000_000
    assert board.next_scheduled_ns(aligned, 2_500_000_000, aligned=False) == 1_000_000_000


def test_board_exports_phase_expiries_and_workers() -> None:
    b = board.Board()
    b.run_id, b.workers_alive = "r9", lambda: 3
    b.trial_planned(_plan(start_ns=0, window_start_ns=0, window_end_ns=10**20, end_ns=10**20))
    b.reported(1, 1, 123_000_000_000)
    samples = scrape(b)
    assert total(samples, "stampede_trial_phase", stampede_trial_phase="window") == 1
    assert total(samples, "stampede_trial_phase", stampede_trial_phase="lead") == 0
    assert total(samples, "stampede_expiries_observed_total", trial="1") == 1
    assert total(samples, "stampede_expiry_observed_timestamp_seconds") == 123.0
    assert total(samples, "stampede_workers_alive", run_id="r9") == 3


# -- the dashboard ------------------------------------------------------------------------------

REQUIRED_PANELS = ("Origin calls per second", "Origin queries in flight vs pool size",
                   "Answers by outcome per strategy", "Hit rate per endpoint",
                   "Latency p50 / p99 (histogram)", "Redis commands per second",
                   "PostgreSQL active connections", "Top statements' time")


def test_dashboard_structure() -> None:
    dash = dashboard.load()
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    assert set(REQUIRED_PANELS) <= {p["title"] for p in panels}
    for panel in panels:
        assert panel["type"] in ("timeseries", "stat", "table")
        grid = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= set(grid) and grid["x"] + grid["w"] <= 24
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(set(refs)) == len(refs) and all(t["expr"].strip() for t in panel["targets"])
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert "run_id" in variables["run_id"]["query"]["query"]
    names = {a["name"] for a in dash["annotations"]["list"]}
    assert {"Expiries (observed)", "Expiries (scheduled)"} <= names


def test_dashboard_metric_names_are_exported() -> None:
    """Every stampede_* name the dashboard reads is one the worker or the coordinator exports."""
    collector = metrics.WorkerCollector()
    collector.enabled = True
    spec = trial_spec(1, 1.0)
    rec = Recorder(0, ["orders:0"], OPS)

    class Pool:
        def get_stats(self) -> dict[str, int]:
            return {"pool_size": 2, "pool_available": 1}

    collector.watch(spec, OPS, Pool())
    add(rec, 1.0, Outcome.ERROR, error="X")
    ship(collector, spec, [rec])
    b = board.Board()
    b.workers_alive = lambda: 1
    b.trial_planned(_plan())
    b.reported(1, 1, 1)
    exported = {name for name, _ in scrape(collector)} | {name for name, _ in scrape(b)}
    used = {m for q in dashboard.queries(dashboard.load())
            for m in re.findall(r"\bstampede_\w+", q.expr)}
    assert used and used <= exported, used - exported


def test_render_fills_grafana_variables() -> None:
    expr = 'rate(x{run_id=~"$run_id"}[$__rate_interval]) and changes(y[$__interval])'
    assert dashboard.render(expr, "2026-a.b") == \
        r'rate(x{run_id=~"2026\-a\.b"}[4s]) and changes(y[2s])'


# -- bad input -------------------------------------------------------------------------------------

def test_observe_without_prometheus_says_what_to_install(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STAMPEDE_PROMETHEUS", str(tmp_path / "no-prometheus"))
    code, err = run_cli(["launch", "--observe", "--out", str(tmp_path / "run")], capsys)
    assert_bad_input(code, err, "run `make observe-deps`")
    assert not (tmp_path / "run").exists()


def test_observe_with_remote_services_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    remote = ["--cache-url", "redis://h:1/0", "--lock-url", "redis://h:1/1", "--broker-url",
              "redis://h:1/2", "--origin-dsn", "postgresql://u@h:5432/d"]
    code, err = run_cli(["launch", "--observe", *remote, "--out", str(tmp_path / "run")], capsys)
    assert_bad_input(code, err, "--observe")


@pytest.mark.parametrize(("args", "says"), [
    (["--metrics-port", "0"], "--metrics-port"),
    (["--metrics-port", "65530", "--workers", "8"], "past 65535"),
])
def test_bad_metrics_port(args: list[str], says: str, capsys: pytest.CaptureFixture[str],
                          tmp_path: Path) -> None:
    code, err = run_cli(["launch", *args, "--out", str(tmp_path / "run")], capsys)
    assert_bad_input(code, err, says)
