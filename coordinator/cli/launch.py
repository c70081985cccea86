"""``coordinator launch``: options -> config -> services -> experiment -> run directory -> table."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import psycopg
import redis
import urllib3
from celery.exceptions import CeleryError
from click.core import ParameterSource

from coordinator.app_tier.connect import TierPlace, remote_tier_answers
from coordinator.app_tier.fronts import remote_fronts
from coordinator.app_tier.tier import AppTierError
from coordinator.app_tier.trials import PrimeFailed, front_of
from coordinator.blackbox import probe as black_box_probe
from coordinator.cli.app_options import app_settings
from coordinator.cli.config_checks import check_config, link_control
from coordinator.cli.given import (
    given_from,
    primed_keys,
    resolve_origin,
    services_from,
)
from coordinator.cli.origin_options import (
    check_origin_options,
    counter_of,
    custom_origin,
    http_settings,
    key_source,
)
from coordinator.cli.service_options import black_box
from coordinator.cli.traffic_options import check_think_open_loop, with_trace
from coordinator.cli.workload_options import (
    apply_preset,
    build_workload,
    stage_warning,
    trial_seconds,
)
from coordinator.config import HttpSettings, LaunchConfig
from coordinator.console import Console
from coordinator.defaults import Timing
from coordinator.experiment import run_experiment
from coordinator.faults.injector import Injector
from coordinator.faults.net import LinkControl
from coordinator.manifest import mask_argv
from coordinator.observe.session import ObserveOptions, Observer
from coordinator.observe.session import check as observe_check
from coordinator.origin.seed import OriginNotReady
from coordinator.probe import Unreachable, wait_for
from coordinator.stack import EmbeddedStack, StackError
from coordinator.stack.processes import guarded
from coordinator.stack.reaper import Reaper
from coordinator.trials.clock import ClockError
from coordinator.trials.dispatch import DispatchError, client_app
from coordinator.trials.liveness import LossPolicy, WorkersLost
from coordinator.trials.plan import ExpiryMode
from model.custom import OriginKind
from model.http.origin import HttpPoolTimeout
from model.http.response import HttpStatusError
from model.http.target import HttpTarget
from model.services import ClientDriver, RedisPath, Services
from model.wire import InvalidResult
from results.outputs import summary
from results.store import rundir
from strategies import parse as parse_strategy
from strategies.base import CacheServer

# Failures of the run itself (not of the input): exit 1 with one line.
RUN_ERRORS = (StackError, DispatchError, redis.RedisError, psycopg.Error, CeleryError, OSError,
              TimeoutError, ClockError, OriginNotReady, InvalidResult, urllib3.exceptions.HTTPError,
              HttpStatusError, HttpPoolTimeout, AppTierError, PrimeFailed)


class RunFailed(RuntimeError):
    """The run could not finish; completed trials are kept."""


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def timing_from(options: dict[str, Any]) -> Timing:
    """The default timing, with ``--worker-timeout``, ``--worker-silence`` and
    ``--service-timeout`` when given."""
    timing = Timing()
    if options.get("worker_timeout") is not None:
        timing = replace(timing, worker_wait_s=float(options["worker_timeout"]))
    if options.get("worker_silence_s") is not None:
        timing = replace(timing, worker_silence_s=float(options["worker_silence_s"]))
    if options.get("service_timeout") is not None:
        timing = replace(timing, service_wait_s=float(options["service_timeout"]))
    return timing


def _keys_given(ctx: click.Context | None) -> bool:
    """``--keys`` typed (or from a preset) rather than its default."""
    return ctx is not None and ctx.get_parameter_source("keys") not in (ParameterSource.DEFAULT,
                                                                         None)


def config_from(options: dict[str, Any]) -> LaunchConfig:
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        options = apply_preset(ctx, options)
    check_think_open_loop(ctx, options)
    box = black_box(ctx, options)
    origin = custom_origin(options)
    check_origin_options(options, origin)
    http = origin.kind is OriginKind.HTTP or (box is not None and not options.get("origin_dsn"))
    services = services_from(options, http)
    given = None if services is not None else given_from(options, http)
    out = options["out"] or Path("runs") / new_run_id()
    own_db = bool(given and given.origin_dsn)  # the user's database beside the embedded stack
    seed = (options["seed"] if options["seed"] is not None
            else services is None and not own_db and origin.builtin)
    workload = with_trace(build_workload(options, origin), options, _keys_given(ctx))
    timing = timing_from(options)
    seconds = trial_seconds(workload, options["seconds"], timing.warmup_s, options["ttl_s"])
    if (warning := stage_warning(workload, options["seconds"])) is not None:
        click.echo(f"coordinator: warning: {warning}", err=True)
    config = LaunchConfig(
        workers=options["workers"], clients=options["clients"], strategies=options["strategies"],
        ttl_s=options["ttl_s"], seconds=seconds,
        repeat=options["repeat"], out=out, services=services, scale=options["scale"],
        pool_size=options["pool_size"], origin_target_ms=options["origin_target_ms"], seed=seed,
        keys=primed_keys(workload), timing=timing, workload=workload,
        force_clock=bool(options.get("force_clock")),
        faults=tuple(options.get("faults") or ()),
        net_control=options.get("net_control") or None,
        expiry=ExpiryMode(options.get("expiry") or ExpiryMode.DRIFT),
        on_worker_loss=LossPolicy(options.get("on_worker_loss") or LossPolicy.CONTINUE),
        redis_client=RedisPath(options.get("redis_client") or RedisPath.LEAN),
        client_driver=ClientDriver(options.get("client_driver") or ClientDriver.THREADS),
        preset=options.get("preset"), command=mask_argv(typed_argv(), services or given),
        given=given, key_source=key_source(options, _keys_given(ctx) and not origin.builtin),
        counter=counter_of(options),
        plugins=tuple(options.get("plugins") or ()), http=http_settings(options),
        app=app_settings(options),
    )
    if box is not None:  # every trial an HTTP trial against the service (its strategy a stand-in)
        config = replace(config, service=box, strategies=(parse_strategy("naive"),),
                         http_target=black_box_target(config.http, box.url))
    check_config(config)
    return config


def black_box_target(http: HttpSettings, url: str) -> HttpTarget:
    try:
        return http.target(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--service-url") from None


def typed_argv() -> list[str]:
    """The command line as typed: ``main`` keeps it in the root context, else ``sys.argv``."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    if isinstance(obj, dict) and isinstance(obj.get("argv"), list):
        return [str(a) for a in obj["argv"]]
    return ["coordinator", *sys.argv[1:]]


