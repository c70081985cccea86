"""The system's ``prometheus`` binary on loopback: configuration, process, HTTP API.

The configuration is written as JSON (YAML is a superset of it), so no YAML library is needed.
Data stays in the run directory (``RUN/prometheus/data``), so the series can be opened again
after the run with ``prometheus --storage.tsdb.path RUN/prometheus/data``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.stack.processes import ManagedProcess, StackError, free_port

BINARY_ENV = "STAMPEDE_PROMETHEUS"
INSTALL_HINT = ("--observe needs the prometheus binary: run `make observe-deps` (as root it "
                "apt-installs prometheus and the Redis and PostgreSQL exporters), or set "
                f"{BINARY_ENV} to its path")
SCRAPE_S = 1


class PromQLError(RuntimeError):
    """The query API answered with an error (a bad expression, or a failed query)."""


def find_binary() -> str | None:
    """``$STAMPEDE_PROMETHEUS`` when it names an executable, else ``prometheus`` on PATH."""
    given = os.environ.get(BINARY_ENV)
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("prometheus")


@dataclass
class Targets:
    """host:port lists per scrape job, plus labels per target (a Redis's role)."""

    jobs: dict[str, list[str]] = field(default_factory=dict)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)

    def add(self, job: str, target: str, **labels: str) -> None:
        self.jobs.setdefault(job, []).append(target)
        if labels:
            self.labels[target] = labels


def config(targets: Targets, scrape_s: int = SCRAPE_S) -> dict[str, Any]:
    """The prometheus.yml of a run: every target scraped each ``scrape_s`` seconds."""
    interval = f"{scrape_s}s"
    jobs = []
    for job, hosts in targets.jobs.items():
        statics = [{"targets": [h], "labels": targets.labels.get(h, {})} for h in hosts]
        jobs.append({"job_name": job, "static_configs": statics})
    return {"global": {"scrape_interval": interval, "scrape_timeout": interval,
                       "evaluation_interval": interval},
            "scrape_configs": jobs}


class Prometheus:
    """A started Prometheus on 127.0.0.1; ``stop`` is idempotent."""

    def __init__(self, binary: str, home: Path, targets: Targets, port: int | None = None,
                 data: Path | None = None) -> None:
        """Configuration and log in ``home``; series in ``data`` (default ``home/data``): a run's
        kept series can be opened again with no targets to query them after the run."""
        home.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config_path = home / "prometheus.yml"
        config_path.write_text(json.dumps(config(targets), indent=2) + "\n")
        argv = [binary, f"--config.file={config_path}", f"--storage.tsdb.path={data or home / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=30d",
                "--log.level=warn"]
        self.process = ManagedProcess("prometheus", argv, home / "prometheus.log", stop_timeout_s=10.0)
        self.process.wait_until(self.ready, 30.0, "ready")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def query(self, expr: str, at_s: float | None = None) -> list[dict[str, Any]]:
        """An instant query; raise ``PromQLError`` when Prometheus refuses it."""
        params = {"query": expr, **({"time": f"{at_s:.3f}"} if at_s is not None else {})}
        return list(api(self.url, "query", params)["result"])

    def query_range(self, expr: str, start_s: float, end_s: float, step_s: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}", "step": f"{step_s:g}"}
        return list(api(self.url, "query_range", params)["result"])

    def wait_for_scrapes_after(self, instant_s: float, timeout_s: float = 6.0) -> bool:
        """Wait (bounded) until every target was scraped after ``instant_s``: the last rows in."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stamps = [float(r["value"][1]) for r in self.query("timestamp(up)")]
            if stamps and min(stamps) > instant_s:
                return True
            time.sleep(0.25)
        return False

    def stop(self) -> None:
        self.process.stop()


def api(base_url: str, endpoint: str, params: dict[str, str]) -> dict[str, Any]:
    """GET ``/api/v1/ENDPOINT``; the ``data`` member, or ``PromQLError`` with Prometheus's reason."""
    url = f"{base_url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.loads(answer.read())
    except urllib.error.HTTPError as exc:  # 400/422: a bad expression, with Prometheus's reason
        body = json.loads(exc.read() or b"{}")
    except (urllib.error.URLError, OSError) as exc:
        raise PromQLError(f"{url}: {exc}") from exc
    if body.get("status") != "success":
        raise PromQLError(f"{body.get('errorType', 'error')}: {body.get('error', body)}")
    data: dict[str, Any] = body["data"]
    return data


__all__ = ["INSTALL_HINT", "PromQLError", "Prometheus", "StackError", "Targets", "config", "find_binary"]
