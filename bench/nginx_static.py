"""A static nginx on loopback with a configuration of its own, in a temporary directory: the
HTTP benchmark's endpoint (benchmark 8) and the HTTP client's tests' real server.

nginx comes from Debian (``apt-get install nginx``; ``make test-deps`` and ``make bench`` install
it as root). Its paths: ``/k/<key>`` answers ``BODY`` with status 200, ``/floor`` an empty 204,
``/status/404`` and ``/status/503`` those statuses with a short body. Each request is logged
with ``$connection`` (nginx's connection serial number), so a test sees from the server's side
how many connections carried its requests.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from coordinator.stack.processes import ManagedProcess, free_port

BODY = "stampede-lab static body\n"
_CONF = """\
{user}
worker_processes {workers};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    log_format conn '$connection $connection_requests $status $request_uri';
    access_log {access};
    keepalive_timeout {keepalive};
    keepalive_requests 100000000;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port}{ssl};
        {certs}
        location /k/ {{ default_type text/plain; return 200 "{body}"; }}
        location = /floor {{ return 204; }}
        location = /status/404 {{ default_type text/plain; return 404 "status 404\\n"; }}
        location = /status/503 {{ default_type text/plain; return 503 "status 503\\n"; }}
    }}
}}
"""


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(p, os.X_OK)), None)


@dataclass
class StaticNginx:
    """A running nginx; ``stop`` ends it (its process group) and removes its directory."""

    process: ManagedProcess
    port: int
    root: Path
    scheme: str = "http"

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def log_lines(self) -> list[list[str]]:
        """The access log: ``[connection, requests on it, status, uri]`` per request."""
        path = self.root / "access.log"
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def self_signed(root: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with openssl (a test's own CA of one)."""
    cert, key = root / "cert.pem", root / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def start_nginx(workers: int = 1, keepalive: str = "75s", log: bool = False,
                tls: bool = False) -> StaticNginx:
    """nginx on a free loopback port, answering once it accepts connections."""
    binary = nginx_binary()
    if binary is None:
        raise FileNotFoundError("nginx is not installed (apt-get install nginx)")
    root = Path(tempfile.mkdtemp(prefix="stampede-nginx-"))
    port = free_port()
    certs, ssl = "", ""
    if tls:
        cert, key = self_signed(root)
        certs, ssl = f"ssl_certificate {cert}; ssl_certificate_key {key};", " ssl"
    conf = _CONF.format(
        user="user root root;" if os.geteuid() == 0 else "", workers=workers, dir=root,
        access=f"{root}/access.log conn" if log else "off", keepalive=keepalive, port=port,
        ssl=ssl, certs=certs, body=BODY.replace("\n", "\\n"))
    (root / "nginx.conf").write_text(conf)
    process = ManagedProcess("nginx", [binary, "-p", str(root), "-c", str(root / "nginx.conf"),
                                       "-e", str(root / "error.log")], root / "nginx.out")

    def accepts() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            return False

    try:
        process.wait_until(accepts, 20, "accepting connections")
    except BaseException:
        process.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return StaticNginx(process, port, root, "https" if tls else "http")
