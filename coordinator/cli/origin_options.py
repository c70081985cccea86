"""``coordinator launch`` options for the user's own origin: a statement on their PostgreSQL or an
HTTP service, its keys and its counter. Each bad value is one line naming the option (exit 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from coordinator.config import HttpSettings
from coordinator.origin.user import Counter, KeySource
from model.custom import CustomOrigin, InvalidOrigin, OriginKind
from model.http.target import parse_header
from model.workload import Endpoint, KeySet, Query

F = TypeVar("F", bound=Callable[..., Any])


def _text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A statement inline, or ``@FILE``: the file's text."""
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {value[1:]}: {getattr(exc, 'strerror', exc)}",
                                 ctx, param) from None


def _headers(ctx: click.Context, param: click.Parameter,
             value: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Each ``--http-header 'Name: value'`` as a pair; a malformed one is one line (exit 2)."""
    try:
        return tuple(parse_header(text) for text in value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def http_settings(options: dict[str, Any]) -> HttpSettings:
    """The HTTP clients' settings the options give."""
    return HttpSettings(tuple(options.get("http_headers") or ()),
                        float(options.get("http_connect_ms") or 1000.0),
                        float(options.get("http_read_ms") or 5000.0),
                        verify=not options.get("http_insecure"))


def origin_options(func: F) -> F:
    """The user's origin, its keys and its counter (README "Your own stack")."""
    options = [
        click.option("--origin-sql", callback=_text, default=None, metavar="SQL|@FILE",
                     help="Your statement as the origin, on --origin-dsn: a SELECT taking the "
                          "key as its one parameter (%s or $1). No seeding, no calibration."),
        click.option("--keys-sql", callback=_text, default=None, metavar="SQL|@FILE",
                     help="A SELECT on --origin-dsn whose first column is the keys, hottest "
                          "first (read once, in a read-only transaction)."),
        click.option("--keys-file", type=click.Path(dir_okay=False), default=None,
                     help="The keys, one per line, hottest first (# starts a comment line)."),
        click.option("--write-sql", callback=_text, default=None, metavar="SQL|@FILE",
                     help="With --invalidate-rate: your statement that changes the key's row "
                          "(the only writes made; versions kept in key_writes)."),
        click.option("--allow-writes", is_flag=True,
                     help="Run an --origin-sql that is not a SELECT, in sessions that may write."),
        click.option("--origin-url", default=None, metavar="URL",
                     help="An HTTP service as the origin: GET URL with {key} replaced, e.g. "
                          "'http://HOST:PORT/items/{key}'."),
        click.option("--http-connect-ms", type=click.FloatRange(1, 600_000), default=1000.0,
                     show_default=True, help="Connect timeout of --origin-url and of the HTTP "
                                             "clients (HTTP trials)."),
        click.option("--http-read-ms", type=click.FloatRange(1, 600_000), default=5000.0,
                     show_default=True, help="Read timeout of --origin-url and of the HTTP "
                                             "clients (HTTP trials)."),
        click.option("--http-header", "http_headers", multiple=True, callback=_headers,
                     metavar="'NAME: VALUE'",
                     help="A header the HTTP clients send on every request (repeatable; the "
                          "values of Authorization, Cookie and names with key, token, secret "
                          "or auth are masked in run.json)."),
        click.option("--http-insecure", is_flag=True,
                     help="https: do not check the server's certificate (checked by default)."),
        click.option("--origin-counter-url", default=None, metavar="URL",
                     help="--origin-url: the service's Prometheus metrics page, read before and "
                          "after each trial (none: calls unchecked)."),
        click.option("--origin-counter-name", default=None, metavar="NAME",
                     help="The counter of the calls on --origin-counter-url: NAME or "
                          "NAME{label=\"value\"}."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _bad(option: str, message: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint=option)


def custom_origin(options: dict[str, Any]) -> CustomOrigin:
    """The origin the options name (the built-in one when neither --origin-sql nor --origin-url)."""
    sql, url = options.get("origin_sql"), options.get("origin_url")
    if sql is not None and url is not None:
        raise _bad("--origin-url", "give --origin-sql or --origin-url, not both")
    try:
        if options.get("service_url") is not None:  # a black box: its origin is its own
            return CustomOrigin(OriginKind.SERVICE, options["service_url"])
        if url is not None:
            return CustomOrigin(OriginKind.HTTP, url,
                                connect_timeout_s=float(options["http_connect_ms"]) / 1000,
                                read_timeout_s=float(options["http_read_ms"]) / 1000)
        if sql is not None:
            return CustomOrigin(OriginKind.SQL, sql, write=(options.get("write_sql") or "").strip(),
                                writes_allowed=bool(options.get("allow_writes")))
    except InvalidOrigin as exc:
        raise _bad(exc.option, str(exc)) from None
    return CustomOrigin()


def check_origin_options(options: dict[str, Any], origin: CustomOrigin) -> None:
    """Combinations that cannot run: one line naming the option."""
    _check_counter_pair(options)
    if origin.builtin:
        _check_builtin(options)
        return
    _check_keys(options, origin)
    _check_writes(options, origin)
    if options.get("origin_counter_url") and origin.kind not in (OriginKind.HTTP, OriginKind.SERVICE):
        raise _bad("--origin-counter-url", "--origin-sql is counted by pg_stat_statements")
    if options.get("mix") not in (None, "orders"):
        raise _bad("--mix", "your own origin is one endpoint (drop --mix)")
    if options.get("seed"):
        raise _bad("--seed", "your own origin is never seeded (drop --seed)")


def _check_counter_pair(options: dict[str, Any]) -> None:
    """A counter's name without its page (or the page without the name) with any origin: the
    name alone was ignored without a word (issue 31)."""
    if options.get("origin_counter_name") and not options.get("origin_counter_url"):
        raise _bad("--origin-counter-name", "names a counter on --origin-counter-url, and none is "
                                            "given: give both (with --origin-url) or neither")
    if options.get("origin_counter_url") and not options.get("origin_counter_name"):
        raise _bad("--origin-counter-url", "give --origin-counter-url and --origin-counter-name "
                                           "together")


def _check_builtin(options: dict[str, Any]) -> None:
    for name in ("keys_sql", "keys_file", "write_sql", "origin_counter_url", "allow_writes"):
        if options.get(name):
            raise _bad("--" + name.replace("_", "-"), "needs your own origin (--origin-sql or "
                       "--origin-url); the built-in origin names its keys with --keys")


def _check_keys(options: dict[str, Any], origin: CustomOrigin) -> None:
    given = [n for n in ("keys_sql", "keys_file", "keys_trace") if options.get(n)]
    if len(given) != 1:
        raise _bad("--keys-sql", "your own origin needs its keys from exactly one of --keys-sql, "
                                 "--keys-file, --keys-trace"
                                 + (f" (given: {', '.join(given)})" if given else ""))
    on_db = origin.kind is OriginKind.SQL or (origin.kind is OriginKind.SERVICE
                                              and bool(options.get("origin_dsn")))
    if options.get("keys_sql") and not on_db:
        raise _bad("--keys-sql", "reads the keys from --origin-dsn: with --origin-url give "
                                 "--keys-file")
    if origin.kind is OriginKind.SQL and not options.get("origin_dsn"):
        raise _bad("--origin-sql", "runs on your database: give --origin-dsn (or "
                                   "STAMPEDE_ORIGIN_DSN)")


def _check_writes(options: dict[str, Any], origin: CustomOrigin) -> None:
    rate = float(options.get("invalidate_rate") or 0)
    if origin.write and rate <= 0:
        raise _bad("--write-sql", "writes only at --invalidate-rate R (writes per second)")
    if rate > 0 and not origin.write:
        raise _bad("--invalidate-rate", "your own origin is written only by --write-sql "
                                        "(--origin-sql) and never over HTTP")


def custom_endpoints(origin: CustomOrigin, ttl_ms: int) -> tuple[Endpoint, ...]:
    """The one endpoint of a user's origin; its keys are read at the start of the run."""
    query = Query.SQL if origin.kind is OriginKind.SQL else Query.HTTP
    return (Endpoint(query.value, query, KeySet(), ttl_ms),)


def key_source(options: dict[str, Any], keys_given: bool) -> KeySource:
    """Where the keys come from; ``--keys`` counts only when given explicitly."""
    asked: KeySet | None = options["keys"] if keys_given else None
    return KeySource(sql=(options.get("keys_sql") or "").strip(),
                     file=options.get("keys_file") or "", keys=asked)


def counter_of(options: dict[str, Any]) -> Counter:
    return Counter(options.get("origin_counter_url") or "", options.get("origin_counter_name") or "")
