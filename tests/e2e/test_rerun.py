"""``coordinator rerun`` end to end: the same experiment again from run.json's manifest, with the
same resolved options (even when a preset's definition changed since), the same order of the
defences' figures, and ``compare`` of the two runs saying how they were configured."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from coordinator.cli import workload_options
from tests.helpers import coordinator, run_cli

Runs = tuple[Path, Path, subprocess.CompletedProcess[str]]


def manifest(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((root / "run.json").read_bytes())["manifest"]
    return data


def per_expiry(root: Path) -> dict[str, float]:
    return {r["strategy"]: r["origin_per_expiry"]
            for r in pq.read_table(root / "trials.parquet").to_pylist()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    base = tmp_path_factory.mktemp("rerun")
    first = coordinator("launch", "--workers", "2", "--clients", "20", "--seconds", "4", "--ttl", "1",
                        "--strategies", "naive,lock-dc", "--scale", "100000", "--out",
                        str(base / "a"), "--quiet", timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    again = coordinator("rerun", str(base / "a"), "--out", str(base / "b"), timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    return base / "a", base / "b", again


def test_the_rerun_has_every_resolved_option_of_the_original(runs: Runs) -> None:
    a, b, done = runs
    first, second = manifest(a), manifest(b)
    assert second["options"] == first["options"]
    assert second["seeds"] == first["seeds"] == {"workload": 1}
    assert first["command"][:2] == ["coordinator", "launch"] and first["rerun_of"] is None
    assert second["command"] == ["coordinator", "rerun", str(a), "--out", str(b)]
    assert second["rerun_of"] == "a"
    for m in (first, second):
        assert m["versions"]["postgresql"] and m["versions"]["cache_server"]
        assert set(m["hosts"]["workers"]) == {"w1@stampede-local", "w2@stampede-local"}
        assert all(w["cores"] >= 1 and w["memory_bytes"] > 0 for w in m["hosts"]["workers"].values())
    assert "rerun: " in done.stdout and "rerun of a: coordinator launch" in done.stderr


def test_the_figures_keep_their_order(runs: Runs) -> None:
    a, b, _ = runs
    for root in (a, b):
        figures = per_expiry(root)
        assert figures["naive"] > figures["lock-dc"], figures


def test_compare_of_a_run_and_its_rerun_says_they_were_configured_alike(runs: Runs) -> None:
    a, b, _ = runs
    done = coordinator("compare", str(a), str(b), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("configuration: the same in every option, seed, version and host.")
    assert "figures (B - A):" in done.stdout


def test_a_preset_run_reruns_with_its_recorded_options_after_the_preset_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    first = coordinator("launch", "--preset", "jitter", "--ttl", "2", "--seconds", "5", "--scale",
                        "20000", "--clients", "10", "--out", str(tmp_path / "a"), "--quiet",
                        timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    changed = {**workload_options.PRESETS["jitter"], "keys": "many:3", "workers": 1,
               "strategies": "naive", "scale": 5000}
    monkeypatch.setitem(workload_options.PRESETS, "jitter", changed)
    code, err = run_cli(["rerun", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--quiet"],
                        capsys)
    assert code == 0, err[-3000:]
    original, again = manifest(tmp_path / "a"), manifest(tmp_path / "b")
    assert again["options"] == original["options"]
    assert again["options"]["preset"] == "jitter" and again["options"]["workers"] == 2
    assert again["options"]["workload"]["endpoints"][0]["keys"]["count"] == 100
    assert set(per_expiry(tmp_path / "b")) == {"naive", "naive:jitter=0.2"}
