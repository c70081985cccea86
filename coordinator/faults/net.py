"""The namespace lab's link control, as the coordinator reaches it (``--net-control HOST:PORT``).

The lab routes each link it can disturb (``w1-cache``: worker host w1 to the cache host) through a
router host that runs the link daemon (``tests/linkd.py``): partitions and loss are nftables rules
that drop the link's packets on the router, latency is added by the daemon's relay. The protocol
is one line per TCP connection, each answered with one line:

    links                       -> ok w1-cache w2-cache
    partition LINK on|off       -> ok LINK partitioned (nftables: drop both ways)
    delay LINK MS               -> ok LINK +MS ms each way
    loss LINK PCT               -> ok LINK drops PCT % of packets
    reset                       -> ok every link clear

anything else -> ``error WHY``. A link is named ``A-B`` in either order.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass

from coordinator.faults.spec import Action, Fault

ENV = "STAMPEDE_NET_CONTROL"
TIMEOUT_S = 5.0  # bound on one request to the link control


class NetControlError(OSError):
    """The link control could not be reached or refused a request."""


@dataclass(frozen=True)
class LinkControl:
    host: str
    port: int
    timeout_s: float = TIMEOUT_S

    @classmethod
    def parse(cls, endpoint: str) -> LinkControl:
        """``HOST:PORT``; ValueError says what is wrong."""
        host, sep, port = endpoint.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{endpoint!r} is not HOST:PORT")
        return cls(host, int(port))

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def ask(self, *words: str) -> str:
        """Send one request; return the text after ``ok`` (NetControlError on anything else)."""
        line = " ".join(words)
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout_s) as sock:
                sock.sendall(line.encode() + b"\n")
                reply = sock.makefile("rb").readline().decode(errors="replace").strip()
        except OSError as exc:
            raise NetControlError(f"link control {self.endpoint}: {line!r}: {exc}") from None
        status, _, text = reply.partition(" ")
        if status != "ok":
            raise NetControlError(f"link control {self.endpoint}: {line!r}: {reply or 'no answer'}")
        return text

    def links(self) -> list[str]:
        return self.ask("links").split()

    def unknown(self, faults: tuple[Fault, ...]) -> list[str]:
        """The links the faults name that the lab does not route (in either order)."""
        known = set(self.links())
        return [f.link for f in faults
                if f.link and f.link not in known and _reverse(f.link, known) is None]

    def apply(self, fault: Fault) -> tuple[str, Callable[[], None]]:
        """Set the fault on its link; return what was done and how to lift it."""
        link = str(fault.link)
        if fault.action is Action.PARTITION:
            detail = self.ask("partition", link, "on")
            return detail, lambda: self._lift("partition", link, "off")
        value = f"{fault.value:g}"
        detail = self.ask(str(fault.action), link, value)
        return detail, lambda: self._lift(str(fault.action), link, "0")

    def _lift(self, *words: str) -> None:
        self.ask(*words)


def _reverse(link: str, known: set[str]) -> str | None:
    """``B-A`` for ``A-B`` among the known links (host names may hold hyphens themselves)."""
    for name in known:
        for cut in range(1, len(name)):
            if name[cut] == "-" and f"{name[cut + 1:]}-{name[:cut]}" == link:
                return name
    return None
