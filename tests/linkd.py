"""The namespace lab's link daemon: a router host that carries the links the lab may disturb.

Run inside the router's namespace (``ip netns exec``), never on the machine's own interfaces:

    python -m tests.linkd --control 10.77.0.9:7000 --link w1,cache,7101,10.77.0.2:6379 ...

Each ``--link A,B,PORT,HOST:PORT`` listens on the control address's host at PORT and relays every
connection to HOST:PORT (host A is given that address instead of B's). What it can do to a link
(the protocol is in ``coordinator/faults/net.py``):

- **partition / loss**: nftables rules in the router's namespace that drop the link's packets
  (``tcp dport PORT`` in, ``tcp sport PORT`` out; loss with ``numgen random``): real silence, so
  TCP retransmits, connects and commands time out as across a cut cable.
- **delay**: the relay holds each chunk for MS ms before passing it on, in each direction
  (a reader thread stamps a chunk on arrival, a writer thread sends it at stamp + MS, so
  pipelined traffic is delayed once, not queued behind the one before). Threads and
  ``time.sleep`` because asyncio's epoll timers round up to whole milliseconds.

Prints ``ready`` once every socket listens.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

TABLE = "stampede_lab"
CHUNK = 65536


@dataclass
class Link:
    a: str
    b: str
    port: int
    target: tuple[str, int]
    delay_ns: int = 0
    partitioned: bool = False
    loss_pct: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    def named(self, name: str) -> bool:
        return name in (self.name, f"{self.b}-{self.a}")


@dataclass
class Direction:
    """One way of one relayed connection: chunks with the instant each may leave."""

    src: socket.socket
    dst: socket.socket
    link: Link
    queue: collections.deque[tuple[int, bytes]] = field(default_factory=collections.deque)
    ready: threading.Condition = field(default_factory=threading.Condition)

    def read(self) -> None:
        try:
            while data := self.src.recv(CHUNK):
                self._put(time.monotonic_ns() + self.link.delay_ns, data)
        except OSError:
            pass
        self._put(0, b"")  # end of stream

    def _put(self, due_ns: int, data: bytes) -> None:
        with self.ready:
            self.queue.append((due_ns, data))
            self.ready.notify()

    def write(self) -> None:
        try:
            while True:
                with self.ready:
                    self.ready.wait_for(lambda: bool(self.queue))
                    due_ns, data = self.queue.popleft()
                if not data:
                    self.dst.shutdown(socket.SHUT_WR)
                    return
                wait_ns = due_ns - time.monotonic_ns()
                if wait_ns > 0:
                    time.sleep(wait_ns / 1e9)
                self.dst.sendall(data)
        except OSError:
            for sock in (self.src, self.dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def relay(client: socket.socket, link: Link) -> None:
    """One connection: dial the target, then two directions with two threads each."""
    try:
        upstream = socket.create_connection(link.target, timeout=5)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    for sock in (client, upstream):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threads = []
    for src, dst in ((client, upstream), (upstream, client)):
        way = Direction(src, dst, link)
        threads += [threading.Thread(target=way.read, daemon=True),
                    threading.Thread(target=way.write, daemon=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, handle: Callable[..., None], *args: object) -> None:
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn, *args), daemon=True).start()


def listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    return sock


class Control:
    """The control protocol, and the nftables table that mirrors the links' drop state."""

    def __init__(self, links: list[Link]) -> None:
        self.links, self.mutex = links, threading.Lock()

    def handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                line = conn.makefile("rb").readline().decode(errors="replace")
                reply = self.answer(line.split())
            except Exception as exc:  # noqa: BLE001 - the caller gets the reason, the daemon lives on
                reply = f"error {type(exc).__name__}: {exc}"
            with contextlib.suppress(OSError):
                conn.sendall(reply.encode() + b"\n")

    def answer(self, words: list[str]) -> str:
        with self.mutex:
            if words == ["links"]:
                return "ok " + " ".join(link.name for link in self.links)
            if words == ["reset"]:
                for link in self.links:
                    link.delay_ns, link.partitioned, link.loss_pct = 0, False, 0.0
                self.apply_rules()
                return "ok every link clear"
            if len(words) != 3:
                return f"error not a request: {' '.join(words)!r}"
            verb, name, value = words
            found = [x for x in self.links if x.named(name)]
            if not found:
                return f"error no link {name} (links: {' '.join(x.name for x in self.links)})"
            return self.change(found[0], verb, value)

    def change(self, link: Link, verb: str, value: str) -> str:
        if verb == "delay":
            link.delay_ns = round(float(value) * 1e6)
            return f"ok {link.name} +{float(value):g} ms each way (relay on port {link.port})"
        if verb == "partition" and value in ("on", "off"):
            link.partitioned = value == "on"
            self.apply_rules()
            return (f"ok {link.name} partitioned (nftables drops port {link.port} both ways)"
                    if link.partitioned else f"ok {link.name} joined again")
        if verb == "loss":
            link.loss_pct = float(value)
            self.apply_rules()
            return f"ok {link.name} drops {link.loss_pct:g} % of packets (nftables, port {link.port})"
        return f"error unknown request {verb} {value}"

    def apply_rules(self) -> None:
        """Replace the whole table at once (``nft -f``): the links' drops, nothing else."""
        inbound, outbound = [], []
        for link in self.links:
            if link.partitioned:
                inbound.append(f"tcp dport {link.port} drop")
                outbound.append(f"tcp sport {link.port} drop")
            elif link.loss_pct > 0:
                below = round(link.loss_pct * 100)
                inbound.append(f"tcp dport {link.port} numgen random mod 10000 < {below} drop")
                outbound.append(f"tcp sport {link.port} numgen random mod 10000 < {below} drop")
        script = "\n".join([
            f"table inet {TABLE}", f"delete table inet {TABLE}", f"table inet {TABLE} {{",
            "  chain input { type filter hook input priority 0; policy accept;",
            *(f"    {rule}" for rule in inbound), "  }",
            "  chain output { type filter hook output priority 0; policy accept;",
            *(f"    {rule}" for rule in outbound), "  }", "}", ""])
        nft = shutil.which("nft")
        if nft is None:
            raise RuntimeError("nft (Debian package nftables) is not installed")
        done = subprocess.run([nft, "-f", "-"], input=script, capture_output=True, text=True,
                              timeout=10, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"nft: {done.stderr.strip()}")


def parse_link(text: str) -> Link:
    a, b, port, target = text.split(",")
    host, _, target_port = target.rpartition(":")
    return Link(a, b, int(port), (host, int(target_port)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control", required=True, help="HOST:PORT of the control protocol")
    parser.add_argument("--link", action="append", default=[], type=parse_link,
                        help="A,B,PORT,HOST:PORT (repeatable)")
    args = parser.parse_args(argv)
    host, _, port = args.control.rpartition(":")
    control = Control(args.link)
    if shutil.which("nft"):
        control.apply_rules()  # a clear table, and nft proven to work here
    for link in args.link:
        threading.Thread(target=serve, args=(listen(host, link.port), relay, link),
                         daemon=True).start()
    control_socket = listen(host, int(port))
    print("ready", flush=True)
    serve(control_socket, control.handle)


if __name__ == "__main__":
    main()
