"""Your own origin, the pure parts: statement and URL checks, placeholders, the key set over
named keys, the workload's wire form, which services a launch starts, the counter's selector."""

from __future__ import annotations

import pytest

from coordinator.cli.given import given_from, services_from
from coordinator.origin.check import parse_selector
from coordinator.origin.user import Counter, check_keys, http_check, key_set
from model.custom import (
    CustomOrigin,
    InvalidOrigin,
    OriginKind,
    check_statement,
    check_url_template,
    raw_placeholders,
)
from model.workload import Endpoint, InvalidWorkload, KeyKind, KeySet, Query, Workload


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t WHERE id = %s", "  (select 1 where %s is not null)", "WITH x AS (SELECT 1) "
    "SELECT * FROM x, t WHERE t.id = %s", "-- a comment\nSELECT %s", "/* x */ VALUES (%s)",
    "SELECT ';' FROM t WHERE id = %s;",
])
def test_a_select_passes(sql: str) -> None:
    assert check_statement("--origin-sql", sql)


@pytest.mark.parametrize(("sql", "says"), [
    ("DELETE FROM t WHERE id = %s", "begins with DELETE"),
    ("CALL p(%s)", "begins with CALL"),
    ("SELECT 1; SELECT 2", "one statement"),
    ("   ", "empty"),
])
def test_anything_else_is_refused(sql: str, says: str) -> None:
    with pytest.raises(InvalidOrigin, match=says):
        check_statement("--origin-sql", sql)


def test_allow_writes_lets_another_statement_through() -> None:
    assert CustomOrigin(OriginKind.SQL, "CALL p(%s)", writes_allowed=True).read_only is False
    assert CustomOrigin(OriginKind.SQL, "SELECT %s").read_only is True
    assert CustomOrigin(OriginKind.SQL, "SELECT %s", write="UPDATE t SET a = 1").read_only is False


def test_placeholders_either_form() -> None:
    assert raw_placeholders("SELECT * FROM t WHERE id = $1")
    assert not raw_placeholders("SELECT * FROM t WHERE id = %s")
    assert not raw_placeholders("SELECT '$1' FROM t WHERE id = %s")
    assert not raw_placeholders("SELECT * FROM t WHERE id = $10")


@pytest.mark.parametrize(("url", "says"), [
    ("http://h:1/items", "{key} once"), ("http://h:1/{key}/{key}", "{key} once"),
    ("http://{key}:1/x", "in its path or query"), ("ftp://h/{key}", "http://"),
    ("http://h:1/{id}/{key}", "brace other than {key}"), ("http:///{key}", "with a host"),
])
def test_a_url_template_holds_key_once(url: str, says: str) -> None:
    with pytest.raises(InvalidOrigin, match=says.replace("{", r"\{").replace("}", r"\}")):
        check_url_template(url)


def test_the_key_set_over_named_keys_is_every_key_or_the_first_k() -> None:
    assert key_set(None, 5, "--keys-file") == KeySet(KeyKind.MANY, 5)
    assert key_set(None, 1, "--keys-file") == KeySet()
    assert key_set(KeySet(KeyKind.ZIPF, 3, 1.1), 5, "--keys-file").count == 3
    with pytest.raises(InvalidOrigin, match="asks for 6 keys; --keys-file gives 5"):
        key_set(KeySet(KeyKind.MANY, 6), 5, "--keys-file")
    assert check_keys("--keys-file", ["a", "b", "a"]) == ["a", "b"]
    with pytest.raises(InvalidOrigin, match="1 to 200 characters"):
        check_keys("--keys-file", ["x" * 201])


def test_the_workload_carries_the_origin_and_the_keys_on_the_wire() -> None:
    origin = CustomOrigin(OriginKind.HTTP, "http://h:1/i/{key}", read_timeout_s=0.2)
    ep = Endpoint("http", Query.HTTP, KeySet(KeyKind.ZIPF, 2, 1.0), 1000, key_list=("9", "4", "1"))
    workload = Workload((ep,), origin=origin)
    again = Workload.from_json(workload.to_json())
    assert again == workload and again.endpoints[0].key_names() == ["9", "4"]
    old = workload.to_json()
    del old["origin"]  # a run recorded before issue 27
    assert Workload.from_json(old).origin.builtin
    bad = {**workload.to_json(), "origin": {**origin.to_json(), "read": "http://h/none"}}
    with pytest.raises(InvalidWorkload, match="--origin-url"):
        Workload.from_json(bad)


def test_which_services_a_launch_starts() -> None:
    none: dict[str, str | None] = {"cache_url": None, "lock_url": None, "broker_url": None,
                                   "origin_dsn": None}
    assert given_from(none) is None and services_from(none) is None
    dsn = {**none, "origin_dsn": "postgresql://u@h/d"}
    assert services_from(dsn) is None  # --origin-dsn alone: the rest embedded
    given = given_from(dsn)
    assert given is not None and given.origin_dsn and not given.cache_url
    three = {**none, "cache_url": "redis://c", "lock_url": "redis://l", "broker_url": "redis://b"}
    assert services_from(three) is None  # no origin: the stack starts PostgreSQL
    remote = services_from(three, http=True)  # an HTTP origin needs no DSN: remote mode
    assert remote is not None and remote.origin_dsn == ""
    assert services_from({**three, "origin_dsn": "postgresql://u@h/d"}) is not None


def test_an_http_origin_without_a_counter_is_unchecked_never_ok() -> None:
    check = http_check(Counter())
    assert check.read() is None
    columns = check.columns(None, None, 10)
    assert columns["db_check"] == "unchecked" and columns["db_calls"] == -1
    assert not columns["db_calls_match"] and "--origin-counter-url" in columns["db_check_detail"]


def test_a_counter_selector() -> None:
    assert parse_selector('hits_total{route="items", code="200"}') == (
        "hits_total", {"route": "items", "code": "200"})
    assert parse_selector("hits") == ("hits", {})
    with pytest.raises(ValueError, match="labels are written"):
        parse_selector("hits{route=items}")


def test_credentials_in_your_urls_are_masked_in_run_json_and_the_command() -> None:
    from coordinator.manifest import mask_argv, workload_json
    origin = CustomOrigin(OriginKind.HTTP, "http://svc:Secr3t-27@h:1/items/{key}")
    ep = Endpoint("http", Query.HTTP, KeySet(), 1000, key_list=("1",))
    written = workload_json(Workload((ep,), origin=origin))
    assert written["origin"]["read"] == "http://svc:***@h:1/items/{key}"
    argv = mask_argv(["coordinator", "launch", "--origin-url", origin.read, "--origin-counter-url",
                      "http://m:Secr3t-27@h:2/metrics"], None)
    assert "Secr3t-27" not in " ".join(argv) and "http://svc:***@h:1/items/{key}" in argv
