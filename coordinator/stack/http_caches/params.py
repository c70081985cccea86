"""The HTTP caches' parameters live with their strategies (strategies/fronts.py), where the
workers and the app tier read them too; the stack renders them from there."""

import strategies
from strategies.fronts import (
    FRONTS,
    FrontParams,
    NginxParams,
    UseStale,
    VarnishParams,
    as_dict,
    config_id,
    front_name,
)

__all__ = ["FRONTS", "FrontParams", "NginxParams", "UseStale", "VarnishParams", "as_dict",
           "config_id", "front_name", "parse_params", "spec_label"]


def parse_params(kind: str, text: str) -> FrontParams:
    """``key=value,...`` (the part after ``nginx:`` in a spec) into the front's parameters,
    through the strategies' own parser (the fronts are registered strategies): one spelling
    everywhere, one set of errors (ValueError naming the parameter and what is allowed)."""
    if kind not in FRONTS:
        raise ValueError(f"unknown HTTP cache {kind!r} (known: {', '.join(sorted(FRONTS))})")
    try:
        spec = strategies.parse(f"{kind}:{text}" if text else kind)
    except strategies.InvalidStrategy as exc:
        raise ValueError(str(exc).removeprefix(f"{kind}: ")) from None
    params: FrontParams = FRONTS[kind](**spec.params)
    return params


def spec_label(params: FrontParams) -> str:
    """The spec a user would type for ``params``: only what differs from the defaults
    (``nginx:lock=on``), in the registry's spelling of booleans (on/off)."""
    defaults = as_dict(type(params)())
    changed = [(k, v) for k, v in sorted(as_dict(params).items()) if defaults[k] != v]
    text = ",".join(f"{k}={_spelled(v)}" for k, v in changed)
    return front_name(params) + (f":{text}" if text else "")


def _spelled(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)
