"""Strategies by name, and the ``name:param=value,...`` spec users type."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol, TypeVar

from strategies import fallback
from strategies.base import Deps, Strategy


class InvalidStrategy(ValueError):
    """A strategy spec that names an unknown strategy or a bad parameter."""


class StrategyClass(Protocol):
    name: str
    Params: type[Any]

    def __call__(self, deps: Deps, params: Any) -> Strategy: ...


_REGISTRY: dict[str, StrategyClass] = {}
T = TypeVar("T")


def register(cls: T) -> T:
    """Class decorator: make a strategy selectable by its ``name``."""
    name = cls.name  # type: ignore[attr-defined]
    if name in _REGISTRY:
        raise ValueError(f"strategy {name!r} registered twice")
    _REGISTRY[name] = cls  # type: ignore[assignment]
    return cls


def names() -> list[str]:
    return sorted(_REGISTRY)


@dataclass(frozen=True)
class StrategySpec:
    """A parsed ``name:key=value,...`` with its parameters validated and defaults filled in."""

    name: str
    params: Mapping[str, Any]

    @property
    def label(self) -> str:
        """The spec as typed, for tables: only the parameters that differ from the defaults."""
        defaults = _defaults(_REGISTRY[self.name].Params)
        changed = {k: v for k, v in self.params.items() if defaults.get(k) != v}
        if not changed:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_fmt(v)}" for k, v in sorted(changed.items()))

    def build(self, deps: Deps) -> Strategy:
        """The strategy, wrapped by its ``on_cache_error`` policy (strategies.fallback)."""
        cls = _REGISTRY[self.name]
        return fallback.build(cls, deps, cls.Params(**self.params))


def parse(text: str) -> StrategySpec:
    """Parse ``lock`` or ``xfetch:beta=10``; raise InvalidStrategy with what is allowed."""
    name, _, raw = text.strip().partition(":")
    pairs: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise InvalidStrategy(f"{name}: bad parameter {item!r} (write key=value)")
        pairs[key.strip()] = value.strip()
    return from_mapping(name, pairs)


def from_mapping(name: str, given: Mapping[str, object]) -> StrategySpec:
    """Validate a name and parameters (typed by the user or read from a JSON task)."""
    if name not in _REGISTRY:
        raise InvalidStrategy(f"unknown strategy {name!r} (known: {', '.join(names())})")
    params_cls = _REGISTRY[name].Params
    params = _defaults(params_cls)
    for key, value in given.items():
        if key not in params:
            allowed = ", ".join(sorted(params)) or "none"
            raise InvalidStrategy(f"{name}: unknown parameter {key!r} (parameters: {allowed})")
        params[key] = _convert(name, key, str(value), type(params[key]))
    try:
        params_cls(**params)
    except ValueError as exc:
        raise InvalidStrategy(f"{name}: {exc}") from None
    return StrategySpec(name, params)


def _defaults(params_cls: type[Any]) -> dict[str, Any]:
    return {f.name: f.default for f in fields(params_cls)}


def _convert(name: str, key: str, value: str, kind: Callable[[str], Any]) -> Any:
    if kind is bool:
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise InvalidStrategy(f"{name}: {key}={value!r} is not a boolean")
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        allowed = [str(m.value) for m in kind]
        if value not in allowed:
            raise InvalidStrategy(f"{name}: {key}={value!r} is not one of {'|'.join(allowed)}")
    try:
        converted = kind(value)
    except ValueError:
        raise InvalidStrategy(
            f"{name}: {key}={value!r} is not a valid {getattr(kind, '__name__', kind)}"
        ) from None
    if kind is float and not math.isfinite(converted):  # float() takes inf, nan, 1e999
        raise InvalidStrategy(f"{name}: {key}={value!r} is not a finite number")
    return converted


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
