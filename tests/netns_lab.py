"""Hosts made of Linux network namespaces, joined by a bridge that lives in a namespace of its own.

Nothing is attached to the machine's own interfaces: every address (10.77.0.x) exists only inside
these namespaces, and every process that talks to one runs inside a namespace (``ip netns exec``).
Everything is removed by ``close`` (processes by PID first, then the namespaces).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.stack.processes import ManagedProcess

SUBNET = "10.77.0"
CMD_TIMEOUT_S = 10


def netns_available() -> str | None:
    """None when namespaces can be made here, else the reason to skip."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    probe = f"slprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True,
                          timeout=CMD_TIMEOUT_S, check=False)
    if made.returncode != 0:
        return f"ip netns unavailable: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], timeout=CMD_TIMEOUT_S, check=False)
    return None


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=CMD_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class Lab:
    """``lab.host("cache")`` -> (namespace, address); ``lab.run_in(ns)`` -> argv prefix."""

    tag: str = field(default_factory=lambda: f"sl{os.getpid() % 100000}")
    namespaces: list[str] = field(default_factory=list)
    processes: list[ManagedProcess] = field(default_factory=list)
    hosts: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def bridge_ns(self) -> str:
        return f"{self.tag}-br"

    def open(self) -> None:
        self._add_ns(self.bridge_ns)
        ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        ip("-n", self.bridge_ns, "link", "set", "br0", "up")

    def host(self, role: str) -> tuple[str, str]:
        """A namespace with one interface on the bridge and the next free address."""
        index = len(self.hosts) + 1
        ns, address, port = f"{self.tag}-{role}", f"{SUBNET}.{index + 1}", f"p{index}"
        self._add_ns(ns)
        ip("-n", self.bridge_ns, "link", "add", port, "type", "veth", "peer", "name", "eth0",
           "netns", ns)
        ip("-n", self.bridge_ns, "link", "set", port, "master", "br0")
        ip("-n", self.bridge_ns, "link", "set", port, "up")
        ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        self.hosts[role] = (ns, address)
        return ns, address

    @staticmethod
    def run_in(ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def _add_ns(self, ns: str) -> None:
        ip("netns", "add", ns)
        self.namespaces.append(ns)

    def close(self) -> None:
        """Stop our processes, kill what is left in our namespaces, delete the namespaces."""
        for proc in reversed(self.processes):
            with contextlib.suppress(Exception):
                proc.stop(timeout_s=5)
        for ns in reversed(self.namespaces):
            _kill_left_in(ns)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True,
                           timeout=CMD_TIMEOUT_S, check=False)


def _kill_left_in(ns: str) -> None:
    """Every PID in a namespace this lab created was started by this lab."""
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                         timeout=CMD_TIMEOUT_S, check=False).stdout
    for pid in (int(p) for p in out.split() if p.isdigit()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)



@contextlib.contextmanager
def lab_in(prefix: str) -> Iterator[tuple[Lab, Path]]:
    """An open lab and a short work directory (unix socket paths live there), both removed after."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    workdir.chmod(0o755)
    net = Lab()
    try:
        net.open()
        yield net, workdir
    finally:
        net.close()
        subprocess.run(["rm", "-rf", str(workdir)], check=False, timeout=30)
