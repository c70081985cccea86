"""Strategies by name, and the ``name:param=value,...`` spec users type.

Two sources, one name space: the built-in defences register themselves when ``strategies`` is
imported (``@register``); strategies from installed packages are found through the entry-point
group ``stampede_lab.strategies`` (name = strategy name, value = ``module:Class``) and imported
only when a spec names them, so a library that is not installed costs nothing until it is asked
for, and then one clear line. The third-party libraries stampede-lab measures (``adapters/``)
come in through that group too.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from importlib import metadata
from typing import Any, Protocol, TypeVar

from strategies import fallback
from strategies.base import CacheServer, Deps, Strategy

ENTRY_POINTS = "stampede_lab.strategies"
# The asyncio libraries' adapters (adapters/aio): not buildable by the threaded workers, so a
# group of their own, whose names ``strategy_class`` refuses with one line.
ASYNC_ENTRY_POINTS = "stampede_lab.async_strategies"


class InvalidStrategy(ValueError):
    """A strategy spec that names an unknown strategy or a bad parameter."""


class StrategyClass(Protocol):
    name: str
    Params: type[Any]
    cache_server: CacheServer  # optional on a class: Redis when absent

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
    """Every strategy name: built in, and offered by an installed package's entry point."""
    return sorted(set(_REGISTRY) | set(_entry_points()))


@functools.cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINTS)}


def strategy_class(name: str) -> StrategyClass:
    """The class registered as ``name``, importing it from its entry point on first use."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    point = _entry_points().get(name)
    if point is None and is_async(name):
        return _async_class(name)
    if point is None:
        raise InvalidStrategy(f"unknown strategy {name!r} (known: {', '.join(names())})")
    try:
        cls = point.load()
    except ImportError as exc:
        raise InvalidStrategy(_missing(name, point, exc)) from None
    if getattr(cls, "name", None) != name:
        raise InvalidStrategy(f"entry point {name!r} ({point.value}) names a class whose name is "
                              f"{getattr(cls, 'name', None)!r}")
    _REGISTRY[name] = cls
    return cls  # type: ignore[no-any-return]


def is_async(name: str) -> bool:
    """``name`` is an asyncio library adapter (adapters/aio): only the asgi app tier runs it."""
    return name in _async_entry_points()


@functools.cache
def _async_entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ASYNC_ENTRY_POINTS)}


@functools.cache
def _async_class(name: str) -> StrategyClass:
    """An asyncio adapter's class, for its name, parameters and label (never built here: the
    asgi app tier builds it with adapters.aio.registry)."""
    point = _async_entry_points()[name]
    try:
        cls = point.load()
    except ImportError as exc:
        raise InvalidStrategy(
            f"async strategy {name!r} needs the Python package {exc.name or str(exc)!r}, which is "
            "not installed (pip install 'stampede-lab[async-libraries]')") from None
    return cls  # type: ignore[no-any-return]


ASYNC_ONLY = ("is an asyncio library adapter (adapters/aio): only the asyncio app tier runs it "
              "(--app-servers N --app-kind asgi)")


def _missing(name: str, point: metadata.EntryPoint, exc: ImportError) -> str:
    """One line: which package the strategy needs and how to install it."""
    dist = point.dist.name if point.dist is not None else None
    package = exc.name or str(exc)
    how = ("pip install 'stampede-lab[libraries]'" if dist == "stampede-lab"
           else f"reinstall {dist}" if dist else "install it")
    return f"strategy {name!r} needs the Python package {package!r}, which is not installed ({how})"


def cache_server(name: str) -> CacheServer:
    """The kind of cache server strategy ``name`` speaks to."""
    return CacheServer(getattr(strategy_class(name), "cache_server", CacheServer.REDIS))


@dataclass(frozen=True)
class StrategySpec:
    """A parsed ``name:key=value,...`` with its parameters validated and defaults filled in."""

    name: str
    params: Mapping[str, Any]

    @property
    def label(self) -> str:
        """The spec as typed, for tables: only the parameters that differ from the defaults."""
        defaults = _defaults(strategy_class(self.name).Params)
        changed = {k: v for k, v in self.params.items() if defaults.get(k) != v}
        if not changed:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_fmt(v)}" for k, v in sorted(changed.items()))

    def build(self, deps: Deps) -> Strategy:
        """The strategy, wrapped by its ``on_cache_error`` policy (strategies.fallback)."""
        cls = strategy_class(self.name)
        if is_async(self.name):
            raise InvalidStrategy(f"strategy {self.name!r} {ASYNC_ONLY}")
        return fallback.build(cls, deps, cls.Params(**self.params))

    @property
    def is_async(self) -> bool:
        """An asyncio library adapter (adapters/aio), built by the asgi app tier only."""
        return is_async(self.name)

    @property
    def cache_server(self) -> CacheServer:
        return cache_server(self.name)

    def check_run(self, ttl_ms: int, aligned: bool) -> None:
        """InvalidStrategy when the strategy cannot run with this TTL or ``--expiry aligned``
        (a class may say so in a ``check_run`` of its own: memcached's whole-second TTLs)."""
        check = getattr(strategy_class(self.name), "check_run", None)
        if check is None:
            return
        try:
            check(ttl_ms, aligned)
        except ValueError as exc:
            raise InvalidStrategy(f"{self.name}: {exc}") from None


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
    params_cls = strategy_class(name).Params
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
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)
