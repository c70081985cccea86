"""``--app-servers`` and the options that go with it: the app tier, and the HTTP caches in
front of it when the tier is remote (docs/http.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

from coordinator import defaults
from coordinator.config import AppTierSettings, LaunchConfig
from model.apptier import APP_KINDS
from strategies import StrategySpec
from strategies.fronts import is_front
from strategies.registry import strategy_class

F = TypeVar("F", bound=Callable[..., Any])
APP_URL_ENV = "STAMPEDE_APP_URL"
FRONT_URL_ENV = {"nginx": "STAMPEDE_NGINX_URL", "varnish": "STAMPEDE_VARNISH_URL"}


def _http_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if not value:
        return None
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (
            parts.port is None or 0 < parts.port < 65536) and parts.path in ("", "/")
    except ValueError:
        ok = False
    if not ok:
        raise click.BadParameter(f"{value!r} is not http(s)://HOST[:PORT] (no path)", ctx, param)
    return value.rstrip("/")


def app_options(func: F) -> F:
    """The app tier's options, in the order the help lists them."""
    for name, env in reversed(list(FRONT_URL_ENV.items())):
        func = click.option(
            f"--{name}-url", f"{name}_url", envvar=env, callback=_http_url, default=None,
            help=f"Remote: the {name} in front of the app tier, for {name} strategies "
                 f"[env {env}]; embedded stack: started for them.")(func)
    func = click.option(
        "--app-url", envvar=APP_URL_ENV, callback=_http_url, default=None,
        help=f"Remote: the app tier's front door (its load-balanced service, e.g. "
             f"http://app:8000) [env {APP_URL_ENV}]; embedded stack: started.")(func)
    func = click.option(
        "--app-kind", type=click.Choice(APP_KINDS), default="wsgi", show_default=True,
        help="What an app process is: wsgi (granian, request threads) or asgi (uvicorn on "
             "uvloop, one event loop per process: our ported strategies on the asyncio driver, "
             "and the asyncio libraries cashews and aiocache).")(func)
    func = click.option(
        "--app-threads", type=click.IntRange(1, 1024), default=defaults.APP_THREADS,
        show_default=True, help="Request threads per app process (granian's blocking threads, WSGI); with "
             "--app-kind asgi the requests in flight its connection pools are sized for.")(func)
    return click.option(
        "--app-servers", callback=_counts, default="0", show_default=True, metavar="N[,N...]",
        help="App-server processes hosting the strategies behind HTTP (the clients reach them "
             "over HTTP; nginx and varnish strategies stand in front of them); a list (1,2,4) "
             "runs every strategy at each count (embedded stack); 0: the strategy runs in each "
             "client thread, as in the seeds.")(func)


