"""A Varnish front from the system (Debian's varnish 7.1), started and reconfigured between
trials.

``varnishd -F`` stays in the foreground with its work directory (``-n``) in the front's area;
its manager and the cacher child it forks share one process group (the reaper's), and the child
stops by itself when the manager's CLI pipe closes. As root Varnish's own jail drops privileges
(the cacher runs as ``vcache``, the VCL compiler as ``varnish``: Debian's package makes both
users); as another user it runs as that user. The VCL is compiled with the system's C compiler
(Debian's varnish depends on gcc).

``apply`` loads the new VCL through the admin port (``varnishadm vcl.load``, ``vcl.use``),
discards the old one and bans every object (``ban obj.status != 0``), so every configuration
starts with an empty cache while the counters keep counting; it returns once
``/stampede/config`` answers the new generation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from coordinator.stack.http_caches.counters import parse_varnishstat
from coordinator.stack.http_caches.front import FrontBase, write_text
from coordinator.stack.http_caches.params import VarnishParams, config_id
from coordinator.stack.http_caches.vcl import render_vcl
from coordinator.stack.processes import StackError, free_port

INSTALL_HINT = "install varnish >= 7.1: apt-get install varnish (or make http-deps)"
STORAGE_MB = 256
ADMIN_TIMEOUT_S = 30.0


def find_tool(name: str) -> str:
    """varnishd, varnishadm or varnishstat: on PATH or in Debian's /usr/sbin, /usr/bin."""
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        if candidate and Path(candidate).exists():
            return candidate
    raise StackError(f"no {name} found: {INSTALL_HINT}")


class VarnishFront(FrontBase):
    """``front.start(VarnishParams(), ["127.0.0.1:8000"])``, then ``front.url``."""

    kind = "varnish"

    def __init__(self, workdir: Path | None = None, host: str = "127.0.0.1",
                 port: int | None = None, storage_mb: int = STORAGE_MB) -> None:
        super().__init__(workdir, host, port)
        self.storage_mb = storage_mb
        self.instance = self.area / "varnishd"  # varnishd -n: shared memory, secret, compiled VCL
        self.backends: tuple[str, ...] = ()
        self.params = VarnishParams()

    def start(self, params: VarnishParams, upstreams: Sequence[str]) -> None:
        """Start varnishd with ``params`` in front of ``upstreams`` (host:port each); return
        once it answers with this configuration."""
        self._not_started()
        self.backends = tuple(upstreams)
        self.params = params
        vcl = self._write(params, self.generation)
        argv = [find_tool("varnishd"), "-F", "-n", str(self.instance),
                "-a", f"{self.host}:{self.port}", "-T", f"127.0.0.1:{free_port()}",
                "-f", str(vcl), "-s", f"malloc,{self.storage_mb}m"]
        self._launch(argv, "varnishd.log", config_id(params), stop_timeout_s=10.0)

    def apply(self, params: VarnishParams) -> None:
        """Load and use a VCL of ``params``, drop the old one, ban every object; block until
        live. A VCL Varnish refuses (``vcl.load``) leaves the running one untouched."""
        self._running()
        old = "boot" if self.generation == 0 else f"g{self.generation}"
        name = f"g{self.generation + 1}"
        vcl = self._write(params, self.generation + 1)
        self._admin("vcl.load", name, str(vcl))
        self._admin("vcl.use", name)
        self.generation, self.params = self.generation + 1, params
        self._admin("vcl.discard", old)
        self._admin("ban", "obj.status", "!=", "0")
        self._wait_live(config_id(params))

    def _write(self, params: VarnishParams, generation: int) -> Path:
        return write_text(self.area / f"g{generation}.vcl",
                          render_vcl(params, self.backends, generation))

    def _admin(self, *command: str) -> str:
        done = subprocess.run([find_tool("varnishadm"), "-n", str(self.instance), *command],
                              capture_output=True, text=True, timeout=ADMIN_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise StackError(f"varnishadm {' '.join(command)}: rc {done.returncode}: "
                             f"{(done.stdout + done.stderr).strip()[-1500:]}")
        return done.stdout

    def counters(self) -> dict[str, int]:
        """``varnishstat -j``'s MAIN counters of VARNISH_COUNTERS (they keep counting across
        apply) and the gauge MAIN.n_object."""
        self._running()
        done = subprocess.run([find_tool("varnishstat"), "-n", str(self.instance), "-j"],
                              capture_output=True, timeout=ADMIN_TIMEOUT_S, check=False,
                              env={**os.environ, "LC_ALL": "C"})
        if done.returncode != 0:
            raise StackError(f"varnishstat: rc {done.returncode}: {done.stderr.decode()[-500:]}")
        return parse_varnishstat(done.stdout)
