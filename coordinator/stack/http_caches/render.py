"""Write a front's configuration from the same renderers the embedded stack uses: the files the
deployments mount (deploy/http-caches/, the k8s ConfigMap) come from here, so there is one
source of configuration truth.

    python -m coordinator.stack.http_caches.render nginx --upstream app:8000 \\
        --out deploy/http-caches/nginx.conf
    python -m coordinator.stack.http_caches.render varnish --params grace_s=0 --upstream app:8000

Bad input: one line naming what is wrong, exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from coordinator.stack.http_caches.nginx_conf import CONTAINER_LAYOUT, NginxSite, render_nginx
from coordinator.stack.http_caches.params import FRONTS, NginxParams, parse_params
from coordinator.stack.http_caches.vcl import render_vcl

DEPLOY_LISTEN = "0.0.0.0:8080"  # the port the compose services and k8s Services expose
DEPLOY_UPSTREAM = "app:8000"  # the app tier's service name and port


def render(kind: str, params_text: str = "", upstreams: tuple[str, ...] = (DEPLOY_UPSTREAM,),
           listen: str = DEPLOY_LISTEN, workers: str = "1") -> str:
    """The configuration text of a front as the deployments run it (ValueError: bad input)."""
    params = parse_params(kind, params_text)
    if isinstance(params, NginxParams):
        return render_nginx(params, NginxSite(listen, upstreams, workers), CONTAINER_LAYOUT)
    return render_vcl(params, upstreams)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator.stack.http_caches.render")
    parser.add_argument("front", choices=sorted(FRONTS))
    parser.add_argument("--params", default="", help="key=value,... as after `nginx:` in a spec")
    parser.add_argument("--upstream", action="append", help=f"host:port (repeatable; default "
                        f"{DEPLOY_UPSTREAM})")
    parser.add_argument("--listen", default=DEPLOY_LISTEN, help="nginx: host:port to listen on "
                        "(Varnish's is its -a argument)")
    parser.add_argument("--workers", default="1", help="nginx: worker_processes (1 or auto)")
    parser.add_argument("--out", type=Path, help="the file to write (default: standard output)")
    args = parser.parse_args(argv)
    try:
        text = render(args.front, args.params, tuple(args.upstream or [DEPLOY_UPSTREAM]),
                      args.listen, args.workers)
    except ValueError as exc:
        print(f"render {args.front}: {exc}", file=sys.stderr)
        return 2
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
