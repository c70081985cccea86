"""``python -m app``: the app tier as the stack, the compose file and Kubernetes run it.

granian in WSGI mode: ``STAMPEDE_APP_PROCESSES`` worker processes of ``STAMPEDE_APP_THREADS``
blocking threads each (the threads the WSGI callable runs on: a real service's request
threads), listening on ``STAMPEDE_APP_BIND`` (host:port). Measured beside gunicorn's gthread
on the same all-hit path (docs/http.md, Measured): granian answered 2.3 times as many requests,
its HTTP parsing and connection handling are Rust's, not the GIL's. Each worker process imports
app.serve, which starts its control thread (there is no fork after the import to survive).

``STAMPEDE_APP_KIND=asgi``: the asyncio app (app/asgi.py) on uvicorn with uvloop and httptools,
one event loop per process (docs/http.md, "The asyncio app tier" says why uvicorn).
"""

from __future__ import annotations

import os
import sys

from model.apptier import APP_ENV, APP_KINDS

DEFAULT_BIND = "127.0.0.1:8000"


def granian_argv(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """granian's command line for the settings in ``environ``."""
    host, _, port = environ.get(APP_ENV["bind"], DEFAULT_BIND).rpartition(":")
    return [sys.executable, "-m", "granian", "--interface", "wsgi", "--no-ws",
            "--host", host or "127.0.0.1", "--port", port,
            "--workers", environ.get(APP_ENV["processes"], "1"),
            "--blocking-threads", environ.get(APP_ENV["threads"], "32"),
            "--log-level", "warning", "app.serve:application"]


def uvicorn_argv(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """uvicorn's command line for the asyncio app (``STAMPEDE_APP_KIND=asgi``, app/asgi.py):
    one event loop per worker process, on uvloop, HTTP parsed by httptools (llhttp, C)."""
    host, _, port = environ.get(APP_ENV["bind"], DEFAULT_BIND).rpartition(":")
    return [sys.executable, "-m", "uvicorn", "--host", host or "127.0.0.1", "--port", port,
            "--workers", environ.get(APP_ENV["processes"], "1"), "--loop", "uvloop",
            "--http", "httptools", "--lifespan", "on", "--no-access-log", "--backlog", "4096",
            "--timeout-graceful-shutdown", "5", "--log-level", "warning", "app.asgi:application"]


def server_argv(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """The server of the app kind in ``environ`` (``STAMPEDE_APP_KIND``: wsgi, the default, or
    asgi); ValueError for any other."""
    kind = environ.get(APP_ENV["kind"], "wsgi") or "wsgi"
    if kind not in APP_KINDS:
        raise ValueError(f"{APP_ENV['kind']}={kind!r} is not one of {'|'.join(APP_KINDS)}")
    return uvicorn_argv(environ) if kind == "asgi" else granian_argv(environ)


def main() -> None:
    try:
        argv = server_argv(os.environ)
    except ValueError as exc:
        raise SystemExit(f"app: {exc}") from None
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
