"""``coordinator launch`` workload options and the presets that reproduce each source experiment.

A preset fills in options the user did not give; any option given explicitly wins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from coordinator.cli.origin_options import custom_endpoints
from coordinator.trials.plan import drain_s
from model.custom import CustomOrigin
from model.origin import CATEGORIES
from model.think import ThinkTime
from model.workload import InvalidWorkload, KeySet, Query, Workload, shop, single

F = TypeVar("F", bound=Callable[..., Any])
MIXES = ("orders", "shop")

# Each preset: CLI option name -> raw value, as typed on the command line (trial lengths leave
# whole TTL periods between the 1 s warm-up and the drain for the last herd). Scaled to finish in
# a few minutes on a small machine; docs/workloads.md shows their real output. A preset whose
# headline is origin calls per event runs long enough for 8 events a trial (an interval's fewest,
# results.figures.intervals.MIN_UNITS) even when each expiry drifts 0.6 of a TTL past the last
# (tests/unit/test_preset_events.py); the source experiment's TTL stays.
PRESETS: dict[str, dict[str, Any]] = {
    "single-flight": {  # 000: one hot key, 200 clients, TTL 2 s, closed loop
        "keys": "hot", "clients": 200, "workers": 4, "ttl_s": 2.0, "seconds": 26.0,
        "strategies": "naive,lock,lock-dc", "scale": 500_000,
    },
    # 000's whole table as it ran there: the six defences, 200 clients, TTL 2 s, 30 s x 3
    # repeats, each figure with its interval (docs/workloads.md explains each row that departs).
    "experiment-000": {
        "keys": "hot", "clients": 200, "workers": 8, "ttl_s": 2.0, "seconds": 30.0, "repeat": 3,
        "strategies": "naive,lock,xfetch:beta=1,xfetch:beta=10,xfetch:beta=100,swr",
    },
    "jitter": {  # 001: 100 keys, same TTL 10 s, expiring together; jitter=0.2 spreads them
        "keys": "many:100", "clients": 40, "workers": 2, "ttl_s": 10.0, "seconds": 22.0,
        "strategies": "naive,naive:jitter=0.2", "scale": 200_000,
    },
    # 003: 97 % product / 3 % ranking, pool 20, bypass 0..100 %, 3M products. 003 ran 200 req/s
    # against a DB of its own; here the DB shares 2 cores with the load generator, and 300 req/s
    # is what saturates it at 100 % bypass (9 heavy rankings/s of ~0.1 s each, alone).
    "bypass-ramp": {
        "mix": "shop", "keys": "many:100000", "rate": "400", "bypass": "0,25,50,75,100",
        "stage_seconds": 10.0, "ttl_s": 50.0, "pool_size": 20, "workers": 1, "clients": 200,
        "strategies": "naive", "scale": 3_000_000,
    },
    "two-level": {  # 004: large compressed values on one hot key: Redis alone, then local + Redis
        "keys": "hot", "value_bytes": 2_000_000, "compress": True, "clients": 20, "workers": 2,
        "ttl_s": 2.0, "seconds": 26.0, "strategies": "naive,lock-dc,two-level", "scale": 200_000,
        "think_ms": 1.0,  # local hits never release the GIL: without a pause they starve the filler
    },
    # Consistency under writes: one hot key on a slow-ish origin (15 ms), written 8 times a second
    # at random instants; each write lands on a fill in flight now and then (the stale-set race).
    "stale-sets": {
        "keys": "hot", "clients": 16, "workers": 2, "ttl_s": 5.0, "seconds": 62.0,
        "invalidate_rate": 8.0, "origin_target_ms": 15.0, "think_ms": 1.0,  # as two-level's
        "strategies": "naive,lock-dc,lease,swr,two-level", "scale": 500_000,
    },
    # Issue 15: "if Redis goes down, does my database survive?" The cache is SIGKILLed 3 s into
    # each trial and started again, empty, 2 s later (docs/faults.md): lock-dc as today (fail), then
    # the three with production's fallback to the database (on_cache_error=origin). 30 s: the
    # events the outage takes still leave 8.
    "cache-down": {
        "keys": "hot", "clients": 40, "workers": 2, "ttl_s": 2.0, "seconds": 30.0,
        "faults": ("cache:kill@3+2",), "think_ms": 1.0,  # as two-level's: local hits hold the GIL
        "strategies": "lock-dc,naive:on_cache_error=origin,lock-dc:on_cache_error=origin,"
                      "two-level:on_cache_error=origin", "scale": 200_000,
    },
    # Issue 24: the libraries people install, each next to our own equivalent, on 000's stampede
    # (lock, lock-dc: redis-py-lock, python-redis-lock; swr: dogpile; lease: meta-memcache's
    # memcached leases, and its recache). Needs the [libraries] extra and a memcached binary.
    "libraries": {
        "keys": "hot", "clients": 200, "workers": 4, "ttl_s": 2.0, "seconds": 26.0,
        "strategies": "lock,lock-dc,redis-py-lock,python-redis-lock,swr,dogpile,"
                      "dogpile:distributed_lock=true,lease,meta-memcache,"
                      "meta-memcache:recache_ttl=2", "scale": 500_000,
    },
    # Issue 32: where production fights stampedes. 200 clients reach 4 app processes over HTTP;
    # naive in the app processes on Redis is the reference, then nginx's proxy_cache and Varnish
    # in front of an app that serves every request it gets from the origin (max-age = the TTL).
    # nginx keeps an entry for whole seconds of max-age on a clock that ticks once a second: at
    # TTL 2 s its expiries came 3 s apart (7 in a 26-s trial), so its trials run 34 s.
    "http-caches": {
        "keys": "hot", "clients": 200, "workers": 4, "ttl_s": 2.0, "seconds": 34.0,
        "app_servers": "4", "scale": 500_000,
        "strategies": "naive,nginx,nginx:lock=on,nginx:lock=on,use_stale=updating,"
                      "background_update=on,varnish,varnish:grace_s=0",
    },
    # Issue 34: the asyncio libraries' defences where they live, in 4 asyncio app processes
    # (uvicorn, one event loop each): cashews with and without its per-process task, its early
    # refresh, aiocache's cached_stampede, beside our lock and xfetch on the asyncio driver.
    "async-libraries": {
        "keys": "hot", "clients": 200, "workers": 4, "ttl_s": 2.0, "seconds": 26.0,
        "app_servers": "4", "app_kind": "asgi", "scale": 500_000,
        "strategies": "lock,xfetch,cashews,cashews:protected=false,cashews-early,"
                      "aiocache-stampede",
    },
    # Issue 32: does the herd follow the app processes? A process-local single flight with no
    # distributed lock bounds it by the processes, lock-dc by one, naive by the clients.
    "app-tier": {
        "keys": "hot", "clients": 200, "workers": 4, "ttl_s": 2.0, "seconds": 26.0,
        "app_servers": "1,2,4", "scale": 500_000,
        "strategies": "naive,lock-dc,local-lock:distributed=false",
    },
}


def _floats(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, ...]:
    if value is None or value == "":
        return ()
    try:
        return tuple(float(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers",
                                 ctx, param) from None


def _keys(ctx: click.Context, param: click.Parameter, value: str) -> KeySet:
    try:
        return KeySet.parse(value)
    except InvalidWorkload as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def workload_options(func: F) -> F:
    """The workload options of ``coordinator launch``, outermost first in ``--help``."""
    options = [
        click.option("--preset", type=click.Choice(sorted(PRESETS)), default=None,
                     help="Reproduce a source experiment; explicit options override it."),
        click.option("--keys", callback=_keys, default="hot", show_default=True,
                     help="Key set: hot, many:K (K keys expiring together) or zipf:K:S."),
        click.option("--mix", type=click.Choice(MIXES), default="orders", show_default=True,
                     help="Endpoints: orders (one range aggregate) or shop (003: 97 % product "
                          "lookup, 3 % ranking)."),
        click.option("--rate", callback=_floats, default=None,
                     help="Open loop: total requests/s (a list: one per stage). None: closed loop."),
        click.option("--think-ms", type=click.FloatRange(0, 60_000), default=0.0,
                     show_default=True, help="Closed loop: pause after each request."),
        click.option("--bypass", callback=_floats, default="0", show_default=True,
                     help="Percent of requests that bypass the cache, per stage: 0,25,50,75,100."),
        click.option("--stage-seconds", type=click.FloatRange(0, 3600), default=0.0,
                     help="Length of each stage; the trial runs warm-up + stages x this."),
        click.option("--value-bytes", type=click.IntRange(0, 64 * 2**20), default=0,
                     show_default=True, help="Pad each cached value to this size (0: as queried)."),
        click.option("--compress/--no-compress", default=False, show_default=True,
                     help="zlib-compress each cached value."),
        click.option("--invalidate-rate", type=click.FloatRange(0, 10_000), default=0.0,
                     show_default=True,
                     help="Writes/s (Poisson arrivals) that change an origin row; each strategy "
                          "then deletes or updates its key (its on_write parameter)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def apply_preset(ctx: click.Context, options: dict[str, Any]) -> dict[str, Any]:
    """Options with the preset's values where the user gave none (command line or env)."""
    name = options.get("preset")
    if not name:
        return options
    out = dict(options)
    params = {p.name: p for p in ctx.command.params}
    for key, raw in PRESETS[name].items():
        if ctx.get_parameter_source(key) in (ParameterSource.DEFAULT, None):
            out[key] = params[key].process_value(ctx, raw)
    return out


