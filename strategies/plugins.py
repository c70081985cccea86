"""Defences of your own as plug-ins: ``--plugin MODULE`` imports a module on the path, whose
strategy classes register themselves with ``@strategies.register`` as the built-in ones do.

A plug-in's version is its ``__version__``, else the version of the installed distribution that
holds it; the coordinator asks every worker for it and refuses to start when one differs. A
class a plug-in registers is checked on import: a name, a ``Params`` dataclass whose defaults
make valid parameters, and the four methods of the contract (docs/plugins.md).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
from collections.abc import Sequence
from importlib import metadata

from strategies import registry

MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
METHODS = ("fetch", "prime", "on_write", "cached_version")
UNVERSIONED = "unversioned"  # a plug-in without __version__ outside any distribution


class PluginError(ValueError):
    """A plug-in that cannot be used (one line: which, and why)."""


def version_of(module: str) -> str:
    """The plug-in's ``__version__``, else its distribution's version, else ``unversioned``."""
    loaded = sys.modules[module]
    version = getattr(loaded, "__version__", None)
    if isinstance(version, str) and version:
        return version
    top = module.split(".", maxsplit=1)[0]
    dists = metadata.packages_distributions().get(top) or []
    return metadata.version(dists[0]) if dists else UNVERSIONED


def check_class(module: str, name: str) -> None:
    """PluginError unless the class registered as ``name`` follows the contract."""
    cls = registry.strategy_class(name)
    params = getattr(cls, "Params", None)
    if not (isinstance(params, type) and dataclasses.is_dataclass(params)):
        raise PluginError(f"plug-in {module}: strategy {name!r} has no Params dataclass")
    try:
        params()
    except (TypeError, ValueError) as exc:
        raise PluginError(f"plug-in {module}: strategy {name!r}: its Params' defaults are not "
                          f"valid parameters ({type(exc).__name__}: {exc})") from None
    missing = [m for m in METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise PluginError(f"plug-in {module}: strategy {name!r} lacks {', '.join(missing)}")


def load(module: str) -> tuple[str, tuple[str, ...]]:
    """Import ``module`` (once), check what it registered; its version and strategy names."""
    if not MODULE.match(module):
        raise PluginError(f"{module!r} is not a module name (dotted identifiers)")
    before = set(registry.names())
    if os.getcwd() not in sys.path:  # a module in the working directory, as ``python -m`` finds it
        sys.path.append(os.getcwd())
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure of a user's module is one line of bad input
        raise PluginError(f"plug-in {module} failed to import: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    added = tuple(sorted(set(registry.names()) - before)) or _registered_by(module)
    if not added:
        raise PluginError(f"plug-in {module} registers no strategy (decorate its classes with "
                          "@strategies.register)")
    for name in added:
        check_class(module, name)
    return version_of(module), added


def _registered_by(module: str) -> tuple[str, ...]:
    """The strategies a module imported earlier registered (a second ``load`` of it)."""
    return tuple(sorted(n for n in registry.names()
                        if getattr(registry.strategy_class(n), "__module__", "").startswith(module)))


def load_all(modules: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Every plug-in imported: module -> version."""
    return {module: load(module)[0] for module in modules}


def installed(names: Sequence[str]) -> dict[str, str]:
    """This process's versions of ``names`` (modules, or ``dist:NAME``); an error text instead
    of a version for one it cannot load."""
    found: dict[str, str] = {}
    for name in names:
        try:
            if name.startswith("dist:"):
                found[name] = metadata.version(name[5:])
            else:
                found[name] = load_all([name])[name]
        except (PluginError, metadata.PackageNotFoundError) as exc:
            found[name] = f"missing: {exc}"
    return found
