"""Which services a launch is given and which the embedded stack starts, and the user's origin
resolved before anything starts (coordinator launch, coordinator rerun).

All of cache, lock store, broker and an origin given: remote mode, nothing is started (the
workers are elsewhere, listening on that broker). Anything less: the embedded stack starts the
rest and its own workers, pointed at the mix (``--origin-dsn`` alone: your database, everything
else local). An HTTP origin (``--origin-url``) needs no PostgreSQL.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from coordinator import faults
from coordinator.config import LaunchConfig
from coordinator.origin import user as own_origin
from model.custom import InvalidOrigin, OriginKind
from model.services import ENV, Services
from model.workload import Workload


def primed_keys(workload: Workload) -> tuple[str, ...]:
    """The keys primed before each trial; their TTL periods are the trial's expiry events."""
    return tuple(k for ep in workload.endpoints if ep.prime for k in ep.key_names())


def services_from(options: dict[str, Any], http: bool = False) -> Services | None:
    """Remote services: cache, lock store, broker and an origin (``--origin-dsn``, or none for
    an HTTP origin) all given: nothing is started. Anything less: None (see ``given_from``)."""
    given = given_from(options, http)
    if given is None:
        return None
    needed = [n for n in ENV if n != "origin_dsn" or not http]
    return given if all(getattr(given, n) for n in needed) else None


def given_from(options: dict[str, Any], http: bool = False) -> Services | None:
    """The services given by URL (``""`` where the embedded stack starts one); None: none
    given. An HTTP origin (``--origin-url``) uses no PostgreSQL: its DSN is not taken."""
    given = {name: str(options.get(name) or "") for name in ENV}
    if http:
        given["origin_dsn"] = ""
    memcache = str(options.get("memcache_url") or "")
    if not any(given.values()) and not memcache:
        return None
    return Services(**given, memcache_url=memcache)


def check_given_faults(config: LaunchConfig, on_processes: tuple[faults.Fault, ...]) -> None:
    """A fault on a service given by URL: the stack has no process of it to act on."""
    given = config.given
    targets = {"cache": "cache_url", "lock-store": "lock_url", "broker": "broker_url",
               "origin": "origin_dsn"}
    for fault in on_processes:
        field = targets.get(fault.target.value)
        if field and ((given is not None and getattr(given, field)) or
                      (field == "origin_dsn" and not config.started_postgres)):
            raise click.BadParameter(f"{fault.label}: the {fault.target.value} is not a process "
                                     "of the embedded stack (given by URL, or an HTTP origin)",
                                     param_hint="--fault")


def resolve_origin(config: LaunchConfig) -> LaunchConfig:
    """The user's origin tried and its keys read, before anything is started or written;
    bad input (exit 2) names the option."""
    origin = config.workload.origin
    if origin.builtin:
        return config
    services = config.services or config.given or Services("", "", "", "")
    try:
        workload = own_origin.resolve(config.workload, config.key_source, services)
        if origin.kind is OriginKind.HTTP:
            own_origin.http_check(config.counter)
    except InvalidOrigin as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None
    return replace(config, workload=workload, keys=primed_keys(workload))
