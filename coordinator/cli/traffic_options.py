"""``coordinator launch`` options for your own traffic: think time as Locust users know it
(``--think``) and a key trace replayed open loop (``--keys-trace``, ``--trace-speed``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from model.think import InvalidThink, ThinkTime
from model.trace import InvalidTrace, Trace, read_trace
from model.workload import PRIME_LIMIT, InvalidWorkload, KeyKind, KeySet, Workload

F = TypeVar("F", bound=Callable[..., Any])


def _think(ctx: click.Context, param: click.Parameter, value: str | None) -> ThinkTime:
    if not value:
        return ThinkTime()
    try:
        return ThinkTime.parse(value)
    except InvalidThink as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def traffic_options(func: F) -> F:
    options = [
        click.option("--think", callback=_think, default=None,
                     metavar="constant:MS|uniform:MIN:MAX|exponential:MEAN|pacing:MS",
                     help="Closed loop: each client's pause after a request, as Locust's "
                          "wait_time (pacing: each request-and-pause cycle lasts MS)."),
        click.option("--keys-trace", type=click.Path(dir_okay=False, path_type=Path),
                     default=None, help="Replay a key trace open loop: CSV or Parquet with a "
                                        "column key and optionally t (seconds) or timestamp."),
        click.option("--trace-speed", type=click.FloatRange(0.001, 1000), default=1.0,
                     show_default=True, help="--keys-trace with timestamps: play the recorded "
                                             "pace this many times as fast."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _typed(ctx: click.Context, name: str) -> bool:
    """``name`` given on the command line (or from the environment), not a default or a preset's."""
    return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)


def check_think_open_loop(ctx: click.Context | None, options: dict[str, Any]) -> None:
    """A think time typed with an open loop (``--rate``, a preset's or typed, or ``--keys-trace``):
    open-loop clients send at the arrival instants and never pause, so the think time was dropped
    without a word (issue 31). A preset's own think time (two-level's 1 ms) yields to a typed
    ``--rate``: nothing was typed that would be ignored."""
    if ctx is None:
        return
    typed = [n for n in ("think", "think_ms") if _typed(ctx, n)]
    if not typed:
        return
    flag = "--" + typed[0].replace("_", "-")
    if options.get("rate"):
        whose = "" if _typed(ctx, "rate") else f" (from --preset {options.get('preset')})"
        raise click.BadParameter(f"a pause between requests is closed loop only, and --rate"
                                 f"{whose} makes the loop open (requests sent at that rate, no "
                                 "pause): give one of them", param_hint=flag)
    if options.get("keys_trace") is not None:
        raise click.BadParameter("a pause between requests is closed loop only, and --keys-trace "
                                 "replays the trace open loop: drop it", param_hint=flag)


def _trace(options: dict[str, Any], path: Path) -> tuple[list[str], Trace]:
    keys, requests, offsets = read_trace(path)
    rates: tuple[float, ...] = options.get("rate") or ()
    if offsets is not None and rates:
        raise click.BadParameter("the trace has timestamps: it plays at their pace (scale it "
                                 "with --trace-speed, not --rate)", param_hint="--rate")
    if offsets is None and len(rates) != 1:
        raise click.BadParameter(f"{path} has no t or timestamp column: give one --rate R "
                                 "(requests/s)", param_hint="--keys-trace")
    index = {k: i for i, k in enumerate(keys)}
    trace = Trace(tuple(index[k] for k in requests), tuple(offsets or ()),
                  float(options.get("trace_speed") or 1.0), rates[0] if offsets is None else 0.0)
    return keys, trace


def with_trace(workload: Workload, options: dict[str, Any], keys_given: bool) -> Workload:
    """``workload`` replaying ``--keys-trace`` (its keys become the endpoint's, hottest first)."""
    path = options.get("keys_trace")
    if path is None:
        if options.get("trace_speed", 1.0) != 1.0:
            raise click.BadParameter("only with --keys-trace", param_hint="--trace-speed")
        return workload
    if keys_given:
        raise click.BadParameter("the trace names the keys (drop --keys)", param_hint="--keys")
    try:
        keys, trace = _trace(options, path)
        ep = workload.endpoints[0]
        count = KeySet(KeyKind.MANY, len(keys)) if len(keys) > 1 else KeySet()
        ep = dataclasses.replace(ep, keys=count, key_list=tuple(keys), prime=len(keys) <= PRIME_LIMIT)
        return dataclasses.replace(workload, endpoints=(ep, *workload.endpoints[1:]), rates=(),
                                   trace=trace)
    except (InvalidTrace, InvalidWorkload) as exc:
        raise click.BadParameter(str(exc), param_hint="--keys-trace") from None
