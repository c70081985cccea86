"""The report's appendix for a run launched with ``--observe``: the Grafana dashboard's panels.

At the end of the run the coordinator ran every panel's PromQL against the run's Prometheus and
kept the series in ``RUN/prometheus/panels.json``; here each panel becomes a small SVG chart and
a table of its series, so the dashboard's queries are seen returning data without Grafana.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

from results.outputs.report import html as h

SNAPSHOT = Path("prometheus") / "panels.json"
WIDTH, HEIGHT = 560, 120
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def sections(root: Path) -> list[str]:
    """The appendix, or nothing when the run was not observed."""
    path = root / SNAPSHOT
    if not path.is_file():
        return []
    snapshot = json.loads(path.read_text())
    out = ["<h2>Appendix: the Grafana dashboard's panels (Prometheus, live during the run)</h2>",
           "<p>Each panel's query of deploy/grafana/dashboards/stampede.json, run against this run's "
           "Prometheus at 1 s steps (rates over 4 s). Counters come from the same rows as Parquet; "
           "percentiles here are histogram estimates (docs/observe.md).</p>"]
    for panel in snapshot.get("panels", []):
        out.append(_panel(panel, float(snapshot["start_s"])))
    return out


def _panel(panel: dict[str, Any], start_s: float) -> str:
    title = f"{panel['panel']} ({panel['ref']})"
    head = f"<h3>{html.escape(title)}</h3><p><code>{html.escape(panel['expr'])}</code></p>"
    if "error" in panel:
        return head + f'<p class="note">refused: {html.escape(panel["error"])}</p>'
    series = panel.get("series", [])
    if not series:
        return head + '<p class="note">no series</p>'
    rows = []
    for s in series:
        values = [v for _, v in s["points"] if math.isfinite(v)]
        rows.append({"series": legend(panel.get("legend", ""), s["labels"]), "points": len(s["points"]),
                     "last": values[-1] if values else float("nan"),
                     "max": max(values) if values else float("nan")})
    columns = [("series", "series", ""), ("points", "points", ","), ("last", "last", ".4g"),
               ("max", "max", ".4g")]
    return head + chart(series, start_s) + h.table(rows, columns)


def legend(template: str, labels: dict[str, str]) -> str:
    """Grafana's ``{{label}}`` legend format, filled in."""
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()
    return text or ", ".join(f"{k}={v}" for k, v in labels.items()) or "value"


def chart(series: list[dict[str, Any]], start_s: float) -> str:
    """One SVG polyline per series, seconds since the start on x, shared y scale from 0."""
    points = [(t, v) for s in series for t, v in s["points"] if math.isfinite(v)]
    if not points:
        return "<p>(no finite values)</p>"
    t_max = max(max(t for t, _ in points) - start_s, 1.0)
    v_max = max([v for _, v in points] + [1e-12])
    lines = []
    for i, s in enumerate(series):
        xy = " ".join(f"{WIDTH * (t - start_s) / t_max:.1f},{HEIGHT - HEIGHT * v / v_max:.1f}"
                      for t, v in s["points"] if math.isfinite(v))
        lines.append(f'<polyline fill="none" stroke="{COLOURS[i % len(COLOURS)]}" points="{xy}"/>')
    axis = (f'<text x="2" y="10" font-size="10">{v_max:.4g}</text>'
            f'<text x="{WIDTH - 40}" y="{HEIGHT - 2}" font-size="10">{t_max:.0f} s</text>')
    return (f'<p><svg width="{WIDTH}" height="{HEIGHT}" style="border:1px solid #ddd">'
            f"{''.join(lines)}{axis}</svg></p>")