def open_run_dir(out: Path) -> rundir.RunWriter:
    try:
        return rundir.RunWriter.create(out)
    except rundir.RunExists as exc:
        raise click.BadParameter(f"{exc}; choose another directory", param_hint="--out") from None
    except OSError as exc:
        raise click.BadParameter(f"cannot create {out}: {exc.strerror}", param_hint="--out") from None


def check_reachable(services: Services | None, timeout_s: float,
                    say: Callable[[str], None]) -> None:
    """Remote services must answer before anything starts; those not up yet (just started with
    the coordinator) are waited for up to ``timeout_s``, with progress. Else bad input, exit 2."""
    if services is None:
        return
    try:
        wait_for(services, timeout_s, say)
    except Unreachable as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None


def launch(options: dict[str, Any]) -> Path:
    config = config_from(options)
    watch = observe_check(bool(options.get("observe")), options.get("metrics_port"),
                          config.workers, config.embedded)
    return execute(config, quiet=bool(options.get("quiet")), observe=watch,
                   target_width=options.get("target_width"))


def checked_services(config: LaunchConfig, console: Console) -> LaunchConfig:
    """The given services answer (a remote app tier too) and the user's origin is resolved
    (bad input: exit 2)."""
    check_reachable(config.services or config.given, config.timing.service_wait_s, console.say)
    if config.app.on and config.services is not None:
        try:
            remote_tier_answers(config, config.services, console.progress)
        except AppTierError as exc:
            raise click.BadParameter(str(exc), param_hint="--app-url") from None
    if config.workload.origin.builtin:
        return config
    config = resolve_origin(config)
    if config.service is not None:
        config = black_box_probe.resolve(config, console.say)
    check_config(config)
    return config


