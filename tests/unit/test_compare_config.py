"""``coordinator compare`` puts configuration differences first and says when the figures cannot
be read as a strategy's effect; ``rerun``, ``report`` and ``compare`` on old, newer or missing
runs say plainly what they need (exit 2, one line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.cli.commands import cli, main
from coordinator.cli.launch import config_from
from coordinator.manifest import Manifest
from results.outputs import config_diff
from results.store.schema import MANIFEST_VERSION, SCHEMA_VERSION, TRIAL_SCHEMA
from tests.helpers import assert_bad_input, run_cli

HOSTS = {"coordinator": {"hostname": "h", "cores": 2}, "workers": {"w1@h": {"hostname": "h"}}}
VERSIONS = {"python": "3.11.7", "redis": "8.1.0", "cache_server": "8.1.8"}


def make_run(root: Path, args: list[str], manifest: bool = True, **meta: Any) -> Path:
    """A run directory as launch writes it: run.json (with a manifest) and trials.parquet."""
    command = cli.commands["launch"]
    with command.make_context("launch", ["--out", str(root), *args]) as ctx:
        config = config_from(dict(ctx.params))
    root.mkdir(parents=True)
    data: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "run_id": root.name,
                            "spec": {"ttl_s": config.ttl_s}}
    if manifest:
        data["manifest_version"] = MANIFEST_VERSION
        data["manifest"] = Manifest.of(config, VERSIONS, HOSTS).to_json()
    data.update(meta)
    (root / "run.json").write_bytes(orjson.dumps(data))
    rows = [{"strategy": s.label, "repeat": 1, "origin_per_expiry": 10.0 / (i + 1), "rps": 1000.0}
            for i, s in enumerate(config.strategies)]
    pq.write_table(pa.Table.from_pylist(rows, schema=TRIAL_SCHEMA), root / "trials.parquet")
    return root


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_a_different_ttl_is_listed_first_with_a_warning(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(tmp_path / "a", ["--ttl", "1"])
    b = make_run(tmp_path / "b", ["--ttl", "2"])
    code, out, _ = run(["compare", str(a), str(b)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("configuration: ")
    ttl = next(i for i, line in enumerate(lines) if line.startswith("options.ttl_s"))
    assert lines[ttl].split() == ["options.ttl_s", "1", "2"]
    assert ttl < lines.index("figures (B - A):")
    assert any(line.startswith("options.workload.endpoints[0].ttl_ms") for line in lines)
    warning = next(line for line in lines if line.startswith("warning:"))
    assert "options.ttl_s" in warning and "cannot be read as the strategy's effect" in warning
    assert "origin/expiry" in out  # the figures are still shown


def test_runs_that_differ_only_in_strategy_compare_without_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(tmp_path / "a", ["--strategies", "naive,lock"])
    b = make_run(tmp_path / "b", ["--strategies", "naive,lock-dc"])
    code, out, _ = run(["compare", str(a), str(b)], capsys)
    assert code == 0
    assert out.startswith("configuration: the same but for the strategies")
    assert "naive,lock " in out and "naive,lock-dc" in out and "warning" not in out
    same = make_run(tmp_path / "c", ["--strategies", "naive,lock"])
    _, out, _ = run(["compare", str(a), str(same)], capsys)
    assert out.startswith("configuration: the same in every option, seed, version and host.")


def test_an_old_run_without_manifest_still_compares(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    old = make_run(tmp_path / "old", [], manifest=False)
    new = make_run(tmp_path / "new", [])
    code, out, _ = run(["compare", str(old), str(new)], capsys)
    assert code == 0
    assert out.startswith("configuration: A has no manifest (run.json schema_version 1")
    assert "cannot be read as the strategy's effect" in out and "origin/expiry" in out


@pytest.mark.parametrize("key", ["schema_version", "manifest_version"])
def test_a_run_of_a_newer_version_names_the_version_needed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str) -> None:
    newer = make_run(tmp_path / "newer", [], **{key: 99})
    other = make_run(tmp_path / "other", [])
    code, err = run_cli(["compare", str(other), str(newer)], capsys)
    assert_bad_input(code, err, f"run.json has {key} 99; this coordinator reads up to")
    code, err = run_cli(["report", str(newer)], capsys)
    assert_bad_input(code, err, "upgrade stampede-lab")


def test_rerun_of_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["rerun", str(tmp_path / "missing")], capsys)
    assert_bad_input(code, err, "holds no run.json")
    old = make_run(tmp_path / "old", [], manifest=False)
    code, err = run_cli(["rerun", str(old)], capsys)
    assert_bad_input(code, err, f"no manifest (written before manifest_version {MANIFEST_VERSION}")
    remote = make_run(tmp_path / "remote", ["--cache-url", "redis://c/0", "--lock-url", "redis://l/0",
                                            "--broker-url", "redis://b/0", "--origin-dsn",
                                            "postgresql://db/x"])
    code, err = run_cli(["rerun", str(remote)], capsys)
    assert_bad_input(code, err, "ran on remote services")
    faulty = make_run(tmp_path / "faulty", ["--fault", "cache:kill@3"])
    code, err = run_cli(["rerun", str(faulty), "--cache-url", "redis://c/0", "--lock-url", "redis://l/0",
                         "--broker-url", "redis://b/0", "--origin-dsn", "postgresql://db/x"], capsys)
    assert_bad_input(code, err, "not allowed with remote services")


def test_flatten_and_show() -> None:
    flat = config_diff.flatten({"options": {"timing": {"lead_s": 1.5}, "strategies": [
        {"label": "naive"}, {"label": "lock"}], "workload": {"endpoints": [{"ttl_ms": 1000}]}}})
    assert flat == {"options.timing.lead_s": 1.5,
                    "options.strategies": [{"label": "naive"}, {"label": "lock"}],
                    "options.workload.endpoints[0].ttl_ms": 1000}
    assert config_diff.show(flat["options.strategies"]) == "naive,lock"
    assert config_diff.show(None) == "null" and config_diff.show(2.0) == "2"
    assert config_diff.differences({"command": ["a"], "x": 1}, {"command": ["b"], "y": 1}) == [
        ("x", 1, config_diff.ABSENT), ("y", config_diff.ABSENT, 1)]
