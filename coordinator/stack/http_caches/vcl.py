"""Varnish 7.1's VCL for a front in front of the app tier, rendered from VarnishParams (pure).

Our subroutines run before Varnish's built-in VCL and return only where they must (synth, pass,
lookup), so the built-in rules stay in force (methods, cookies, hit-for-miss for an uncacheable
response). The TTL is the app's ``Cache-Control: max-age`` (Varnish's own parsing: nothing here
sets ``beresp.ttl``); ``beresp.grace`` comes from the parameters and ``beresp.keep`` is 0; the
hash is the URL alone (not the Host). ``X-Cache-Status`` says how each response was produced,
set in the subroutine that produced it: ``hit`` (vcl_hit, ``obj.ttl > 0``; a request woken from
the waiting list also lands here), ``grace`` (vcl_hit with ``obj.ttl <= 0``: an expired copy
served within grace while a background fetch refreshes it), ``miss`` (vcl_miss: this request
fetched, hit-for-miss included) and ``pass`` (vcl_pass). Like the nginx front it answers
``/stampede/floor`` (204) and ``/stampede/config`` (JSON) itself.
"""

from __future__ import annotations

import json

from coordinator.stack.http_caches.nginx_conf import CONFIG_PATH, FLOOR_PATH, STATUS_HEADER
from coordinator.stack.http_caches.params import VarnishParams, as_dict, config_id


def config_body(params: VarnishParams, generation: int = 0) -> str:
    """What ``/stampede/config`` answers: the front, its parameters, their hash, the generation."""
    return json.dumps({"front": "varnish", "id": config_id(params), "generation": generation,
                       "params": as_dict(params)}, sort_keys=True, separators=(",", ":"))


def render_vcl(params: VarnishParams, backends: tuple[str, ...], generation: int = 0) -> str:
    """The VCL program: one backend per app server (a round-robin director over several)."""
    if not backends:
        raise ValueError("a Varnish front needs at least one backend host:port")
    return "\n".join([
        f"# Rendered by coordinator.stack.http_caches (varnish {config_id(params)}): do not edit.",
        "vcl 4.1;",
        *(["import directors;"] if len(backends) > 1 else []),
        "",
        *_backends(backends),
        *_recv(params, len(backends) > 1),
        "sub vcl_hash {",
        "    hash_data(req.url);",
        "    return (lookup);",
        "}",
        "",
        "sub vcl_hit {",
        "    if (obj.ttl <= 0s) {",
        f'        set req.http.{STATUS_HEADER} = "grace";',
        "    } else {",
        f'        set req.http.{STATUS_HEADER} = "hit";',
        "    }",
        "}",
        "",
        f'sub vcl_miss {{ set req.http.{STATUS_HEADER} = "miss"; }}',
        f'sub vcl_pass {{ set req.http.{STATUS_HEADER} = "pass"; }}',
        f"sub vcl_backend_fetch {{ unset bereq.http.{STATUS_HEADER}; }}",
        "",
        "sub vcl_backend_response {",
        f"    set beresp.grace = {params.grace_s:.3f}s;",
        "    set beresp.keep = 0s;",
        "}",
        "",
        f"sub vcl_deliver {{ set resp.http.{STATUS_HEADER} = req.http.{STATUS_HEADER}; }}",
        "",
        *_synth(params, generation),
        "",
    ])


def _backends(backends: tuple[str, ...]) -> list[str]:
    lines: list[str] = []
    for index, address in enumerate(backends):
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or any(c in address for c in ' "{};\n'):
            raise ValueError(f"backend {address!r} is not host:port")
        lines += [f"backend app{index} {{", f'    .host = "{host}";', f'    .port = "{port}";',
                  "    .first_byte_timeout = 60s;", "}", ""]
    if len(backends) > 1:
        adds = [f"    app.add_backend(app{i});" for i in range(len(backends))]
        lines += ["sub vcl_init {", "    new app = directors.round_robin();", *adds, "}", ""]
    return lines


def _recv(params: VarnishParams, director: bool) -> list[str]:
    body = [
        f'if (req.url == "{FLOOR_PATH}") {{ return (synth(204)); }}',
        f'if (req.url == "{CONFIG_PATH}") {{ return (synth(200)); }}',
    ]
    if director:
        body.append("set req.backend_hint = app.backend();")
    if not params.coalesce:
        body.append("return (pass);  # coalescing defeated: every request to the backend")
    if params.ignore_busy:
        body.append("set req.hash_ignore_busy = true;  # no waiting list")
    return ["sub vcl_recv {", *("    " + line for line in body), "}", ""]


def _synth(params: VarnishParams, generation: int) -> list[str]:
    return [
        "sub vcl_synth {",
        "    if (resp.status == 204) {",
        "        return (deliver);",
        "    }",
        f'    if (req.url == "{CONFIG_PATH}") {{',
        '        set resp.http.Content-Type = "application/json";',
        f'        set resp.body = {{"{config_body(params, generation)}"}};',
        "        return (deliver);",
        "    }",
        "}",
    ]
