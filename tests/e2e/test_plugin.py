"""Your own defence as a plug-in: ``--plugin`` loads examples/singleflight-plugin in the
coordinator and in every worker; a launch on the embedded stack measures it beside naive; a
worker with another version of it, or without it, stops the launch (exit 2, naming it)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from coordinator.stack.celery_workers import worker_argv
from coordinator.stack.processes import ManagedProcess
from model.services import Services
from tests.helpers import ROOT, coordinator

EXAMPLE = ROOT / "examples" / "singleflight-plugin"


def with_path(*paths: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in paths)}


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("plugin") / "run"
    done = coordinator("launch", "--plugin", "stampede_singleflight", "--strategies",
                       "naive,singleflight", "--workers", "2", "--clients", "24", "--seconds", "4",
                       "--ttl", "1", "--scale", "20000", "--origin-ms", "2", "--out", str(out),
                       env=with_path(EXAMPLE), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def test_the_plugin_runs_in_every_worker_and_defends(
        plugin_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = plugin_run
    trials = {r["strategy"]: r for r in pq.read_table(out / "trials.parquet").to_pylist()}
    naive, ours = trials["naive"], trials["singleflight"]
    assert ours["origin_per_expiry"] <= 2  # one call per worker process at most
    assert naive["origin_per_expiry"] >= 4 * ours["origin_per_expiry"]
    assert ours["waits"] > 0 and ours["errors"] == 0 and ours["db_calls_match"]
    assert "plug-ins: every worker has stampede_singleflight 0.1.0" in done.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["plugins"] == {"stampede_singleflight": "0.1.0"}
    assert meta["manifest"]["options"]["plugins"] == ["stampede_singleflight"]


@pytest.fixture
def other_version(tmp_path: Path) -> Path:
    """A copy of the plug-in that says it is 0.2.0."""
    copy = tmp_path / "other"
    shutil.copytree(EXAMPLE / "stampede_singleflight", copy / "stampede_singleflight")
    init = copy / "stampede_singleflight" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "0.1.0"', '__version__ = "0.2.0"'))
    return copy


@pytest.fixture
def two_workers(redis_server: Callable[[str], str], postgres_dsn: str, tmp_path: Path,
                other_version: Path) -> Iterator[tuple[Services, Callable[[Path | None], None]]]:
    """Remote services of their own (a broker no other test's workers listen on); ``start(path)``
    starts h1 with the right plug-in and h2 with ``path`` (None: without the plug-in)."""
    base = redis_server("plugin-broker").rsplit("/", 1)[0]
    services = Services(f"{base}/0", f"{base}/1", f"{base}/2", postgres_dsn)
    procs: list[ManagedProcess] = []

    def start(second: Path | None) -> None:
        for name, path in (("h1@plugin-test", EXAMPLE), ("h2@plugin-test", second)):
            env = {**with_path(*([ROOT, path] if path else [ROOT])), **services.to_env()}
            procs.append(ManagedProcess(name, worker_argv(name), tmp_path / f"{name}.log", env=env,
                                        stop_signal=signal.SIGQUIT, stop_timeout_s=3.0))
    yield services, start
    for proc in procs:
        proc.stop()


@pytest.mark.parametrize(("second", "says"), [
    ("other", "worker h2@plugin-test has stampede_singleflight 0.2.0, the coordinator 0.1.0"),
    (None, "worker h2@plugin-test has stampede_singleflight missing: plug-in stampede_singleflight "
           "failed to import"),
])
def test_a_worker_with_another_version_or_none_stops_the_launch(
        two_workers: tuple[Services, Callable[[Path | None], None]], other_version: Path,
        second: str | None, says: str, tmp_path: Path) -> None:
    services, start = two_workers
    start(other_version if second else None)
    urls = ["--cache-url", services.cache_url, "--lock-url", services.lock_url, "--broker-url",
            services.broker_url, "--origin-dsn", services.origin_dsn]
    done = coordinator("launch", "--plugin", "stampede_singleflight", "--strategies", "singleflight",
                       "--workers", "2", "--clients", "4", "--seconds", "3", "--ttl", "1", *urls, "--out",
                       str(tmp_path / "run"), env=with_path(EXAMPLE), timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert says in last and "--plugin" in last, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "trials.parquet").exists()  # no trial ran


def test_rerun_loads_the_plugin_again(plugin_run: tuple[Path, subprocess.CompletedProcess[str]],
                                      tmp_path: Path) -> None:
    out, _ = plugin_run
    again = coordinator("rerun", str(out), "--out", str(tmp_path / "again"), env=with_path(EXAMPLE),
                        timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    trials = pq.read_table(tmp_path / "again" / "trials.parquet").to_pylist()
    assert [t["strategy"] for t in trials] == ["naive", "singleflight"]
    assert "plug-ins: every worker has stampede_singleflight 0.1.0" in again.stderr
    refused = coordinator("rerun", str(out), "--out", str(tmp_path / "no"), timeout=120)
    assert refused.returncode == 2 and "plug-in stampede_singleflight failed to import" in refused.stderr