def start_services(stack: contextlib.ExitStack, config: LaunchConfig, observer: Observer,
                   console: Console, net: LinkControl | None
                   ) -> tuple[Services, Injector | None, EmbeddedStack | None]:
    """The run's services (the embedded stack started for what is not given) and fault hooks."""
    if config.services is not None:
        if net is None:
            return config.services, None, None
        links = Injector(None, config.faults, config.seconds, console.say, net=net)
        stack.callback(links.close)
        links.open()
        return config.services, links, None
    embedded = stack.enter_context(EmbeddedStack(
        config.workers, say=console.say, metrics_ports=observer.worker_ports(config.workers),
        memcached=CacheServer.MEMCACHED in config.cache_servers, given=config.given,
        postgres=config.started_postgres, app=(config.app.processes, config.app.threads),
        app_kind=config.app.kind,
        fronts=tuple(sorted({front_of(s) for s in config.strategies} - {""})),
        clients=config.clients))
    hooks = Injector(embedded, config.faults, config.seconds, console.say) if config.faults else None
    return embedded.services, hooks, embedded


def tier_place(config: LaunchConfig, embedded: EmbeddedStack | None) -> TierPlace | None:
    """Where the run's app tier is: the embedded stack's, or the URLs given (None: no tier)."""
    if not config.app.on:
        return None
    if embedded is not None:
        return TierPlace(embedded.app_url, embedded.fronts, embedded.scale_app)
    return TierPlace(config.app.url, remote_fronts(config.app.fronts))


def execute(config: LaunchConfig, quiet: bool = False, observe: ObserveOptions | None = None,
            target_width: float | None = None) -> Path:
    """Run ``config`` into its run directory, print the summary table (its notes say what an
    interval ``target_width`` % wide would take); return the directory."""
    console = Console(quiet=quiet)
    config = checked_services(config, console)
    net = link_control(config)
    writer = open_run_dir(config.out)
    console.say(f"run {writer.root.name}: {len(config.strategies)} strategies x {config.repeat} "
                f"repeats, {config.workers} workers, {config.clients} clients, ttl {config.ttl_s:g} s,"
                f" {config.seconds:g} s per trial -> {writer.root}")
    observer = Observer(observe or ObserveOptions(), writer.root, console.say)
    try:
        with contextlib.ExitStack() as stack:
            reaper = Reaper()  # first: whatever follows dies with us, should we be killed
            stack.callback(reaper.close)
            stack.enter_context(guarded(reaper))
            services, hooks, watched = start_services(stack, config, observer, console, net)
            stack.enter_context(observer.running(services, watched))
            app = client_app(services.broker_url)
            stack.callback(app.close)
            state = run_experiment(config, services, app, writer, console, hooks,
                                   tier_place(config, watched))
    except RUN_ERRORS as exc:
        raise RunFailed(f"{type(exc).__name__}: {exc} (completed trials are in {writer.root})") from exc
    except WorkersLost:  # --on-worker-loss fail: the completed trials' table, then exit 3
        if (writer.root / "trials.parquet").exists():
            click.echo(summary.render_summary(writer.root, target_width=target_width))
        raise
    click.echo(summary.render_summary(writer.root, target_width=target_width))
    console.say(f"rows: {writer.root}/requests/   trials: {writer.root}/trials.parquet")
    if state.roster is not None and state.roster.degraded:
        raise WorkersLost(f"run degraded: {state.roster.describe()} (run.json status degraded)")
    return writer.root
