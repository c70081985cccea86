"""The app tier's pure pieces: the trial path, the spec an app process accepts, sender numbers,
the HTTP cache's events from its own word, trial labels, and the launch's refusals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import strategies
from app.__main__ import server_argv
from coordinator.trials.plan import Schedule, plan_trial
from model import apptier
from model.apptier import APP_ENV, AppTrialSpec
from model.wire import InvalidTaskArguments
from results.figures.expiry_reports import Source
from results.figures.front_events import front_events
from strategies.fronts import is_front
from tests.helpers import assert_bad_input, run_cli, trial_spec

S = 1_000_000_000


def test_a_trial_path_names_run_trial_and_key_and_nothing_else_parses() -> None:
    path = apptier.trial_path("20261201-120000", 7) + "orders:0"
    assert apptier.parse_path(path) == ("20261201-120000", 7, "orders:0")
    for other in ("/stampede/floor", "/t/run/x/key", "/t/run/1/", "/t/a b/1/k", "/items/k"):
        assert apptier.parse_path(other) is None


def _spec_json(**changes: Any) -> dict[str, Any]:
    spec = AppTrialSpec(trial_spec(4, 1.0), {"app@h:1": 2, "app@h:2": 3}, threads=8)
    return {**spec.to_json(), **changes}


def test_an_app_trial_spec_travels_as_json_and_comes_back_equal() -> None:
    data = _spec_json(front="nginx")
    assert AppTrialSpec.from_json(data).to_json() == data


@pytest.mark.parametrize(("changes", "says"), [
    ({"senders": {"app@h:1": "2"}}, "senders must map"),
    ({"senders": {"app@h:1": True}}, "senders must map"),
    ({"front": "squid"}, "front 'squid'"),
    ({"threads": 0}, "threads must be"),
    ({"pickle": 1}, "unknown fields pickle"),
])
def test_an_app_process_refuses_a_spec_that_is_not_one(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidTaskArguments, match=says):
        AppTrialSpec.from_json(_spec_json(**changes))


def test_the_workers_trial_inside_is_checked_as_a_worker_checks_it() -> None:
    bad = _spec_json()
    bad["trial"] = {**bad["trial"], "clients": 0}
    with pytest.raises(InvalidTaskArguments, match="clients=0"):
        AppTrialSpec.from_json(bad)


def test_app_processes_are_numbered_after_the_workers_in_a_stable_order() -> None:
    assert apptier.senders_after(3, ["app@b:9", "app@a:1"]) == {"app@a:1": 3, "app@b:9": 4}


def test_an_http_caches_signs_of_one_key_make_one_event_until_half_a_ttl_passes() -> None:
    ttl = 2 * S
    keys = ["k"] * 5 + ["j"]
    starts = [10 * S, 10 * S + 5_000_000, int(10.9 * S), 12 * S, int(12.2 * S), 10 * S]
    events = front_events(keys, starts, ttl)
    assert [(e.key, e.at_ns) for e in events] == [("j", 10 * S), ("k", 10 * S), ("k", 12 * S)]
    assert {e.source for e in events} == {Source.FRONT}


def test_no_sign_no_event() -> None:
    assert front_events([], [], 2 * S) == []


def test_nginx_and_varnish_are_fronts_and_our_strategies_are_not() -> None:
    assert is_front("nginx") and is_front("varnish")
    assert not any(is_front(n) for n in ("naive", "lock-dc", "local-lock"))
    spec = strategies.parse("nginx:lock=on,use_stale=updating,background_update=on")
    assert spec.label == "nginx:background_update=true,lock=true,use_stale=updating"


def test_a_trials_label_carries_its_variant_when_the_run_varies_one() -> None:
    schedule = Schedule(2, 10, 1.0, 5.0, 1.0, ("orders:0",))
    plan = plan_trial(schedule, 1, strategies.parse("lock-dc"), 1, 0, 1.0)
    assert plan.label == "lock-dc"
    assert replace(plan, variant="2 apps").label == "lock-dc @2 apps"


APP_CASES = [
    (["--strategies", "nginx"], "--app-servers N"),
    (["--strategies", "naive", "--app-servers", "999"], "each count must be in [1, 256]"),
    (["--strategies", "naive", "--app-servers", "2,2"], "none twice"),
    (["--strategies", "naive", "--app-servers", "two"], "is not N or a list"),
    (["--strategies", "naive", "--app-servers", "100"], "more than the embedded stack runs"),
    (["--strategies", "varnish", "--app-servers", "2", "--ttl", "1.5"], "whole number of seconds"),
    (["--app-url", "http://127.0.0.1:1"], "needs --app-servers"),
    (["--app-servers", "2", "--app-url", "http://127.0.0.1:1"], "remote app tier"),
    (["--app-servers", "2", "--app-url", "ftp://x"], "is not http(s)://HOST"),
    (["--app-servers", "2", "--cache-url", "redis://127.0.0.1:1/0", "--lock-url",
      "redis://127.0.0.1:1/0", "--broker-url", "redis://127.0.0.1:1/0", "--origin-dsn",
      "postgresql://u@127.0.0.1:1/d"], "give the app tier's URL"),
    (["--app-servers", "1,2", "--app-url", "http://127.0.0.1:1", "--cache-url",
      "redis://127.0.0.1:1/0", "--lock-url", "redis://127.0.0.1:1/0", "--broker-url",
      "redis://127.0.0.1:1/0", "--origin-dsn", "postgresql://u@127.0.0.1:1/d"],
     "needs the embedded stack"),
    (["--app-servers", "2", "--invalidate-rate", "2"], "not measured through the app tier"),
    (["--app-servers", "2", "--app-kind", "tornado"], "'tornado' is not one of 'wsgi', 'asgi'"),
    (["--strategies", "naive", "--app-kind", "asgi"], "give --app-servers N too"),
    (["--strategies", "cashews", "--app-servers", "2"], "runs in the asyncio app tier only"),
    (["--strategies", "lock,cashews"], "--app-servers N --app-kind asgi"),
    (["--strategies", "dogpile", "--app-servers", "2", "--app-kind", "asgi"],
     "dogpile is not ported to strategies.core"),
    (["--strategies", "lock,redis-py-lock", "--app-servers", "2", "--app-kind",
      "asgi"], "is not ported to strategies.core"),
    (["--strategies", "nginx", "--app-servers", "2", "--app-kind", "asgi"],
     "no HTTP cache in front"),
]


@pytest.mark.parametrize(("args", "says"), APP_CASES)
def test_app_tier_bad_input(args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["launch", *args], capsys)
    assert_bad_input(code, err, says)


def test_the_app_kind_picks_the_server_and_a_bad_one_is_refused() -> None:
    base = {APP_ENV["bind"]: "127.0.0.1:8123", APP_ENV["processes"]: "3"}
    wsgi = server_argv(base)
    asgi = server_argv({**base, APP_ENV["kind"]: "asgi"})
    assert wsgi[2] == "granian" and "app.serve:application" in wsgi
    assert asgi[2] == "uvicorn" and asgi[-1] == "app.asgi:application"
    for flag, value in (("--loop", "uvloop"), ("--http", "httptools"), ("--workers", "3"),
                        ("--port", "8123"), ("--lifespan", "on")):
        assert asgi[asgi.index(flag) + 1] == value
    with pytest.raises(ValueError, match=r"'tornado' is not one of wsgi\|asgi"):
        server_argv({**base, APP_ENV["kind"]: "tornado"})
