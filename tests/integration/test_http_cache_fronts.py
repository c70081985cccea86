"""The fronts as processes: every configuration the parameters allow is one nginx 1.22 and
Varnish 7.1 accept (``nginx -t``, ``varnishd -C``), and a killed coordinator takes its fronts
with it (the launch's reaper kills their process groups and removes their work areas)."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from coordinator.stack.http_caches import NginxParams, UseStale, VarnishParams
from coordinator.stack.http_caches.nginx import find_nginx
from coordinator.stack.http_caches.nginx_conf import NginxLayout, NginxSite, render_nginx
from coordinator.stack.http_caches.varnish import find_tool
from coordinator.stack.http_caches.vcl import render_vcl
from tests.helpers import ROOT
from tests.http_cache_load import missing_servers

pytestmark = pytest.mark.skipif(missing_servers() is not None, reason=str(missing_servers()))


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory Varnish's unprivileged users can read (pytest's tmp_path sits under a 0700
    directory)."""
    path = Path(tempfile.mkdtemp(prefix="stampede-vcl-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def nginx_grid() -> list[NginxParams]:
    grid = []
    for lock, stale, background in itertools.product((False, True), UseStale, (False, True)):
        if background and not stale.updating:
            continue  # refused by NginxParams: nginx would accept it and do nothing
        grid.append(NginxParams(lock=lock, use_stale=stale, background_update=background,
                                lock_timeout_ms=250, lock_age_ms=750))
    return grid


def test_nginx_accepts_every_configuration_the_parameters_allow(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    grid = nginx_grid()
    assert len(grid) == 12
    for index, params in enumerate(grid):
        area = tmp_path / str(index)
        area.mkdir()
        conf = area / "nginx.conf"
        site = NginxSite("127.0.0.1:1", ("127.0.0.1:2", "127.0.0.1:3"), "auto", generation=index)
        conf.write_text(render_nginx(params, site, NginxLayout.under(area)))
        done = subprocess.run([find_nginx(), "-t", "-c", str(conf), "-p", str(area)],
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, f"{params}: {done.stderr}"


def test_varnish_compiles_the_vcl_of_several_app_servers(open_dir: Path) -> None:
    """``varnishd -C`` compiles the VCL to C and exits: the round-robin director over two app
    servers (vmod_directors). Each kind of VCL with one backend is compiled by ``vcl.load`` in
    tests/integration/test_http_caches.py."""
    vcl = open_dir / "x.vcl"
    vcl.write_text(render_vcl(VarnishParams(grace_s=0.25, ignore_busy=True), ("127.0.0.1:2", "127.0.0.1:3")))
    vcl.chmod(0o644)
    done = subprocess.run([find_tool("varnishd"), "-C", "-f", str(vcl), "-n", str(open_dir / "n")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "VGC_function_vcl_recv" in done.stdout + done.stderr


CHILD = """
import sys, time, orjson
from coordinator.stack.reaper import Reaper
from coordinator.stack.processes import guarded
from coordinator.stack.http_caches import NginxFront, NginxParams, VarnishFront, VarnishParams
reaper = Reaper()
with guarded(reaper):
    nginx, varnish = NginxFront(), VarnishFront()
    nginx.start(NginxParams(lock=True), ["127.0.0.1:9"])
    varnish.start(VarnishParams(), ["127.0.0.1:9"])
    nginx.apply(NginxParams())  # a reload: its new workers are in the same group
print(orjson.dumps({"groups": [nginx.process.pid, varnish.process.pid],
                    "areas": [str(nginx.area), str(varnish.area)]}).decode(), flush=True)
time.sleep(60)
"""


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_coordinator_takes_its_fronts_with_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        assert child.stdout is not None
        started = orjson.loads(child.stdout.readline())
        assert all(group_alive(g) for g in started["groups"])
        assert all(Path(a).is_dir() for a in started["areas"])
        os.kill(child.pid, signal.SIGKILL)  # no finally runs in the child: only its reaper acts
        child.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(map(group_alive, started["groups"])):
            time.sleep(0.1)
        assert not any(map(group_alive, started["groups"])), started
        while time.monotonic() < deadline and any(Path(a).exists() for a in started["areas"]):
            time.sleep(0.1)
        assert not any(Path(a).exists() for a in started["areas"])
    finally:
        if child.poll() is None:
            child.kill()