def _counts(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    """``4`` or ``1,2,4``: each a whole number of processes in [1, 256], or one 0 (none)."""
    try:
        counts = tuple(int(v) for v in str(value).split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not N or a list N,N,... of whole numbers", ctx,
                                 param) from None
    if counts == (0,):
        return ()
    if not all(1 <= c <= 256 for c in counts) or len(set(counts)) != len(counts):
        raise click.BadParameter(f"{value!r}: each count must be in [1, 256], none twice (0 "
                                 "alone: no app tier)", ctx, param)
    return counts


def app_settings(options: dict[str, Any]) -> AppTierSettings:
    fronts = tuple((name, options[f"{name}_url"]) for name in FRONT_URL_ENV
                   if options.get(f"{name}_url"))
    return AppTierSettings(counts=tuple(options.get("app_servers") or ()),
                           threads=int(options.get("app_threads") or defaults.APP_THREADS),
                           kind=str(options.get("app_kind") or "wsgi"),
                           url=options.get("app_url") or "", fronts=fronts)


def embedded_limit() -> int:
    """The most app processes the embedded stack starts on this host (per core, see defaults)."""
    return defaults.APP_PROCESSES_PER_CORE * (os.cpu_count() or 1)


def check_app_tier(config: LaunchConfig) -> None:
    """The app tier's options fit each other, the strategies and the host (one line, exit 2)."""
    app = config.app
    fronts = [s for s in config.strategies if is_front(s.name)]
    _check_kind(config)
    if fronts and not app.on:
        raise click.BadParameter(f"{fronts[0].label} stands in front of the app tier: give "
                                 "--app-servers N (the processes it caches for)",
                                 param_hint="--strategies")
    if not app.on:
        for flag, given in (("--app-url", app.url), *((f"--{n}-url", u) for n, u in app.fronts)):
            if given:
                raise click.BadParameter("needs --app-servers N (the app tier it belongs to)",
                                         param_hint=flag)
        return
    _check_where(config)
    _check_fronts(config)
    workload = config.workload
    if workload.invalidate_rate > 0 or any(workload.bypass_at(s) > 0 for s in range(workload.stages)):
        raise click.BadParameter("origin writes and cache bypass are not measured through the app "
                                 "tier (drop --invalidate-rate / --bypass, or --app-servers)",
                                 param_hint="--app-servers")


def _check_kind(config: LaunchConfig) -> None:
    """An asyncio library runs on the asgi tier only; the asgi tier runs our ported strategies
    and those libraries, with no HTTP cache in front (not yet)."""
    app = config.app
    if app.kind == "asgi" and not app.on:
        raise click.BadParameter("asgi is an app tier's kind: give --app-servers N too",
                                 param_hint="--app-kind")
    for spec in config.strategies:
        if spec.is_async and app.kind != "asgi":
            raise click.BadParameter(f"{spec.label} is an asyncio library: it runs in the asyncio "
                                     "app tier only (--app-servers N --app-kind asgi)",
                                     param_hint="--strategies")
        if app.kind == "asgi" and is_front(spec.name):
            raise click.BadParameter(f"{spec.label}: the asgi app tier has no HTTP cache in front "
                                     "yet (use --app-kind wsgi)", param_hint="--strategies")
        if app.kind == "asgi" and not spec.is_async and not ported(spec):
            raise click.BadParameter(f"{spec.label} is not ported to strategies.core: the asgi "
                                     "app tier runs ported strategies and the asyncio libraries",
                                     param_hint="--strategies")


def ported(spec: StrategySpec) -> bool:
    """One of ours whose logic is a strategies.core generator (the asyncio driver runs it;
    under on_cache_error=origin too: strategies.core.fallback)."""
    return bool(getattr(strategy_class(spec.name), "sans_io", False))


def _check_where(config: LaunchConfig) -> None:
    """Embedded: within what the host holds, nothing remote named; remote: the tier's URL."""
    app = config.app
    if config.embedded and max(app.counts) > (limit := embedded_limit()):
        raise click.BadParameter(
            f"{max(app.counts)} is more than the embedded stack runs on this host: at most {limit} "
            f"({defaults.APP_PROCESSES_PER_CORE} per core; each is a Python process sharing the "
            "cores with the workers and the servers)", param_hint="--app-servers")
    if config.embedded and (app.url or app.fronts):
        raise click.BadParameter("is for a remote app tier; the embedded stack starts its own",
                                 param_hint="--app-url" if app.url else f"--{app.fronts[0][0]}-url")
    if not config.embedded and len(app.counts) > 1:
        raise click.BadParameter("a list of counts needs the embedded stack (it scales its own "
                                 "app tier); a remote tier has the processes its deployment runs",
                                 param_hint="--app-servers")
    if not config.embedded and not app.url:
        raise click.BadParameter("remote services: give the app tier's URL (e.g. http://app:8000)",
                                 param_hint="--app-url")


def _check_fronts(config: LaunchConfig) -> None:
    """Each HTTP cache is there (remote) and can keep the TTL (whole seconds of max-age)."""
    for spec in (s for s in config.strategies if is_front(s.name)):
        if not config.embedded and not config.app.front_url(spec.name):
            raise click.BadParameter(f"remote services: give the {spec.name} in front of the "
                                     "app tier", param_hint=f"--{spec.name}-url")
        if any(ep.ttl_ms % 1000 for ep in config.workload.endpoints):
            raise click.BadParameter(f"{spec.label} keeps an entry for the app's Cache-Control "
                                     "max-age, in whole seconds: give a whole number of seconds",
                                     param_hint="--ttl")
