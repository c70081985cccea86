"""The architecture, checked: who may import whom (read from the source, nothing imported).

coordinator/ talks to the workers over the wire contract (model.wire: tasks by name), so it
imports nothing from worker/; model/ is shared by both and knows neither them nor Celery;
strategies/ is pure cache logic.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from model import wire
from tests.helpers import ROOT

FORBIDDEN = {
    "coordinator": ("worker",),
    "model": ("coordinator", "worker", "celery", "results"),
    "strategies": ("coordinator", "worker", "celery", "model", "results", "psycopg"),
    "results": ("coordinator", "worker", "celery"),
    "simulate": ("coordinator", "worker", "celery", "model"),
}


def imports(package: str) -> list[tuple[Path, str]]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((path, node.module))
            elif isinstance(node, ast.Import):
                found.extend((path, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_the_layers(package: str) -> None:
    bad = [f"{path.relative_to(ROOT)}: {module}" for path, module in imports(package)
           if module.split(".")[0] in FORBIDDEN[package]]
    assert not bad, bad


def test_the_worker_registers_every_task_the_coordinator_sends_by_name() -> None:
    source = (ROOT / "worker" / "tasks.py").read_text()
    for name in ("RUN_TRIAL", "CLOCK", "BASELINE", "HOST_FACTS"):
        assert f"name={name}" in source, name
    assert len({wire.RUN_TRIAL, wire.CLOCK, wire.BASELINE, wire.HOST_FACTS}) == 4
    assert wire.CELERY_SETTINGS["accept_content"] == ["json"]  # never pickle
