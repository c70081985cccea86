"""A plug-in that cannot be used is bad input: exit 2, one line naming --plugin and why (it
fails to import, registers nothing, its Params are invalid, it lacks a method of the contract).
Nothing is started and nothing is written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from strategies.plugins import UNVERSIONED, load, version_of
from tests.helpers import assert_bad_input, run_cli

HEAD = """
from dataclasses import dataclass
from typing import ClassVar
from strategies import register
from strategies.naive import Naive
"""
PLUGINS = {
    "plug_broken": ("import nonexistent_dependency_27", "failed to import: ModuleNotFoundError"),
    "plug_raises": ("raise RuntimeError('no config')", "failed to import: RuntimeError: no config"),
    "plug_empty": ("X = 1", "registers no strategy"),
    "plug_params": (HEAD + """
@dataclass(frozen=True)
class P:
    ttl_factor: float = -1.0
    def __post_init__(self) -> None:
        if self.ttl_factor <= 0:
            raise ValueError("ttl_factor must be > 0")

@register
class Bad(Naive):
    name: ClassVar[str] = "plug-bad-params"
    Params = P
""", "Params' defaults are not valid parameters (ValueError: ttl_factor must be > 0)"),
    "plug_nodc": (HEAD + """
@register
class NoDc(Naive):
    name: ClassVar[str] = "plug-no-dataclass"
    Params = dict
""", "has no Params dataclass"),
    "plug_methods": (HEAD + """
from strategies.params import CommonParams
@register
class Half:
    name: ClassVar[str] = "plug-half"
    Params = CommonParams
    def fetch(self, key, probe): ...
""", "lacks prime, on_write, cached_version"),
}


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, (code, _) in PLUGINS.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(code))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("module", sorted(PLUGINS))
def test_a_plugin_that_cannot_be_used_is_bad_input(module: str, plugin_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = plugin_dir / "run"
    code, err = run_cli(["launch", "--plugin", module, "--out", str(out)], capsys)
    assert_bad_input(code, err, PLUGINS[module][1])
    assert "--plugin" in err and not out.exists()


def test_not_a_module_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = run_cli(["launch", "--plugin", "../evil", "--out", str(tmp_path / "r")], capsys)
    assert_bad_input(code, err, "is not a module name")


def test_a_strategy_of_a_plugin_not_given_is_unknown(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    code, err = run_cli(["launch", "--strategies", "no-such-plugin-strategy", "--out",
                         str(tmp_path / "r")], capsys)
    assert_bad_input(code, err, "unknown strategy 'no-such-plugin-strategy'")


def test_a_version_is_the_modules_or_its_distributions_or_unversioned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plug_versioned.py").write_text(HEAD + textwrap.dedent("""
        __version__ = "3.1"
        @register
        class V(Naive):
            name: ClassVar[str] = "plug-versioned"
    """))
    (tmp_path / "plug_bare.py").write_text(HEAD + textwrap.dedent("""
        @register
        class B(Naive):
            name: ClassVar[str] = "plug-bare"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load("plug_versioned") == ("3.1", ("plug-versioned",))
    assert load("plug_versioned") == ("3.1", ("plug-versioned",))  # a second load: the same
    assert load("plug_bare") == (UNVERSIONED, ("plug-bare",))
    assert version_of("redis") == __import__("redis").__version__
