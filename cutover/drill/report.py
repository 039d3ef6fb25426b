"""The drill report: result.json (stable keys) and report.html (timeline, lag and freshness charts)."""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any

from cutover.drill.context import Drill
from cutover.drill.model import Runbook
from cutover.plan import Plan

COLORS = {"passed": "#2e7d32", "manual": "#6a1b9a", "failed": "#c62828", "error": "#ef6c00", "running": "#757575"}


def result(runbook: Runbook, plan: Plan, drill: Drill, started: float) -> dict[str, Any]:
    steps = [r.as_dict() for r in drill.results]
    bad = next((s for s in steps if s["outcome"] in ("failed", "error")), None)
    ran = {s["number"] for s in steps}
    return {
        "runbook": runbook.name, "purpose": runbook.purpose, "file": str(runbook.file), "plan": str(plan.file),
        "sandbox": drill.sandbox is not None, "parameters": runbook.parameters,
        "started": started, "ended": time.time(),
        "passed": bad is None and len(steps) == len(runbook.steps) and not any(
            s["outcome"] in ("failed", "error") for s in steps),
        "failed_step": {"number": bad["number"], "name": bad["name"], "error": bad["error"]} if bad else None,
        "steps": steps,
        "not_run": [{"number": s.number, "name": s.name} for s in runbook.steps if s.number not in ran],
        "samples": drill.samples,
    }


def write(folder: Path, r: dict[str, Any]) -> None:
    (folder / "result.json").write_text(json.dumps(r, indent=2, sort_keys=True, default=str) + "\n")
    (folder / "report.html").write_text(render(r))


def _timeline(r: dict[str, Any]) -> str:
    t0, t1 = r["started"], max(r["ended"], r["started"] + 1)
    rows = []
    for s in r["steps"]:
        took = "" if s["seconds"] is None else f"{s['seconds']:.1f}s"
        left = 100 * (s["started"] - t0) / (t1 - t0)
        width = max(0.4, 100 * ((s["ended"] or t1) - s["started"]) / (t1 - t0))
        rows.append(
            f'<tr><td>{s["number"]}. {html.escape(s["name"])}</td><td>{s["kind"]}</td>'
            f'<td class="bar"><div style="margin-left:{left:.2f}%;width:{width:.2f}%;'
            f'background:{COLORS.get(s["outcome"], "#999")}"></div></td>'
            f'<td>{s["outcome"]}</td><td>{took}</td>'
            f'<td>{html.escape(s["error"] or "")}</td></tr>')
    return ('<table class="timeline"><tr><th>step</th><th>kind</th><th>timeline</th><th>outcome</th><th>took</th>'
            '<th>error</th></tr>' + "".join(rows) + "</table>")


def _chart(title: str, series: dict[str, list[tuple[float, float]]], t0: float, t1: float, unit: str) -> str:
    points = [v for pts in series.values() for _t, v in pts]
    if not points:
        return f"<h3>{html.escape(title)}</h3><p>no samples</p>"
    top = max(max(points), 1.0)
    w, h = 720, 160
    palette = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#c62828", "#00838f"]
    lines = []
    for i, (name, pts) in enumerate(sorted(series.items())):
        coords = " ".join(f"{w * (t - t0) / max(t1 - t0, 1):.1f},{h - h * v / top:.1f}" for t, v in pts)
        lines.append(f'<polyline fill="none" stroke="{palette[i % len(palette)]}" stroke-width="2" '
                     f'points="{coords}"><title>{html.escape(name)}</title></polyline>')
    legend = " ".join(f'<span style="color:{palette[i % len(palette)]}">&#9632; {html.escape(n)}</span>'
                      for i, n in enumerate(sorted(series)))
    return (f'<h3>{html.escape(title)}</h3><svg width="{w}" height="{h}" class="chart">'
            f'<line x1="0" y1="{h}" x2="{w}" y2="{h}" stroke="#999"/>' + "".join(lines) +
            f'<text x="4" y="12" font-size="11">{top:,.0f} {unit}</text></svg><div>{legend}</div>')


def render(r: dict[str, Any]) -> str:
    t0, t1 = r["started"], max(r["ended"], r["started"] + 1)
    lag = {"forward mirror lag": [(s["t"], s["lag"]) for s in r["samples"] if s.get("lag") is not None]}
    fresh: dict[str, list[tuple[float, float]]] = {}
    for s in r["samples"]:
        for table, age in (s.get("freshness") or {}).items():
            if age is not None:
                fresh.setdefault(table, []).append((s["t"], age))
    verdict = "PASSED" if r["passed"] else "FAILED"
    failed = r["failed_step"]
    color = COLORS["passed" if r["passed"] else "failed"]
    head = (f'<h1>drill {html.escape(r["runbook"])}: <span style="color:{color}">'
            f"{verdict}</span></h1><p>{html.escape(r['purpose'])}</p>"
            f"<p>plan {html.escape(r['plan'])} ({'local sandbox' if r['sandbox'] else 'not the sandbox'}); "
            f"{t1 - t0:.0f}s; parameters {html.escape(json.dumps(r['parameters']))}</p>")
    if failed:
        head += (f'<p class="failed">failed at step {failed["number"]} ({html.escape(failed["name"])}): '
                 f"{html.escape(failed['error'] or '')}</p>")
    if r["not_run"]:
        head += "<p>not run: " + ", ".join(html.escape(s["name"]) for s in r["not_run"]) + "</p>"
    style = ("body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;width:100%}"
             "td,th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left;font-size:13px}"
             ".bar{width:45%}.bar div{height:12px}.failed{color:#c62828;font-weight:bold}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>drill {html.escape(r['runbook'])}</title>"
            f"<style>{style}</style></head><body>{head}<h2>Timeline</h2>{_timeline(r)}<h2>Over the drill</h2>"
            + _chart("Mirror lag (records)", lag, t0, t1, "records")
            + _chart("Table freshness (seconds since the last commit)", fresh, t0, t1, "s") + "</body></html>")
