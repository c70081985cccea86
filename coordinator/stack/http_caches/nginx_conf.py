"""nginx's configuration for a ``proxy_cache`` front, rendered from NginxParams (pure: no I/O).

What it keeps as nginx has it, on purpose: no ``proxy_cache_valid`` and no
``proxy_ignore_headers``, so an entry lives exactly as long as the app's ``Cache-Control:
max-age`` says (nginx counts it in whole seconds: an entry filled during second t with max-age=1
is fresh until second t+1 has passed); the cache key is the request URI alone. Every response
names its cache status (``X-Cache-Status: $upstream_cache_status``: MISS, HIT, EXPIRED, STALE,
UPDATING, BYPASS, REVALIDATED). The front answers three paths itself, never cached and never sent
upstream: ``/stampede/floor`` (204: the floor of one request through the front),
``/stampede/config`` (which parameters are live, as JSON) and ``/stampede/status``
(stub_status: nginx 1.22's only counters).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from coordinator.stack.http_caches.params import NginxParams, as_dict, config_id

FLOOR_PATH = "/stampede/floor"
CONFIG_PATH = "/stampede/config"
STATUS_PATH = "/stampede/status"
STATUS_HEADER = "X-Cache-Status"
UPSTREAM_KEEPALIVE = 64  # idle keep-alive connections to the app tier kept per worker


@dataclass(frozen=True)
class NginxLayout:
    """Where an nginx front keeps its files: cache, temporary files, pid, error log."""

    cache_dir: str
    temp_dir: str  # an existing directory: nginx-proxy, nginx-client_body... are made in it
    pid_path: str
    error_log: str  # a path, or ``stderr`` (containers)

    @classmethod
    def under(cls, workdir: Path) -> NginxLayout:
        """Everything inside ``workdir`` (the embedded stack's work area)."""
        return cls(str(workdir / "cache"), str(workdir), str(workdir / "nginx.pid"),
                   str(workdir / "error.log"))


# The image's layout (deploy/http-caches/nginx.conf): a writable /tmp and cache directory.
CONTAINER_LAYOUT = NginxLayout("/var/cache/nginx/stampede", "/tmp", "/tmp/nginx.pid", "stderr")


@dataclass(frozen=True)
class NginxSite:
    """Where the front listens and what it forwards to."""

    listen: str  # host:port, e.g. 127.0.0.1:8080 or 0.0.0.0:8080
    upstreams: tuple[str, ...]  # host:port of each app server
    worker_processes: str = "1"  # "1" or "auto" (one per core)
    generation: int = 0  # told apart by /stampede/config after a restart with the same params

    def __post_init__(self) -> None:
        if not self.upstreams:
            raise ValueError("an nginx front needs at least one upstream host:port")
        for address in (self.listen, *self.upstreams):
            _check_address(address)
        if self.worker_processes != "auto" and not self.worker_processes.isdigit():
            raise ValueError(f"worker_processes must be a number or auto, not {self.worker_processes!r}")


def _check_address(address: str) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(
            c in address for c in " ;{}'\"\n"):
        raise ValueError(f"{address!r} is not host:port")


def cache_path(layout: NginxLayout, generation: int) -> str:
    """Each generation's cache in a directory and a keys zone of its own: after a reload the
    entries of the previous configuration are not there (nginx refuses a zone whose path
    changed, so both change)."""
    return f"{layout.cache_dir}-g{generation}"


def zone(generation: int) -> str:
    return f"stampede_g{generation}"


def config_body(params: NginxParams, site: NginxSite) -> str:
    """What ``/stampede/config`` answers: the front, its parameters, their hash, the generation."""
    return json.dumps({"front": "nginx", "id": config_id(params), "generation": site.generation,
                       "params": as_dict(params)}, sort_keys=True, separators=(",", ":"))


def render_nginx(params: NginxParams, site: NginxSite, layout: NginxLayout) -> str:
    """The whole nginx.conf (run with ``nginx -c FILE``; ``daemon off``: it stays in the
    foreground)."""
    return "\n".join([
        f"# Rendered by coordinator.stack.http_caches (nginx {config_id(params)}): do not edit.",
        "daemon off;",
        f"worker_processes {site.worker_processes};",
        f"pid {layout.pid_path};",
        f"error_log {layout.error_log} warn;",
        "events { worker_connections 8192; }  # a client's connection and one upstream each",
        "http {",
        *_indent(_http(params, site, layout)),
        "}",
        "",
    ])


def _http(params: NginxParams, site: NginxSite, layout: NginxLayout) -> list[str]:
    temp = layout.temp_dir
    servers = [f"server {u};" for u in site.upstreams]
    return [
        "access_log off;",
        "default_type application/octet-stream;",
        "keepalive_requests 1000000;  # a client's keep-alive connection lasts the trial",
        *(f"{kind}_temp_path {temp}/nginx-{kind};"
          for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")),
        f"proxy_cache_path {cache_path(layout, site.generation)} levels=1:2 "
        f"keys_zone={zone(site.generation)}:16m max_size=512m inactive=10m use_temp_path=off;",
        "upstream app {", *_indent([*servers, f"keepalive {UPSTREAM_KEEPALIVE};"]), "}",
        "server {",
        *_indent(_server(params, site)),
        "}",
    ]


def _server(params: NginxParams, site: NginxSite) -> list[str]:
    return [
        f"listen {site.listen} backlog=4096;",
        f"location = {FLOOR_PATH} {{ return 204; }}",
        f"location = {CONFIG_PATH} {{",
        *_indent(["default_type application/json;", f"return 200 '{config_body(params, site)}';"]),
        "}",
        f"location = {STATUS_PATH} {{ stub_status; }}",
        "location / {",
        *_indent(_proxy(params, site.generation)),
        "}",
    ]


def _proxy(params: NginxParams, generation: int) -> list[str]:
    on = {True: "on", False: "off"}
    return [
        "proxy_pass http://app;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";  # keep-alive to the app tier',
        f"proxy_cache {zone(generation)};",
        "proxy_cache_key $request_uri;",
        f"proxy_cache_lock {on[params.lock]};",
        f"proxy_cache_lock_timeout {params.lock_timeout_ms}ms;",
        f"proxy_cache_lock_age {params.lock_age_ms}ms;",
        f"proxy_cache_use_stale {params.use_stale.directive_args};",
        f"proxy_cache_background_update {on[params.background_update]};",
        f"add_header {STATUS_HEADER} $upstream_cache_status always;",
    ]


def _indent(lines: Sequence[str]) -> list[str]:
    return ["    " + line for line in lines]
