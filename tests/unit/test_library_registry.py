"""The libraries come in through the entry-point group, each imported only when named; a
library that is not installed is one clear line (exit 2), never a traceback."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

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
