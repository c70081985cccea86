"""Every bad value of every option: exit code 2 and one line naming the option and what is allowed.

Nothing is started and nothing is written; the cases that need real services to be refused (an
unreachable or remote service) are in tests/integration/test_bad_remote_input.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import assert_bad_input, coordinator, run_cli

# (argv after ``launch``, text the one line must hold)
DSN = "postgresql://u@127.0.0.1:1/d"
URL = "http://127.0.0.1:1/items/{key}"
# your own origin (issue 27): each refused before any service is asked
OWN_ORIGIN_CASES = [
    (["--origin-sql", "UPDATE t SET x = 1 WHERE id = %s", "--origin-dsn", DSN, "--keys-file", "k"],
     "not a SELECT (it begins with UPDATE)"),
    (["--origin-sql", "SELECT 1; DROP TABLE t", "--origin-dsn", DSN, "--keys-file", "k"],
     "one statement"),
    (["--origin-sql", "", "--origin-dsn", DSN, "--keys-file", "k"], "the statement is empty"),
    (["--origin-sql", "@/nonexistent/q.sql"], "cannot read /nonexistent/q.sql"),
    (["--origin-sql", "SELECT %s", "--keys-file", "k"], "give --origin-dsn"),
    (["--origin-sql", "SELECT %s", "--origin-dsn", DSN], "exactly one of --keys-sql"),
    (["--origin-sql", "SELECT %s", "--origin-dsn", DSN, "--keys-file", "k", "--keys-sql", "SELECT 1"],
     "exactly one of --keys-sql"),
    (["--keys-sql", "SELECT 1"], "needs your own origin"),
    (["--keys-file", "k"], "needs your own origin"),
    (["--origin-sql", "SELECT %s", "--origin-dsn", DSN, "--keys-file", "k", "--write-sql",
      "UPDATE t SET x = 1 WHERE id = %s"], "writes only at --invalidate-rate"),
    (["--origin-sql", "SELECT %s", "--origin-dsn", DSN, "--keys-file", "k", "--invalidate-rate", "2"],
     "written only by --write-sql"),
    (["--origin-sql", "SELECT %s", "--origin-dsn", DSN, "--keys-file", "k", "--seed"],
     "never seeded"),
    (["--origin-sql", "SELECT %s", "--origin-dsn", DSN, "--keys-file", "k", "--mix", "shop"],
     "--mix"),
    (["--origin-url", "http://127.0.0.1:1/items", "--keys-file", "k"], "must hold {key} once"),
    (["--origin-url", "ftp://h/{key}", "--keys-file", "k"], "not an http:// or https:// URL"),
    (["--origin-url", URL, "--origin-sql", "SELECT %s"], "not both"),
    (["--origin-url", URL, "--keys-sql", "SELECT 1"], "with --origin-url give --keys-file"),
    (["--origin-url", URL, "--keys-file", "k", "--origin-counter-url", "http://h/metrics"],
     "together"),
    # issue 31: a counter's name with no page to read it from, with any origin
    (["--origin-counter-name", "calls_total"], "--origin-counter-name"),
    (["--origin-url", URL, "--keys-file", "k", "--origin-counter-name", "calls_total"],
     "names a counter on --origin-counter-url"),
    (["--origin-sql", "SELECT %s", "--origin-dsn", DSN, "--keys-file", "k", "--origin-counter-name",
      "calls_total"], "names a counter on --origin-counter-url"),
    (["--origin-url", URL, "--keys-file", "k", "--fault", "origin:lock@3+1"],
     "not a process of the embedded stack"),
    (["--origin-sql", "SELECT %s", "--origin-dsn", DSN, "--keys-file", "k", "--fault",
      "origin:exhaust@3+1"], "not a process of the embedded stack"),
    (["--origin-url", URL, "--keys-file", "k", "--http-read-ms", "0"], "--http-read-ms"),
    # the HTTP clients' headers (issue 32)
    (["--http-header", "no colon here"], "--http-header"),
    (["--http-header", "Bad Name: v"], "is not a token"),
    (["--http-header", "Content-Length: 5"], "the client sets it itself"),
    (["--http-header", "X-A: v\x01"], "control character"),
]
# your running service as a black box (issue 33): each refused before any service is asked
SVC = "http://127.0.0.1:1/items/{key}"
BOX = ["--service-url", SVC, "--keys-file", "k"]
COUNTED = ["--origin-counter-url", "http://127.0.0.1:1/metrics", "--origin-counter-name", "c"]
BLACK_BOX_CASES = [
    (["--service-url", "http://127.0.0.1:1/items", "--keys-file", "k", *COUNTED],
     "Invalid value for --service-url: 'http://127.0.0.1:1/items' must hold {key} once"),
    ([*BOX, *COUNTED, "--strategies", "naive"], "--strategies: the service's defence is its own"),
    ([*BOX, *COUNTED, "--expiry", "scheduled-delete"], "--expiry: scheduled-delete deletes the keys"
                                                       " on the service's cache: give --service-cache-url"),
    (BOX, "--service-url: name where its origin calls are counted: --origin-dsn with "
          "--origin-statement (pg_stat_statements), or --origin-counter-url"),
    ([*BOX, "--origin-statement", "SELECT 1"], "--origin-statement: is read from pg_stat_statements"),
    (["--expiry", "scheduled-delete"], "it needs --service-url and --service-cache-url"),
    (["--origin-statement", "SELECT 1"], "--origin-statement: belongs to --service-url"),
    ([*BOX, *COUNTED, "--origin-url", URL], "--origin-url: the service is measured as it is"),
    ([*BOX, *COUNTED, "--service-cache-url", "redis://127.0.0.1:1/0", "--service-cache-key", "k"],
     "--service-cache-key: 'k' must hold {key} once"),
    ([*BOX, *COUNTED, "--app-servers", "2"], "--app-servers"),
]
LAUNCH_CASES = [
    (["--workers", "0"], "--workers"), (["--workers", "-3"], "--workers"),
    (["--workers", "many"], "'many' is not a valid integer"),
    (["--clients", "0"], "--clients"), (["--repeat", "0"], "--repeat"),
    (["--seconds", "0"], "--seconds"), (["--seconds", "-1"], "--seconds"),
    (["--seconds", "ten"], "'ten' is not a valid float"), (["--seconds", "2"], "--seconds"),
    (["--ttl", "0"], "--ttl"), (["--ttl", "-1"], "--ttl"), (["--ttl", "x"], "--ttl"),
    (["--scale", "0"], "--scale"), (["--pool-size", "0"], "--pool-size"),
    (["--origin-ms", "-1"], "--origin-ms"),
    (["--target-width", "0"], "--target-width"), (["--target-width", "-5%"], "above 0"),
    (["--target-width", "narrow"], "'narrow' is not a percentage"),
    (["--redis-client", "hiredis"], "--redis-client"),
    (["--strategies", "bogus"], "--strategies"), (["--strategies", "naive,nope"], "--strategies"),
    (["--strategies", "lock:nope=1"], "nope"),
    (["--strategies", "lock:poll_ms=0"], "poll_ms"),
    (["--strategies", ""], "no strategy given"),
    (["--clients", "2", "--workers", "3"], "--clients 2 is fewer than --workers 3"),
    (["--cache-url", "http://x"], "--cache-url"),
    (["--origin-dsn", "redis://x"], "--origin-dsn"),
    (["--broker-url", "redis://127.0.0.1:99999/0"], "--broker-url"),
    # a service given beside the embedded stack is asked first (0: once), before anything starts
    (["--cache-url", "redis://127.0.0.1:1/0", "--service-timeout", "0"], "--cache-url"),
    (["--fault", "nonsense"], "TARGET:ACTION@SECONDS"),
    (["--fault", "db:kill@1"], "allowed: lock-store, cache, origin, worker, broker"),
    (["--fault", "cache:melt@1"], "allowed: kill, pause"),
    (["--fault", "cache:kill@-2"], ">= 0"),
    (["--fault", "cache:kill@30", "--seconds", "5"], "not inside the trial"),
    (["--fault", "broker:restart@1", "--seconds", "5"], "between trials"),
    (["--fault", "worker:kill@1+2"], "takes no +DURATION"),
    (["--service-timeout", "soon"], "--service-timeout"), (["--service-timeout", "-1"], "0<=x<=3600"),
    (["--net-control", "nowhere"], "--net-control"),  # malformed, even without a net: fault
    # the libraries (issue 24): their knobs, memcached's TTLs, their own expiry, their cache
    (["--strategies", "redis-py-lock:sleep=0"], "sleep must be > 0"),
    (["--strategies", "python-redis-lock:auto_renewal=true"], "auto_renewal needs an expire"),
    # issue 31: the library keeps int(expire): 0.5 became EX 0 (Redis refused it mid-run)
    (["--strategies", "python-redis-lock:expire=0.5"], "whole number of seconds >= 1"),
    (["--strategies", "python-redis-lock:expire=1.5"], "whole number of seconds >= 1"),
    (["--strategies", "python-redis-lock:expire=0"], "whole number of seconds >= 1"),
    (["--strategies", "python-redis-lock:expire=-2"], "whole number of seconds >= 1"),
    # issue 31: a think time with an open loop was ignored without a word
    (["--think", "constant:5", "--rate", "100"], "--think"),
    (["--think-ms", "5", "--rate", "100"], "--think-ms"),
    (["--think-ms", "5", "--preset", "bypass-ramp"], "from --preset bypass-ramp"),
    (["--think", "uniform:1:3", "--keys-trace", "trace.csv", "--rate", "10"], "--think"),
    (["--strategies", "dogpile:distributed_lock=maybe"], "is not a boolean"),
    (["--strategies", "meta-memcache:miss_retries=0"], "miss_retries"),
    (["--strategies", "meta-memcache", "--ttl", "1.5"], "whole seconds"),
    (["--strategies", "dogpile", "--expiry", "aligned"], "sets its values' expiry itself"),
    (["--memcache-url", "redis://127.0.0.1:1/0"], "--memcache-url"),
    (["--memcache-url", "memcache://127.0.0.1:1", "--service-timeout", "0"], "--memcache-url"),
    (["--strategies", "meta-memcache", "--cache-url", "redis://127.0.0.1:1/0", "--lock-url",
      "redis://127.0.0.1:1/1", "--broker-url", "redis://127.0.0.1:1/2", "--origin-dsn",
      "postgresql://u@127.0.0.1:1/d"], "keeps its values on memcached"),
    (["--strategies", "naive", "--cache-url", "memcache://127.0.0.1:1", "--lock-url",
      "redis://127.0.0.1:1/1", "--broker-url", "redis://127.0.0.1:1/2", "--origin-dsn",
      "postgresql://u@127.0.0.1:1/d"], "keeps its values on redis"),
]


@pytest.mark.parametrize(("args", "says"), LAUNCH_CASES + OWN_ORIGIN_CASES + BLACK_BOX_CASES)
def test_launch_bad_values(args: list[str], says: str, capsys: pytest.CaptureFixture[str],
                           tmp_path: Path) -> None:
    code, err = run_cli(["launch", "--out", str(tmp_path / "run"), *args], capsys)
    assert_bad_input(code, err, says)
    assert not (tmp_path / "run").exists()  # nothing started, nothing written


def test_service_timeout_from_the_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAMPEDE_SERVICE_TIMEOUT", "two minutes")
    code, err = run_cli(["launch", "--out", str(tmp_path / "run")], capsys)
    assert_bad_input(code, err, "--service-timeout")


def test_out_holds_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run.json").write_text("{}")
    code, err = run_cli(["launch", "--out", str(tmp_path)], capsys)
    assert_bad_input(code, err, "--out")
    assert (tmp_path / "run.json").read_text() == "{}"  # never overwritten


def test_out_not_writable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, err = run_cli(["launch", "--out", str(blocker / "run")], capsys)
    assert_bad_input(code, err, "--out")


def test_report_bad_target_width(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["report", str(tmp_path), "--target-width", "1e9"], capsys)
    assert_bad_input(code, err, "--target-width")


def test_report_without_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["report", str(tmp_path)], capsys)
    assert_bad_input(code, err, "RUN_DIR")


def test_an_existing_run_is_never_overwritten(tmp_path: Path) -> None:
    """The same refusal from ``python -m coordinator`` in its own process: exit 2, one line."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "run.json").write_text("{}")
    done = coordinator("launch", "--out", str(tmp_path / "r"), timeout=60)
    assert_bad_input(done.returncode, done.stderr, "--out")
    assert (tmp_path / "r" / "run.json").read_text() == "{}"


