"""``coordinator launch`` options for your running service as a black box (``--service-url``,
issue 33): the service, where its origin calls are counted, its cache. Each combination that
cannot run is one line naming the option (exit 2), before anything starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from coordinator.blackbox.settings import KEY, BlackBox, check_cache_key
from coordinator.origin.user import Counter
from coordinator.trials.plan import ExpiryMode

F = TypeVar("F", bound=Callable[..., Any])
ONLY_WITH_URL = ("service_name", "origin_statement", "service_cache_url")
NOT_WITH_URL = ("origin_sql", "origin_url", "write_sql", "invalidate_rate", "bypass")


def black_box_options(func: F) -> F:
    """The service, its count and its cache (README "Your running service", docs/black-box.md)."""
    options = [
        click.option("--service-url", default=None, metavar="URL",
                     help="Your running service as a black box: GET URL with {key} replaced, e.g. "
                          "'http://HOST:PORT/items/{key}'; it holds its own cache and defence "
                          "(no --strategies). Its origin calls are sampled during each trial."),
        click.option("--service-name", default=None, metavar="NAME",
                     help="--service-url: the table's strategy column [default: the URL template]."),
        click.option("--origin-statement", default=None, metavar="SQL|QUERYID",
                     help="--service-url: the statement the service runs on --origin-dsn, as "
                          "pg_stat_statements shows it (or its query id); its calls are sampled."),
        click.option("--service-cache-url", default=None, metavar="URL",
                     help="--service-url: the service's own Redis: its expiries observed where "
                          "its keyspace notifications are on (never reconfigured or flushed)."),
        click.option("--service-cache-key", default=KEY, show_default=True, metavar="PATTERN",
                     help="The Redis key the service caches a key under, e.g. 'item:{key}'."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _bad(option: str, message: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint=option)


def _given(value: Any) -> bool:
    """An option given a value other than nothing (``--bypass``'s default is ``[0.0]``)."""
    return any(value) if isinstance(value, list | tuple) else bool(value)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def black_box(ctx: click.Context | None, options: dict[str, Any]) -> BlackBox | None:
    """The black box the options name (None: no --service-url), or one line on what is wrong."""
    url = options.get("service_url")
    scheduled = options.get("expiry") == ExpiryMode.SCHEDULED_DELETE.value
    if url is None:
        _check_without_url(options, scheduled)
        return None
    _check_with_url(ctx, options)
    counter = Counter(options.get("origin_counter_url") or "", options.get("origin_counter_name") or "")
    if not options.get("origin_statement") and not counter.url:
        raise _bad("--service-url", "name where its origin calls are counted: --origin-dsn with "
                                    "--origin-statement (pg_stat_statements), or "
                                    "--origin-counter-url with --origin-counter-name (its counter)")
    if options.get("origin_statement") and not options.get("origin_dsn"):
        raise _bad("--origin-statement", "is read from pg_stat_statements on your database: "
                                         "give --origin-dsn (or STAMPEDE_ORIGIN_DSN)")
    if scheduled and not options.get("service_cache_url"):
        raise _bad("--expiry", "scheduled-delete deletes the keys on the service's cache: give "
                               "--service-cache-url (and --service-cache-key)")
    try:
        pattern = check_cache_key(options.get("service_cache_key") or KEY)
    except ValueError as exc:
        raise _bad("--service-cache-key", str(exc)) from None
    return BlackBox(url, options.get("service_name") or "", (options.get("origin_statement") or "").strip(),
                    counter, options.get("service_cache_url") or "", pattern, scheduled)


def _check_without_url(options: dict[str, Any], scheduled: bool) -> None:
    for name in ONLY_WITH_URL:
        if options.get(name):
            raise _bad(_flag(name), "belongs to --service-url (your running service): give it")
    if options.get("service_cache_key") not in (None, KEY):
        raise _bad("--service-cache-key", "belongs to --service-url and --service-cache-url")
    if scheduled:
        raise _bad("--expiry", "scheduled-delete deletes keys on your service's cache: it needs "
                               "--service-url and --service-cache-url")


def _check_with_url(ctx: click.Context | None, options: dict[str, Any]) -> None:
    if ctx is not None and ctx.get_parameter_source("strategies") not in (ParameterSource.DEFAULT,
                                                                           None):
        raise _bad("--strategies", "the service's defence is its own (--service-url): drop "
                                   "--strategies")
    for name in NOT_WITH_URL:
        if _given(options.get(name)):
            raise _bad(_flag(name), "the service is measured as it is (--service-url): drop it")
    if _given(options.get("app_servers")):
        raise _bad("--app-servers", "the service is its own app tier (--service-url): drop it")
    if options.get("service_cache_key") not in (None, KEY) and not options.get("service_cache_url"):
        raise _bad("--service-cache-key", "names keys on --service-cache-url: give it")
