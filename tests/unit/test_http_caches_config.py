"""nginx's and Varnish's parameters, their rendered configurations and counters, pure: what each
spec parses into, what it refuses and why, and what each parameter changes in the text the
servers run (the servers themselves: tests/integration/test_http_caches.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from coordinator.stack.http_caches import FRONTS, NginxParams, UseStale, VarnishParams, config_id
from coordinator.stack.http_caches.counters import (
    VARNISH_COUNTERS,
    VARNISH_GAUGES,
    CounterError,
    deltas,
    parse_stub_status,
    parse_varnishstat,
    varnish_origin_requests,
)
from coordinator.stack.http_caches.nginx_conf import NginxLayout, NginxSite, render_nginx
from coordinator.stack.http_caches.params import parse_params, spec_label
from coordinator.stack.http_caches.render import main as render_main
from coordinator.stack.http_caches.render import render
from coordinator.stack.http_caches.vcl import render_vcl
from strategies import registry
from tests.helpers import ROOT

SITE = NginxSite("127.0.0.1:8080", ("127.0.0.1:9001", "127.0.0.1:9002"))
LAYOUT = NginxLayout.under(Path("/srv/front"))


def nginx_conf(params: NginxParams, site: NginxSite = SITE) -> str:
    return render_nginx(params, site, LAYOUT)


# --- parameters: the specs of issue 32, through the strategy registry's own parser ----------


@dataclass
class _Front:
    """A stand-in strategy class: what the lead registers carries these Params."""

    name: ClassVar[str]
    Params: ClassVar[type[Any]]


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, params in FRONTS.items():
        cls = type(f"Test{name}", (_Front,), {"name": f"test-{name}", "Params": params})
        monkeypatch.setitem(registry._REGISTRY, f"test-{name}", cls)


@pytest.mark.parametrize(("spec", "expected"), [
    ("nginx", NginxParams()),
    ("nginx:lock=on", NginxParams(lock=True)),
    ("nginx:lock=on,use_stale=updating,background_update=on",
     NginxParams(lock=True, use_stale=UseStale.UPDATING, background_update=True)),
    ("nginx:lock=on,lock_timeout_ms=250,lock_age_ms=1000",
     NginxParams(lock=True, lock_timeout_ms=250, lock_age_ms=1000)),
    ("nginx:use_stale=error+updating", NginxParams(use_stale=UseStale.ERROR_UPDATING)),
    ("varnish", VarnishParams()),
    ("varnish:grace_s=0", VarnishParams(grace_s=0.0)),
    ("varnish:coalesce=off", VarnishParams(coalesce=False)),
    ("varnish:grace_s=0,ignore_busy=on", VarnishParams(grace_s=0.0, ignore_busy=True)),
])
def test_specs_parse_through_the_registry_and_here_alike(registered: None, spec: str,
                                                         expected: Any) -> None:
    name, _, raw = spec.partition(":")
    parsed = registry.parse(f"test-{spec}")
    assert FRONTS[name](**parsed.params) == expected
    assert parse_params(name, raw) == expected
    assert parse_params(*f"{spec_label(expected)}:".split(":")[:2]) == expected  # round trip


@pytest.mark.parametrize(("spec", "message"), [
    ("nginx:background_update=on", "background_update=on needs use_stale=updating"),
    ("nginx:use_stale=error,background_update=on", "background_update=on needs use_stale=updating"),
    ("nginx:use_stale=sometimes", "is not one of off|updating|error|error+updating"),
    ("nginx:lock_timeout_ms=0", "lock_timeout_ms must be a whole number of milliseconds >= 1"),
    ("nginx:lock=maybe", "is not a boolean"),
    ("varnish:grace_s=-1", "grace_s must be a number of seconds in [0, 86400]"),
    ("varnish:grace_s=inf", "not a finite number"),
    ("varnish:coalesce=off,ignore_busy=on", "ignore_busy=on means nothing with coalesce=off"),
    ("varnish:ttl_s=1", "unknown parameter 'ttl_s'"),
])
def test_bad_specs_say_which_parameter_and_what_is_allowed(registered: None, spec: str,
                                                           message: str) -> None:
    with pytest.raises(registry.InvalidStrategy, match=re.escape(message)):
        registry.parse(f"test-{spec}")


def test_the_params_classes_refuse_bad_values_themselves() -> None:
    with pytest.raises(ValueError, match="use_stale must be one of"):
        NginxParams(use_stale="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lock_age_ms"):
        NginxParams(lock_age_ms=True)
    with pytest.raises(ValueError, match="grace_s"):
        VarnishParams(grace_s=float("nan"))
    assert NginxParams(use_stale="updating").use_stale is UseStale.UPDATING  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown HTTP cache 'squid'"):
        parse_params("squid", "")


def test_config_id_is_stable_and_tells_every_parameter_apart() -> None:
    ids = {config_id(p) for p in (NginxParams(), NginxParams(lock=True), NginxParams(lock_age_ms=4999),
                                  VarnishParams(), VarnishParams(grace_s=0), VarnishParams(coalesce=False))}
    assert len(ids) == 6
    assert config_id(NginxParams(lock=True)) == config_id(parse_params("nginx", "lock=on"))


# --- nginx.conf -----------------------------------------------------------------------------


def directives(text: str) -> list[str]:
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def test_nginx_defaults_are_nginx_s_own_and_the_ttl_is_the_upstream_s() -> None:
    lines = directives(nginx_conf(NginxParams()))
    for expected in ("proxy_cache_lock off;", "proxy_cache_lock_timeout 5000ms;",
                     "proxy_cache_lock_age 5000ms;", "proxy_cache_use_stale off;",
                     "proxy_cache_background_update off;", "proxy_cache_key $request_uri;",
                     "add_header X-Cache-Status $upstream_cache_status always;",
                     "proxy_http_version 1.1;", 'proxy_set_header Connection "";',
                     "server 127.0.0.1:9001;", "server 127.0.0.1:9002;", "keepalive 64;",
                     "listen 127.0.0.1:8080 backlog=4096;", "daemon off;", "worker_processes 1;",
                     "location = /stampede/floor { return 204; }",
                     "location = /stampede/status { stub_status; }", "pid /srv/front/nginx.pid;"):
        assert expected in lines, expected
    text = "\n".join(lines)
    for overriding in ("proxy_cache_valid", "proxy_ignore_headers", "proxy_hide_header", "expires",
                       "proxy_cache_min_uses", "proxy_no_cache", "proxy_cache_bypass", "user "):
        assert overriding not in text, overriding


@pytest.mark.parametrize(("params", "expected"), [
    (NginxParams(lock=True), "proxy_cache_lock on;"),
    (NginxParams(lock_timeout_ms=250), "proxy_cache_lock_timeout 250ms;"),
    (NginxParams(lock_age_ms=750), "proxy_cache_lock_age 750ms;"),
    (NginxParams(use_stale=UseStale.UPDATING), "proxy_cache_use_stale updating;"),
    (NginxParams(use_stale=UseStale.ERROR),
     "proxy_cache_use_stale error timeout http_500 http_502 http_503 http_504;"),
    (NginxParams(use_stale=UseStale.UPDATING, background_update=True),
     "proxy_cache_background_update on;"),
])
def test_each_nginx_parameter_reaches_its_directive(params: NginxParams, expected: str) -> None:
    assert expected in directives(nginx_conf(params))
    assert expected not in directives(nginx_conf(NginxParams()))


def test_each_nginx_generation_has_a_cache_of_its_own_and_says_so_at_stampede_config() -> None:
    params = NginxParams(lock=True)
    first, second = (nginx_conf(params, NginxSite("127.0.0.1:8080", ("h:1",), generation=g))
                     for g in (0, 1))
    assert "proxy_cache_path /srv/front/cache-g0 levels=1:2 keys_zone=stampede_g0:16m" in first
    assert "proxy_cache stampede_g1;" in second and "/srv/front/cache-g1 " in second
    [body] = re.findall(r"return 200 '(.*)';", second)
    assert json.loads(body) == {"front": "nginx", "id": config_id(params), "generation": 1,
                                "params": {"lock": True, "use_stale": "off", "background_update": False,
                                           "lock_timeout_ms": 5000, "lock_age_ms": 5000}}


@pytest.mark.parametrize("site", [
    {"listen": "127.0.0.1:8080", "upstreams": ()},
    {"listen": "127.0.0.1", "upstreams": ("h:1",)},
    {"listen": "127.0.0.1:8080", "upstreams": ("h:99999",)},
    {"listen": "127.0.0.1:8080", "upstreams": ("h:1; evil",)},
    {"listen": "127.0.0.1:8080", "upstreams": ("h:1",), "worker_processes": "many"},
])
def test_a_bad_site_is_refused(site: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"upstream|host:port|worker_processes"):
        NginxSite(**site)


# --- VCL ------------------------------------------------------------------------------------


def test_vcl_defaults_keep_the_ttl_hash_the_url_and_name_each_status() -> None:
    text = render_vcl(VarnishParams(), ("127.0.0.1:9001",))
    assert text.splitlines()[1] == "vcl 4.1;"
    assert "set beresp.grace = 10.000s;" in text and "set beresp.keep = 0s;" in text
    assert "beresp.ttl" not in text  # the TTL is the app's max-age, parsed by Varnish
    assert "hash_data(req.url);" in text and "req.http.host" not in text.lower()
    for status in ("hit", "grace", "miss", "pass"):
        assert f'set req.http.X-Cache-Status = "{status}";' in text
    assert "return (pass)" not in text and "hash_ignore_busy" not in text
    assert 'if (req.url == "/stampede/floor") { return (synth(204)); }' in text
    assert "import directors;" not in text and '.host = "127.0.0.1";' in text


def test_vcl_parameters_change_grace_pass_and_the_waiting_list() -> None:
    assert "set beresp.grace = 0.000s;" in render_vcl(VarnishParams(grace_s=0), ("h:1",))
    passing = render_vcl(VarnishParams(coalesce=False), ("h:1",))
    assert "    return (pass);  # coalescing defeated: every request to the backend" in passing
    busy = render_vcl(VarnishParams(ignore_busy=True), ("h:1",))
    assert "    set req.hash_ignore_busy = true;  # no waiting list" in busy


def test_vcl_with_several_app_servers_balances_them_round_robin() -> None:
    text = render_vcl(VarnishParams(), ("10.0.0.1:8000", "10.0.0.2:8000"), generation=3)
    assert "import directors;" in text and "new app = directors.round_robin();" in text
    assert "app.add_backend(app0);" in text and "app.add_backend(app1);" in text
    assert "set req.backend_hint = app.backend();" in text
    [body] = re.findall(r'set resp.body = \{"(.*)"\};', text)
    assert json.loads(body)["generation"] == 3
    for bad in ((), ("no-port",), ('h:1"; }',)):
        with pytest.raises(ValueError, match="backend"):
            render_vcl(VarnishParams(), bad)


# --- counters -------------------------------------------------------------------------------


def varnishstat_json(**values: int) -> bytes:
    counters = {name: {"description": name, "flag": "c", "format": "i", "value": values.get(name, 0)}
                for name in (*VARNISH_COUNTERS, *VARNISH_GAUGES, "MGT.uptime")}
    return json.dumps({"version": 1, "timestamp": "2026-12-01T20:24:07", "counters": counters}).encode()


def test_varnishstat_counters_are_read_by_name_and_never_guessed() -> None:
    read = parse_varnishstat(varnishstat_json(**{"MAIN.busy_sleep": 7, "MAIN.backend_req": 9,
                                                 "MAIN.backend_retry": 2}))
    assert read["MAIN.busy_sleep"] == 7 and read["MAIN.backend_req"] == 9
    assert varnish_origin_requests(read) == 7  # a retry on a recycled connection never arrived
    assert set(read) == {*VARNISH_COUNTERS, *VARNISH_GAUGES}  # no MAIN.n_waitinglist in 7.1
    old_layout = json.loads(varnishstat_json())["counters"]  # Varnish 6: counters at the top
    assert parse_varnishstat(json.dumps(old_layout))["MAIN.cache_hit"] == 0
    broken = json.loads(varnishstat_json())
    del broken["counters"]["MAIN.cache_hit_grace"]
    with pytest.raises(CounterError, match=r"MAIN\.cache_hit_grace"):
        parse_varnishstat(json.dumps(broken))


def test_stub_status_and_deltas() -> None:
    page = ("Active connections: 17 \nserver accepts handled requests\n 25 25 7435 \n"
            "Reading: 0 Writing: 16 Waiting: 1 \n")
    assert parse_stub_status(page) == {"active": 17, "accepts": 25, "handled": 25, "requests": 7435,
                                       "reading": 0, "writing": 16, "waiting": 1}
    with pytest.raises(CounterError, match="stub_status"):
        parse_stub_status("<html>502 Bad Gateway</html>")
    assert deltas({"requests": 5}, {"requests": 9}, ("requests",)) == {"requests": 4}
    with pytest.raises(CounterError, match="restarted"):
        deltas({"requests": 9}, {"requests": 5}, ("requests",))


# --- the deployments' files come from the renderers -----------------------------------------


@pytest.mark.parametrize(("front", "path"), [("nginx", "nginx.conf"), ("varnish", "default.vcl")])
def test_the_deployed_configs_are_the_renderers_output(front: str, path: str) -> None:
    """deploy/http-caches/ is mounted by docker-compose.yml; after a renderer change:
    python -m coordinator.stack.http_caches.render FRONT --out deploy/http-caches/FILE."""
    assert (ROOT / "deploy" / "http-caches" / path).read_text() == render(front), (
        f"deploy/http-caches/{path} is stale: python -m coordinator.stack.http_caches.render "
        f"{front} --out deploy/http-caches/{path}")


def test_render_writes_a_file_and_bad_input_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "v.vcl"
    assert render_main(["varnish", "--params", "grace_s=0", "--upstream", "a:1", "--out", str(out)]) == 0
    assert out.read_text() == render_vcl(VarnishParams(grace_s=0), ("a:1",))
    assert render_main(["nginx", "--params", "background_update=on"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("render nginx: background_update=on needs")


def test_every_front_spec_the_docs_show_parses() -> None:
    """docs/http-caches.md's specs, through the fronts' own parser (once the fronts are registered
    as strategies, tests/unit/test_docs_strategies.py reads them through the registry too)."""
    text = (ROOT / "docs" / "http-caches.md").read_text()
    shown = set(re.findall(r"`((?:nginx|varnish)(?::[a-z_]+=[^`,\s]+(?:,[a-z_]+=[^`,\s]+)*)?)`", text))
    assert len(shown) >= 8, shown
    for spec in shown:
        kind, _, raw = spec.partition(":")
        parse_params(kind, raw)
