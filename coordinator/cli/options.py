"""CLI option checks: each bad value becomes one line naming the option and what is allowed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

import strategies
from coordinator import defaults, faults
from coordinator.faults.net import ENV as NET_CONTROL_ENV
from coordinator.trials.liveness import LossPolicy
from model.services import ENV, METRICS_PORT_ENV, OPTIONAL_ENV
from strategies import StrategySpec
from strategies.plugins import PluginError, load_all

F = TypeVar("F", bound=Callable[..., Any])

_SCHEMES = {
    "cache_url": ("redis", "rediss", "memcache"),
    "memcache_url": ("memcache",),
    "lock_url": ("redis", "rediss"),
    "broker_url": ("redis", "rediss"),
    "origin_dsn": ("postgresql", "postgres"),
}


def strategy_list(ctx: click.Context, param: click.Parameter, value: str) -> tuple[StrategySpec, ...]:
    """Parse ``naive,lock:poll_ms=2`` (a comma inside parameters belongs to the strategy).

    Items are split on commas; an item holding ``=`` but no ``:`` continues the previous one.
    """
    items: list[str] = []
    for part in (p.strip() for p in value.split(",")):
        if items and "=" in part and ":" not in part:
            items[-1] += "," + part
        elif part:
            items.append(part)
    if not items:
        raise click.BadParameter("no strategy given", ctx, param)
    try:
        specs = tuple(strategies.parse(item) for item in items)
    except strategies.InvalidStrategy as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    labels = [s.label for s in specs]
    duplicates = sorted({lb for lb in labels if labels.count(lb) > 1})
    if duplicates:
        raise click.BadParameter(f"listed twice: {', '.join(duplicates)}", ctx, param)
    return specs


def plugin_list(ctx: click.Context, param: click.Parameter,
                value: tuple[str, ...]) -> tuple[str, ...]:
    """Each ``--plugin MODULE`` imported now (eager: before ``--strategies`` names its classes)."""
    try:
        load_all(value)
    except PluginError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return value


def fault_list(ctx: click.Context, param: click.Parameter,
               value: tuple[str, ...]) -> tuple[faults.Fault, ...]:
    """Each ``--fault TARGET:ACTION@SECONDS[+DURATION]`` (instants are checked with the config)."""
    try:
        return tuple(faults.parse(item) for item in value)
    except faults.FaultError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def _check_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    allowed = _SCHEMES[param.name or ""]
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        port_ok = False
        parts = urlsplit("")
    if parts.scheme not in allowed or not parts.hostname or not port_ok:
        raise click.BadParameter(
            f"not a valid URL (expected {allowed[0]}://[user:password@]host[:port]/...)", ctx, param
        )
    return value


def service_options(func: F) -> F:
    """``--cache-url --lock-url --broker-url --origin-dsn`` and the optional ``--memcache-url``,
    each also read from the environment."""
    helps = {
        "cache_url": "Cache: Redis, or memcached (memcache://HOST:PORT)",
        "lock_url": "Redis lock store",
        "broker_url": "Celery broker and result backend (Redis)", "origin_dsn": "PostgreSQL origin",
        "memcache_url": "A memcached cache beside a Redis --cache-url, for strategies on "
                        "memcached (meta-memcache) in the same run; optional",
    }
    names = {**ENV, **OPTIONAL_ENV}
    for name in reversed(list(names)):
        flag = "--" + name.replace("_", "-")
        func = click.option(flag, name, envvar=names[name], callback=_check_url, default=None,
                            help=f"{helps[name]} [env {names[name]}]; none given: embedded "
                                 "stack.")(func)
    return func


def net_control_option(default: str) -> Callable[[F], F]:
    """``--net-control HOST:PORT`` of ``launch`` and ``rerun``; ``default`` ends its help."""
    return click.option(
        "--net-control", envvar=NET_CONTROL_ENV, default=None, metavar="HOST:PORT",
        help="The namespace lab's link control, for net: faults (net:partition:A-B@S+D, "
             f"net:delay:A-B=MS, net:loss:A-B=PCT; docs/faults.md) [env {NET_CONTROL_ENV}]"
             f"{default}.")


def observe_options(func: F) -> F:
    """``--observe`` (a Prometheus for the embedded stack) and ``--metrics-port`` (docs/observe.md)."""
    func = click.option(
        "--metrics-port", type=click.IntRange(1, 65535), envvar=METRICS_PORT_ENV, default=None,
        help=f"Serve Prometheus metrics: the coordinator on PORT, embedded workers on the next ports "
             f"[env {METRICS_PORT_ENV}; default: off, or free ports with --observe].")(func)
    return click.option(
        "--observe", is_flag=True,
        help="Start the system's prometheus on loopback scraping every worker, the coordinator and "
             "the exporters each second; data in RUN_DIR/prometheus (embedded stack only).")(func)


def liveness_options(func: F) -> F:
    """``--worker-silence`` and ``--on-worker-loss`` (docs/faults.md, "Lost workers")."""
    func = click.option(
        "--on-worker-loss", type=click.Choice([p.value for p in LossPolicy]),
        default=defaults.ON_WORKER_LOSS, show_default=True,
        help="A lost worker: continue with the survivors (clients re-split, run degraded, exit 3) "
             "or fail (stop after that trial, exit 3).")(func)
    return click.option(
        "--worker-silence", "worker_silence_s", type=click.FloatRange(1, 3600), default=None,
        help=f"Seconds without a heartbeat after which a worker is lost [default: "
             f"{defaults.Timing().worker_silence_s:g}; at least 1].")(func)


def _target_width(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """``10`` or ``10%``: percent of the figure, above 0 and at most 1000."""
    if value is None:
        return None
    try:
        width = float(value.strip().removesuffix("%"))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a percentage (e.g. 10 or 10%)", ctx,
                                 param) from None
    if not 0 < width <= 1000:
        raise click.BadParameter(f"{value!r} must be above 0 and at most 1000 (percent of the "
                                 "figure)", ctx, param)
    return width


def target_width_option(func: F) -> F:
    """``--target-width PCT``: the table's notes say what an interval this narrow would take."""
    return click.option(
        "--target-width", callback=_target_width, default=None, metavar="PCT",
        help="Width wanted of each headline figure's 95 % interval, in percent of the figure: "
             "the table's notes say how many seconds per trial or repeats would give it.")(func)
