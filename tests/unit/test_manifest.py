"""run.json's manifest: every resolved option round-trips into the same LaunchConfig (whatever
today's presets say), the command line is masked, old and newer runs say what they need."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from coordinator.cli import workload_options
from coordinator.cli.commands import cli
from coordinator.cli.launch import config_from
from coordinator.cli.rerun import config_for
from coordinator.config import LaunchConfig
from coordinator.manifest import Manifest, ManifestError, mask_argv
from coordinator.provenance import git_state
from model.services import ENV, RedisPath, Services
from results.store.schema import MANIFEST_VERSION
from tests.helpers import ROOT

SECRET = "hunter2-Pa55"
REMOTE = ["--cache-url", "redis://c/0", "--lock-url", "redis://l/0", "--broker-url", "redis://b/0",
          "--origin-dsn", "postgresql://db/x"]
NET = ["--fault", "net:delay:w1-cache=3", "--fault", "net:partition:cache-w1@2+2.5",
       "--net-control", "10.77.0.9:7000", *REMOTE]


def _config(args: list[str]) -> LaunchConfig:
    command = cli.commands["launch"]
    with command.make_context("launch", list(args)) as ctx:  # click consumes the list
        return config_from(dict(ctx.params))


def _written(config: LaunchConfig) -> dict[str, Any]:
    """run.json as a reader sees it: the manifest through JSON."""
    meta = {"manifest_version": MANIFEST_VERSION, "manifest": Manifest.of(config).to_json()}
    data: dict[str, Any] = orjson.loads(orjson.dumps(meta))
    return data


def _rebuilt(config: LaunchConfig) -> LaunchConfig:
    return Manifest.from_json(_written(config)).config(config.out, config.services)


@pytest.mark.parametrize("args", [
    [],
    ["--preset", "bypass-ramp", "--pool-size", "7"],
    ["--preset", "two-level"],
    ["--strategies", "naive:jitter=0.2,lock-dc:wake=notify,xfetch:beta=10", "--ttl", "1.5",
     "--expiry", "aligned", "--force-clock", "--worker-timeout", "9", "--fault", "cache:kill@3"],
    ["--keys", "zipf:1000:1.1", "--rate", "200", "--origin-ms", "2", "--no-seed"],
    ["--redis-client", "pooled", "--think-ms", "1"],  # a think time is closed loop only (issue 31)
    NET,
    ["--http-header", "X-Trace: 1", "--http-header", "Accept: text/plain", "--http-insecure",
     "--http-connect-ms", "250", "--http-read-ms", "900"],
])
def test_every_resolved_option_rebuilds_the_same_config(args: list[str]) -> None:
    config = _config(["--out", "x", *args])
    rebuilt = _rebuilt(config)
    assert rebuilt == replace(config, command=())  # the command line is provenance, not an option
    assert Manifest.of(rebuilt).options == _written(config)["manifest"]["options"]


def test_the_redis_client_path_is_recorded_and_older_runs_rerun_pooled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _config(["--out", "x"]).redis_client is RedisPath.LEAN
    monkeypatch.setenv("STAMPEDE_REDIS_CLIENT", "pooled")
    config = _config(["--out", "x"])
    assert config.redis_client is RedisPath.POOLED
    written = _written(replace(config, redis_client=RedisPath.LEAN))
    del written["manifest"]["options"]["redis_client"]  # a run recorded before the option
    assert Manifest.from_json(written).config(Path("y"), None).redis_client is RedisPath.POOLED


def test_the_net_control_is_recorded_and_a_rerun_may_give_another() -> None:
    config = _config(["--out", "x", *NET])
    written = _written(config)
    assert written["manifest"]["options"]["net_control"] == "10.77.0.9:7000"
    meta = {**written, "run_id": "a", "services": {}}
    manifest = Manifest.from_json(written)
    given: dict[str, Any] = {"out": Path("y"), "repeat": None, "net_control": None,
                             **{name: getattr(config.services, name) for name in ENV}}
    assert config_for("a", meta, manifest, given).net_control == "10.77.0.9:7000"  # as recorded
    moved = config_for("a", meta, manifest, {**given, "net_control": "10.77.0.3:7001"})
    assert moved.net_control == "10.77.0.3:7001" and moved.faults == config.faults


def test_a_run_recorded_before_net_control_reruns_without_it() -> None:
    written = _written(_config(["--out", "x"]))
    del written["manifest"]["options"]["net_control"]
    assert Manifest.from_json(written).config(Path("y"), None).net_control is None


def test_a_preset_run_reruns_as_it_was_after_the_preset_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["--preset", "jitter", "--ttl", "2", "--seconds", "5", "--scale", "20000",
            "--clients", "10", "--out", "x"]
    original = _config(args)
    written = _written(original)
    assert written["manifest"]["options"]["preset"] == "jitter"
    assert written["manifest"]["options"]["workload"]["endpoints"][0]["keys"]["count"] == 100
    changed = {**workload_options.PRESETS["jitter"], "keys": "many:5", "workers": 3,
               "strategies": "naive"}
    monkeypatch.setitem(workload_options.PRESETS, "jitter", changed)
    today = _config(args)
    assert today.workers == 3 and len(today.keys) == 5  # the preset did change
    again = Manifest.from_json(written).config(Path("y"), None)
    assert again == replace(original, out=Path("y"), command=())
    assert again.workers == 2 and len(again.keys) == 100
    assert [s.label for s in again.strategies] == ["naive", "naive:jitter=0.2"]


def test_rerun_may_change_the_repeats_only_when_asked() -> None:
    config = _config(["--out", "x", "--repeat", "2"])
    manifest = Manifest.from_json(_written(config))
    assert manifest.config(Path("x"), None).repeat == 2
    assert manifest.config(Path("x"), None, repeat=5).repeat == 5


def test_the_command_line_is_recorded_with_credentials_masked() -> None:
    services = Services(f"redis://:{SECRET}@cache:6379/0", "redis://locks:6379/0",
                        f"redis://user:{SECRET}@broker/0", f"postgresql://pg:{SECRET}@db/x")
    argv = ["coordinator", "launch", "--cache-url", services.cache_url,
            f"--broker-url={services.broker_url}", "--origin-dsn",
            f"postgresql://pg@db/x?password={SECRET}&sslmode=require", "--note", SECRET]
    masked = mask_argv(argv, services)
    assert SECRET not in " ".join(masked)
    assert masked[3] == "redis://:***@cache:6379/0"
    assert masked[4] == "--broker-url=redis://user:***@broker/0"
    assert masked[6] == "postgresql://pg@db/x?password=***&sslmode=require"
    assert masked[:3] == ("coordinator", "launch", "--cache-url")


def test_the_launch_config_records_the_masked_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"redis://:{SECRET}@cache:6379/0"
    monkeypatch.setattr("sys.argv", ["coordinator", "launch", "--out", "x", "--cache-url", url])
    command = cli.commands["launch"]
    with command.make_context("launch", ["--out", "x", "--cache-url", url, "--lock-url", url,
                                         "--broker-url", url, "--origin-dsn", "postgresql://db/x"]
                              ) as ctx:
        config = config_from(dict(ctx.params))
    text = orjson.dumps(_written(config)).decode()
    assert SECRET not in text and "redis://:***@cache:6379/0" in text


def test_a_run_without_a_manifest_says_which_version_is_needed() -> None:
    with pytest.raises(ManifestError, match=f"no manifest .*needs manifest_version {MANIFEST_VERSION}"):
        Manifest.from_json({"schema_version": 1, "spec": {}})
    with pytest.raises(ManifestError, match="upgrade"):
        Manifest.from_json({"manifest_version": MANIFEST_VERSION + 1, "manifest": {"options": {}}})
    with pytest.raises(ManifestError, match="do not make a run"):
        Manifest.from_json({"manifest_version": 1, "manifest": {"options": {"workers": 2}}}
                           ).config(Path("x"), None)


def test_git_commit_of_a_checkout_and_none_elsewhere(tmp_path: Path) -> None:
    assert git_state(tmp_path) is None
    if (ROOT / ".git").exists():
        state = git_state(ROOT)
        assert state is not None and len(state["commit"]) == 40
        assert isinstance(state["dirty"], bool)


def test_the_http_clients_options_are_recorded_with_credential_headers_masked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["--out", "x", "--http-header", f"Authorization: Bearer {SECRET}", "--http-header",
            f"X-Api-Key:{SECRET}", "--http-header", "X-Trace: 7"]
    monkeypatch.setattr("sys.argv", ["coordinator", "launch", *args])
    config = _config(args)
    assert config.http.headers == (("Authorization", f"Bearer {SECRET}"),
                                   ("X-Api-Key", SECRET), ("X-Trace", "7"))
    written = _written(config)
    assert SECRET not in orjson.dumps(written).decode()
    assert written["manifest"]["options"]["http"]["headers"] == [
        ["Authorization", "***"], ["X-Api-Key", "***"], ["X-Trace", "7"]]
    assert "Authorization: ***" in written["manifest"]["command"]
    del written["manifest"]["options"]["http"]  # a run recorded before the options: the defaults
    rebuilt = Manifest.from_json(written).config(Path("y"), None).http
    assert rebuilt.headers == () and rebuilt.verify and rebuilt.read_ms == 5000.0