def build_workload(options: dict[str, Any], origin: CustomOrigin | None = None) -> Workload:
    """The run's workload from (preset-filled) options; bad combinations are one-line errors.
    The user's own origin (``origin``) is one endpoint, its keys read at the start of the run."""
    origin = origin or CustomOrigin()
    ttl_ms = round(options["ttl_s"] * 1000)
    keys: KeySet = options["keys"]
    if any(not 0 <= b <= 100 for b in options["bypass"]):
        raise click.UsageError(f"--bypass takes percentages 0-100, got {options['bypass']}")
    shopping = options["mix"] == "shop"
    endpoints = shop(keys, CATEGORIES, ttl_ms) if shopping else single(Query.ORDERS, keys, ttl_ms)
    if not origin.builtin:
        endpoints = custom_endpoints(origin, ttl_ms)
    try:
        return Workload(
            endpoints, rates=options["rate"], bypass=tuple(b / 100 for b in options["bypass"]),
            stage_s=options["stage_seconds"], think_ms=options["think_ms"],
            value_bytes=options["value_bytes"], compress=options["compress"],
            invalidate_rate=options["invalidate_rate"], origin=origin,
            think=options.get("think") or ThinkTime(),
        )
    except InvalidWorkload as exc:
        raise click.UsageError(str(exc)) from None


def stage_warning(workload: Workload, seconds: float) -> str | None:
    """``--stage-seconds`` with one stage makes no stages; say what it does instead.

    A warning, not an error: the run is well defined (one stage of that length, e.g. a preset's
    stage length with a single ``--bypass``), unlike several stages without a length.
    """
    if workload.stage_s <= 0 or workload.stages > 1:
        return None
    return (f"--stage-seconds {workload.stage_s:g} with one stage (no --rate or --bypass list) "
            f"makes no stages: each trial lasts warm-up + {workload.stage_s:g} s + drain, "
            f"and --seconds ({seconds:g}) is not used")


def trial_seconds(workload: Workload, seconds: float, warmup_s: float, ttl_s: float) -> float:
    """A staged run lasts warm-up + stages x stage length + the drain; otherwise ``--seconds``."""
    if workload.stage_s > 0:
        return warmup_s + workload.stages * workload.stage_s + drain_s(ttl_s)
    return seconds
