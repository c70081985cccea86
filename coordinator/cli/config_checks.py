"""The launch's checks of option combinations, before anything starts: one line, exit 2."""

from __future__ import annotations

import click

from coordinator import faults
from coordinator.cli.app_options import check_app_tier
from coordinator.cli.given import check_given_faults
from coordinator.config import LaunchConfig
from coordinator.faults.net import LinkControl, NetControlError
from coordinator.trials.plan import ExpiryMode, PlanError
from model.services import ClientDriver, RedisPath, mask_url
from strategies import InvalidStrategy
from strategies.base import CacheServer


def check_config(config: LaunchConfig) -> None:
    """Bad combinations of options (or of a manifest and new services): one line, exit 2."""
    on_links = tuple(f for f in config.faults if f.target is faults.Target.NET)
    on_processes = tuple(f for f in config.faults if f.target is not faults.Target.NET)
    if on_processes and config.services is not None:
        raise click.BadParameter(
            f"{faults.label(on_processes)}: faults act on the embedded stack's own processes; "
            "not allowed with remote services (drop --fault or the service URLs)",
            param_hint="--fault")
    check_given_faults(config, on_processes)
    if config.net_control is not None:
        try:
            LinkControl.parse(config.net_control)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--net-control") from None
    if on_links and (config.net_control is None or config.services is None):
        raise click.BadParameter(
            f"{faults.label(on_links)}: net: faults act on the links of the namespace lab; they need "
            "its services (--cache-url ...) and its link control (--net-control HOST:PORT or "
            "STAMPEDE_NET_CONTROL)", param_hint="--fault")
    try:
        config.schedule().check()
    except PlanError as exc:
        raise click.UsageError(str(exc)) from None
    check_caches(config)
    check_app_tier(config)
    check_client_driver(config)
    try:
        faults.check(config.faults, config.seconds, workers=config.workers)
    except faults.FaultError as exc:
        raise click.BadParameter(str(exc), param_hint="--fault") from None


def check_caches(config: LaunchConfig) -> None:
    """Every strategy's cache is there (remote services), and its TTLs and expiry mode are ones
    it can run with; else one line naming the option."""
    aligned = config.expiry is ExpiryMode.ALIGNED
    for spec in config.strategies:
        kind = spec.cache_server
        if config.services is not None and config.services.cache_url_for(kind) is None:
            have = mask_url(config.services.cache_url)
            need = ("give --memcache-url memcache://HOST:PORT (or --cache-url memcache://...)"
                    if kind is CacheServer.MEMCACHED else "give a redis:// --cache-url")
            raise click.BadParameter(f"{spec.label} keeps its values on {kind.value}, and the "
                                     f"cache is {have}: {need}", param_hint="--strategies")
        try:
            for ep in config.workload.endpoints:
                spec.check_run(ep.ttl_ms, aligned)
        except InvalidStrategy as exc:
            raise click.BadParameter(str(exc), param_hint="--ttl") from None


def check_client_driver(config: LaunchConfig) -> None:
    """``--client-driver asyncio`` runs the strategies ported to strategies.core, in the clients
    themselves, or an HTTP run's GETs; what it cannot run: one line naming the option, exit 2."""
    if config.client_driver is not ClientDriver.ASYNCIO or _over_http(config):
        return
    from strategies.drivers.aio import for_asyncio  # noqa: PLC0415 - redis.asyncio: only here

    refused = _asyncio_refuses(config)
    if refused:
        raise click.BadParameter(refused, param_hint="--client-driver")
    for spec in config.strategies:
        try:
            for ep in config.workload.endpoints:
                for_asyncio(spec, ep.ttl_ms)
        except InvalidStrategy as exc:
            raise click.BadParameter(f"asyncio cannot run {spec.label}: {exc} (use --client-driver "
                                     "threads for it)", param_hint="--client-driver") from None


def _over_http(config: LaunchConfig) -> bool:
    """The run's clients speak HTTP (an app tier, a black-box service, a URL template): the
    strategies run behind the target, and asyncio clients only send its GETs."""
    return config.http_target is not None or config.service is not None or config.app.on


def _asyncio_refuses(config: LaunchConfig) -> str:
    """What of the run's other options the asyncio driver cannot serve ('' : nothing)."""
    if config.workload.invalidate_rate > 0:
        return "asyncio has no origin writer: drop --invalidate-rate or use threads"
    if config.redis_client is RedisPath.POOLED:
        return ("asyncio gives each client a connection of its own (worker.aio.connection); --redis-client "
                "pooled is the threads' shared pool (drop it)")
    return ""


def link_control(config: LaunchConfig) -> LinkControl | None:
    """The lab's link control when net: faults need it; bad input (exit 2) when it cannot serve them."""
    on_links = tuple(f for f in config.faults if f.target is faults.Target.NET)
    if not on_links or config.net_control is None:
        return None
    try:
        control = LinkControl.parse(config.net_control)
        unknown = control.unknown(on_links)
    except (ValueError, NetControlError) as exc:
        raise click.BadParameter(str(exc), param_hint="--net-control") from None
    if unknown:
        raise click.BadParameter(f"the lab routes no link {', '.join(unknown)} (it routes "
                                 f"{', '.join(control.links()) or 'none'})", param_hint="--fault")
    return control
