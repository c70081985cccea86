"""How two runs were configured, side by side: the first section of ``coordinator compare``.

It reads run.json's manifests (options as resolved, seeds, versions, hosts) and lists every
setting that differs. Unless the runs differ in nothing but the strategies, a change in a figure
cannot be read as a strategy's effect, and the section says so (the figures are still shown).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from results.outputs.text import grid
from results.store.schema import MANIFEST_VERSION

IGNORED = ("command", "rerun_of")  # differ between any two runs: how, not what, was run
STRATEGIES = "options.strategies"
ABSENT = object()
WIDTH = 60


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted names for nested objects (``options.timing.lead_s``), ``[i]`` for lists of objects
    (but the strategies stay one list, shown by their labels)."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(item, Mapping) and item:
            out.update(flatten(item, name))
        elif _objects(item) and name != STRATEGIES:
            for i, element in enumerate(item):
                out.update(flatten(element, f"{name}[{i}]"))
        else:
            out[name] = item
    return out


def _objects(item: Any) -> bool:
    return isinstance(item, list) and bool(item) and all(isinstance(e, Mapping) for e in item)


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """Every setting of two manifests that differs (absent on one side included), in order."""
    fa, fb = (flatten({k: v for k, v in m.items() if k not in IGNORED}) for m in (a, b))
    names = [*fa, *(n for n in fb if n not in fa)]
    return [(n, fa.get(n, ABSENT), fb.get(n, ABSENT)) for n in names
            if fa.get(n, ABSENT) != fb.get(n, ABSENT)]


def show(value: Any) -> str:
    """One cell: labels for strategies, ``%g`` for floats, compact JSON for the rest."""
    if value is ABSENT:
        return "(absent)"
    if _objects(value) and all("label" in v for v in value):
        text = ",".join(str(v["label"]) for v in value)
    elif isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, str):
        text = value
    else:
        text = orjson.dumps(value).decode()
    return text if len(text) <= WIDTH else text[:WIDTH - 1] + "…"


def _missing(meta: Mapping[str, Any], side: str) -> str | None:
    if isinstance(meta.get("manifest"), Mapping):
        return None
    return (f"{side} has no manifest (run.json schema_version {meta.get('schema_version', '?')}, "
            f"written before manifest_version {MANIFEST_VERSION})")


def render(meta_a: Mapping[str, Any], meta_b: Mapping[str, Any]) -> str:
    """The configuration section: what differs, and whether the figures compare strategies."""
    missing = [m for m in (_missing(meta_a, "A"), _missing(meta_b, "B")) if m]
    if missing:
        return "\n".join([f"configuration: {'; '.join(missing)}: the configurations cannot be "
                          "compared.",
                          "warning: the changes below cannot be read as the strategy's effect "
                          "(what else differed is unknown)."])
    found = differences(meta_a["manifest"], meta_b["manifest"])
    if not found:
        return "configuration: the same in every option, seed, version and host."
    table = grid(("setting", "A", "B"), [[n, show(a), show(b)] for n, a, b in found])
    others = [n for n, _, _ in found if n != STRATEGIES]
    if not others:
        return f"configuration: the same but for the strategies:\n{table}"
    return "\n".join([
        f"configuration: {len(found)} setting(s) differ:", table,
        f"warning: the configurations differ in more than the strategy ({', '.join(others[:4])}"
        f"{', ...' if len(others) > 4 else ''}): the changes below cannot be read as the "
        "strategy's effect."])