def launch_context(*args: str) -> tuple[object, dict[str, object]]:
    """The click context and options of ``coordinator launch ARGS``, parsed but not run."""
    import click

    from coordinator.cli import commands

    command = commands.launch_command
    ctx = command.make_context("launch", list(args))
    assert isinstance(ctx, click.Context)
    return ctx, dict(ctx.params)


@pytest.mark.parametrize("args", [
    ["--preset", "two-level", "--rate", "100"],  # the preset's --think-ms 1 yields to a typed --rate
    ["--preset", "cache-down", "--rate", "50"],
    ["--think-ms", "5"], ["--think", "constant:5"], ["--rate", "100"],
])
def test_think_and_rate_that_can_run(args: list[str]) -> None:
    from coordinator.cli.traffic_options import check_think_open_loop
    from coordinator.cli.workload_options import apply_preset

    ctx, options = launch_context(*args)
    with ctx:  # type: ignore[attr-defined]
        check_think_open_loop(ctx, apply_preset(ctx, options))  # type: ignore[arg-type]


@pytest.mark.parametrize("expire", ["1", "2", "30", "-1"])
def test_python_redis_lock_whole_seconds_pass(expire: str) -> None:
    import strategies

    spec = strategies.parse(f"python-redis-lock:expire={expire}")
    assert spec.params["expire"] == float(expire)
