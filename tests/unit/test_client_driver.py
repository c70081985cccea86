"""``--client-driver``: its bad values and the combinations the asyncio driver cannot run are
refused before anything starts (exit 2, one line naming the option); the worker's task checks
the same in the trial spec it is sent (JSON only). Behind HTTP (an app tier, an HTTP cache, a
black-box service) the strategy runs in the server, not in the clients: any strategy goes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import strategies
from coordinator.cli.config_checks import check_client_driver
from coordinator.config import AppTierSettings, LaunchConfig
from coordinator.manifest import config_of, options_of
from model.http.target import HttpTarget
from model.services import ClientDriver
from model.wire import InvalidTaskArguments, TrialSpec
from tests.helpers import assert_bad_input, run_cli, trial_spec

SVC = "http://127.0.0.1:1/items/{key}"
CASES = [
    (["--client-driver", "fibers"],
     "Invalid value for '--client-driver': 'fibers' is not one of 'threads', 'asyncio'"),
    (["--client-driver", "asyncio", "--strategies", "naive,local-lock,two-level,dogpile"],
     "--client-driver: asyncio cannot run dogpile: strategy 'dogpile' is not ported to "
     "strategies.core"),
    (["--client-driver", "asyncio", "--invalidate-rate", "2"], "asyncio has no origin writer"),
    (["--client-driver", "asyncio", "--redis-client", "pooled"],
     "--redis-client pooled is the threads' shared pool"),
    (["--client-driver", "asyncio", "--strategies", "cashews"],
     "it runs in the asyncio app tier only"),
]


@pytest.mark.parametrize(("args", "says"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_driver_options_are_one_line_and_exit_2(args: list[str], says: str,
                                                     capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    code, err = run_cli(["launch", *args, "--out", str(tmp_path / "run")], capsys)
    assert_bad_input(code, err, says)
    assert not (tmp_path / "run").exists()


def test_the_environment_gives_the_driver(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAMPEDE_CLIENT_DRIVER", "asyncio")
    code, err = run_cli(["launch", "--strategies", "dogpile", "--out", str(tmp_path / "r")],
                        capsys)
    assert_bad_input(code, err, "asyncio cannot run dogpile")


def _json(**changes: Any) -> dict[str, Any]:
    return {**trial_spec(10, 1.0).to_json(), **changes}


def test_the_task_reads_the_driver_and_defaults_to_threads() -> None:
    spec = _json()
    assert TrialSpec.from_json(spec).client_driver == "threads"
    del spec["client_driver"]  # a coordinator from before the option
    assert TrialSpec.from_json(spec).client_driver == "threads"
    for name in ("naive", "lock", "lock-dc", "xfetch", "swr", "lease", "local-lock",
                 "two-level"):
        assert TrialSpec.from_json(_json(client_driver="asyncio", strategy=name)).client_driver \
            == "asyncio"


@pytest.mark.parametrize(("changes", "says"), [
    ({"client_driver": "fibers"}, "client_driver 'fibers' is not one of threads|asyncio"),
    ({"client_driver": 1}, "client_driver must be str, got int"),
    ({"client_driver": None}, "client_driver must be str, got NoneType"),
    ({"client_driver": "asyncio", "strategy": "dogpile"},
     "client_driver asyncio: strategy 'dogpile' is not ported"),
    ({"client_driver": "asyncio", "workload": {**_json()["workload"]} or None}, None),
], ids=["unknown", "int", "null", "not-ported", "ok"])
def test_the_task_refuses_what_the_driver_cannot_run(changes: dict[str, Any],
                                                     says: str | None) -> None:
    spec = _json(**{k: v for k, v in changes.items() if v is not None or k == "client_driver"})
    if says is None:
        TrialSpec.from_json(spec)
        return
    with pytest.raises(InvalidTaskArguments, match=says.replace("|", r"\|")):
        TrialSpec.from_json(spec)


def test_the_driver_is_recorded_and_read_back(tmp_path: Path) -> None:
    config = LaunchConfig(workers=1, clients=2, strategies=(strategies.parse("naive"),), ttl_s=1,
                          seconds=2, repeat=1, out=tmp_path, client_driver=ClientDriver.ASYNCIO)
    options = options_of(config)
    assert options["client_driver"] == "asyncio"
    assert config_of(options, tmp_path, None).client_driver is ClientDriver.ASYNCIO
    del options["client_driver"]  # a run recorded before the option ran on threads
    assert config_of(options, tmp_path, None).client_driver is ClientDriver.THREADS


def test_behind_http_the_asyncio_clients_take_any_strategy(tmp_path: Path) -> None:
    """The strategy runs in the app tier (or nginx, Varnish, a service): the clients only GET."""
    http = HttpTarget.parse(SVC)
    spec = _json(client_driver="asyncio", strategy="dogpile", http=http.to_json())
    assert TrialSpec.from_json(spec).client_driver == "asyncio"
    with pytest.raises(InvalidTaskArguments, match="dogpile' is not ported"):
        TrialSpec.from_json({**spec, "http": None})  # in the clients: refused, as above
    for changes in ({"app": AppTierSettings(counts=(2,))}, {"http_target": http}):
        config = LaunchConfig(workers=1, clients=2, strategies=(strategies.parse("dogpile"),),
                              ttl_s=1, seconds=2, repeat=1, out=tmp_path,
                              client_driver=ClientDriver.ASYNCIO, **changes)  # type: ignore[arg-type]
        check_client_driver(config)  # no refusal
