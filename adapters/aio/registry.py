"""The async strategies by name: the entry-point group ``stampede_lab.async_strategies``.

A group of its own, never ``stampede_lab.strategies``: the threaded workers build what that
group names as sync strategies, and these are coroutines. The CLI finds these names here and
refuses them with one line (strategies.registry) until an asyncio driver hosts them; tests and
that driver build them with ``build``, from the same ``name:key=value,...`` spec users type.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from importlib import metadata
from typing import Any

from adapters.aio.base import AsyncDeps, AsyncStrategy
from strategies.registry import ASYNC_ENTRY_POINTS, InvalidStrategy, _convert


@functools.cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ASYNC_ENTRY_POINTS)}


def names() -> list[str]:
    return sorted(_entry_points())


def strategy_class(name: str) -> Any:
    point = _entry_points().get(name)
    if point is None:
        raise InvalidStrategy(f"unknown async strategy {name!r} (known: {', '.join(names())})")
    try:
        return point.load()
    except ImportError as exc:
        raise InvalidStrategy(
            f"async strategy {name!r} needs the Python package {exc.name or str(exc)!r}, which is "
            "not installed (pip install 'stampede-lab[async-libraries]')") from None


def params(text: str) -> tuple[Any, Any]:
    """The class and its validated ``Params`` for ``name:key=value,...``."""
    name, _, raw = text.strip().partition(":")
    cls = strategy_class(name)
    kinds = {f.name: type(f.default) for f in fields(cls.Params)}
    given: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key.strip() not in kinds:
            raise InvalidStrategy(f"{name}: bad parameter {item!r} (parameters: "
                                  f"{', '.join(sorted(kinds)) or 'none'})")
        given[key.strip()] = _convert(name, key.strip(), value.strip(), kinds[key.strip()])
    try:
        return cls, cls.Params(**given)
    except ValueError as exc:
        raise InvalidStrategy(f"{name}: {exc}") from None


def build(text: str, deps: AsyncDeps) -> AsyncStrategy:
    cls, chosen = params(text)
    strategy: AsyncStrategy = cls(deps, chosen)
    return strategy
