"""nginx and Varnish as HTTP caches in front of the app tier: their parameters (the
``nginx:...`` and ``varnish:...`` specs), pure renderers of their configurations, the processes
that run them between trials, and their own counters."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from coordinator.stack.http_caches.counters import (
    NGINX_COUNTERS,
    VARNISH_COUNTERS,
    CounterError,
    deltas,
    varnish_origin_requests,
)
from coordinator.stack.http_caches.nginx import NginxFront
from coordinator.stack.http_caches.params import (
    FRONTS,
    FrontParams,
    NginxParams,
    UseStale,
    VarnishParams,
    config_id,
    spec_label,
)
from coordinator.stack.http_caches.varnish import VarnishFront

Front = NginxFront | VarnishFront
FRONT_TYPES: dict[str, type[NginxFront] | type[VarnishFront]] = {
    "nginx": NginxFront, "varnish": VarnishFront}


def start_front(params: FrontParams, upstreams: Sequence[str], workdir: Path | None = None) -> Front:
    """The front ``params`` belong to, started in front of ``upstreams`` (host:port each) and
    answering with ``params``; ``apply`` then reconfigures it between trials, ``stop`` ends it."""
    if isinstance(params, NginxParams):
        nginx = NginxFront(workdir)
        nginx.start(params, upstreams)
        return nginx
    varnish = VarnishFront(workdir)
    varnish.start(params, upstreams)
    return varnish

__all__ = ["FRONTS", "FRONT_TYPES", "NGINX_COUNTERS", "VARNISH_COUNTERS", "CounterError", "Front",
           "FrontParams", "NginxFront", "NginxParams", "UseStale", "VarnishFront", "VarnishParams",
           "config_id", "deltas", "spec_label", "start_front", "varnish_origin_requests"]
