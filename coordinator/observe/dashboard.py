"""The Grafana dashboard of the repository: its PromQL, rendered outside Grafana.

Grafana fills in ``$run_id``, ``$__rate_interval`` and ``$__interval``; here they are replaced
with the run's id and intervals fit for a 1 s scrape, so the same expressions can be checked
against a real Prometheus and drawn into the HTML report's appendix (``panels.json``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards" / "stampede.json"
RATE_INTERVAL, INTERVAL = "4s", "2s"  # Grafana's choice for a 1 s scrape: 4 x the scrape interval


@dataclass(frozen=True)
class Query:
    panel: str  # panel title, or "annotation: NAME"
    ref: str
    expr: str
    legend: str = ""


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every PromQL expression of the dashboard: panel targets, then annotations."""
    out = [Query(p["title"], t["refId"], t["expr"], t.get("legendFormat", ""))
           for p in dashboard.get("panels", []) for t in p.get("targets", [])]
    out += [Query(f"annotation: {a['name']}", "A", a["expr"])
            for a in dashboard.get("annotations", {}).get("list", []) if a.get("expr")]
    return out


def render(expr: str, run_id: str) -> str:
    """The expression with Grafana's variables filled in for one run."""
    expr = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$__interval", INTERVAL)
    return re.sub(r"\$\{?run_id\}?", re.escape(run_id), expr)


def write_snapshot(prom: Any, run_id: str, start_s: float, end_s: float, out: Path,
                   path: Path = DASHBOARD) -> dict[str, Any]:
    """Run each panel's query over the run (1 s steps) and keep the series for the report."""
    panels = []
    for q in queries(load(path)):
        expr = render(q.expr, run_id)
        entry: dict[str, Any] = {"panel": q.panel, "ref": q.ref, "expr": expr, "legend": q.legend}
        try:
            series = prom.query_range(expr, start_s, end_s, 1)
            entry["series"] = [{"labels": s["metric"],
                                "points": [[float(t), float(v)] for t, v in s["values"]]}
                               for s in series]
        except RuntimeError as exc:  # PromQLError: kept, so the report shows the refusal
            entry["error"] = str(exc)
        panels.append(entry)
    snapshot = {"run_id": run_id, "start_s": start_s, "end_s": end_s, "panels": panels}
    out.write_text(json.dumps(snapshot))
    return snapshot
