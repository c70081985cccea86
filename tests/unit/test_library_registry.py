"""The libraries come in through the entry-point group, each imported only when named; a
library that is not installed is one clear line (exit 2), never a traceback."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import strategies
from strategies import registry
from strategies.base import CacheServer
from tests.helpers import assert_bad_input, run_cli

LIBRARIES = {"redis-py-lock": CacheServer.REDIS, "python-redis-lock": CacheServer.REDIS,
             "dogpile": CacheServer.REDIS, "meta-memcache": CacheServer.MEMCACHED}


def test_the_libraries_are_strategies_with_their_cache_server() -> None:
    assert set(LIBRARIES) <= set(strategies.names())
    for name, kind in LIBRARIES.items():
        assert strategies.parse(name).cache_server is kind


def test_library_parameters_default_to_the_library_s_own() -> None:
    """The defaults that matter (issue 24's table), as the specs fill them in."""
    assert strategies.parse("redis-py-lock").params["sleep"] == 0.1
    assert strategies.parse("redis-py-lock").params["blocking_timeout"] == -1.0  # None
    assert strategies.parse("dogpile").params["lock_sleep"] == 0.1
    assert strategies.parse("dogpile").params["distributed_lock"] is False
    assert strategies.parse("dogpile").params["thread_local_lock"] is True
    lease = strategies.parse("meta-memcache").params
    assert (lease["miss_retries"], lease["miss_retry_wait"], lease["wait_backoff_factor"]) == \
        (3, 1.0, 1.2)
    assert strategies.parse("dogpile:distributed_lock=true").label == "dogpile:distributed_lock=true"


@pytest.fixture
def uninstalled(monkeypatch: pytest.MonkeyPatch) -> str:
    """A strategy whose entry point names a module that is not installed."""
    dist = metadata.distribution("stampede-lab")
    point = metadata.EntryPoint("nowhere-lock", "no_such_library_anywhere:Lock",
                                registry.ENTRY_POINTS)
    point._for(dist)  # type: ignore[attr-defined]  # as importlib.metadata binds its own
    monkeypatch.setattr(registry, "_entry_points", lambda: {"nowhere-lock": point})
    return "nowhere-lock"


def test_a_library_not_installed_is_one_line(uninstalled: str) -> None:
    with pytest.raises(strategies.InvalidStrategy) as raised:
        strategies.parse(uninstalled)
    assert str(raised.value) == (
        "strategy 'nowhere-lock' needs the Python package 'no_such_library_anywhere', which is "
        "not installed (pip install 'stampede-lab[libraries]')")


def test_the_launch_says_it_and_exits_2(uninstalled: str, capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    code, err = run_cli(["launch", "--out", str(tmp_path / "run"), "--strategies", uninstalled],
                        capsys)
    assert_bad_input(code, err, "pip install 'stampede-lab[libraries]'")
    assert not (tmp_path / "run").exists()


# --- the asyncio libraries (adapters/aio): a group of their own, refused by the threaded CLI --

ASYNC_LIBRARIES = {"cashews", "cashews-early", "cashews-soft", "cashews-locked", "cashews-hit",
                   "aiocache", "aiocache-stampede"}


def test_the_async_libraries_have_their_own_group_and_no_sync_name() -> None:
    from adapters.aio import registry as aio_registry

    assert set(aio_registry.names()) == ASYNC_LIBRARIES
    assert not ASYNC_LIBRARIES & set(strategies.names())  # the threaded workers never build them


def test_async_library_parameters_default_to_the_library_s_own() -> None:
    from adapters.aio import registry as aio_registry

    def defaults(text: str) -> Any:
        return aio_registry.params(text)[1]

    assert defaults("cashews") == aio_registry.strategy_class("cashews").Params(True, False)
    assert defaults("cashews-locked").check_interval == 0.0
    assert defaults("cashews-early").early_ttl == -1.0  # 0.33 x ttl
    assert defaults("aiocache-stampede").lease == 2.0
    assert defaults("cashews:protected=false").protected is False
    with pytest.raises(strategies.InvalidStrategy, match="bad parameter 'sleep=1'"):
        defaults("cashews-locked:sleep=1")
    with pytest.raises(strategies.InvalidStrategy, match="lease must be > 0"):
        defaults("aiocache-stampede:lease=0")


def test_the_launch_refuses_an_async_library_in_one_line(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:
    code, err = run_cli(["launch", "--out", str(tmp_path / "run"), "--strategies",
                         "naive,cashews"], capsys)
    assert_bad_input(code, err, "cashews is an asyncio library: it runs in the asyncio app "
                                "tier only (--app-servers N --app-kind asgi)")
    assert not (tmp_path / "run").exists()
