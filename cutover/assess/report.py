"""The assessment for a person: the scorecard as text (stdout), and as an HTML page with the scorecard
first, then each row's evidence, and small charts of the produce rate and the retention headroom."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cutover.assess.model import Assessment, Row
from cutover.assess.score import duration
from cutover.report import page

_TONE: dict[str, page.Tone] = {"ready": "ok", "risk": "warn", "blocker": "bad", "unknown": "info"}
_MARK = {"ready": "READY", "risk": "RISK", "blocker": "BLOCKER", "unknown": "UNKNOWN"}


def text(a: Assessment) -> str:
    counts = a.counts()
    lines = [f"assess {a.name}: {'BLOCKED' if a.blockers else 'no blocker'} "
             f"({', '.join(f'{n} {v}' for v, n in counts.items() if n)})", ""]
    for kind, head in (("question", "The seven questions"), ("readiness", "Readiness")):
        lines.append(head)
        for r in (r for r in a.rows if r.kind == kind):
            lines.append(f"  {_MARK[r.verdict]:<8} {r.title}")
            if r.verdict != "ready" or r.reason:
                lines += [f"           {f.verdict}: {f.reason}" for f in r.findings]
            if r.drills and r.verdict != "ready":
                lines.append(f"           drill: {', '.join(f'cutover drill {d}' for d in r.drills)}")
        lines.append("")
    return "\n".join(lines).rstrip()


def write(folder: Path, a: Assessment) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "assessment.json").write_text(json.dumps(a.as_dict(), indent=2, sort_keys=True, default=str) + "\n")
    out = folder / "assessment.html"
    out.write_text(page.page(f"cutover assess {a.name}", _body(a)))
    return out


def _body(a: Assessment) -> list[str]:
    body = [f"<h1>assess {page.esc(a.name)}: "
            + page.verdict(not a.blockers, yes="no blocker", no=f"{len(a.blockers)} blocker(s)") + "</h1>",
            f"<p class=note>{page.esc(a.at)} · plan {page.esc(a.plan)} · read-only, from the live clusters, "
            "registries, catalog and tables</p>"]
    for kind, head in (("question", "The seven questions"), ("readiness", "Readiness")):
        body.append(f"<h2>{head}</h2>")
        body.append(page.cards(page.Card(_MARK[r.verdict], r.title, _TONE[r.verdict], _short(r))
                               for r in a.rows if r.kind == kind))
    body += _charts(a)
    body.append("<h2>Evidence</h2>")
    for r in a.rows:
        body.append(f"<h3>{page.esc(r.title)}: {page.esc(_MARK[r.verdict])}</h3>")
        if r.findings:
            body.append(page.table(["verdict", "why"], [[f.verdict, f.reason] for f in r.findings], wrap=[1]))
        if r.evidence:
            body.append(page.table(["evidence", "value"], [[k, _value(v)] for k, v in r.evidence.items()], wrap=[1]))
        if r.drills:
            body.append("<p class=note>tested by: " + ", ".join(f"<code>cutover drill {page.esc(d)}</code>"
                                                               for d in r.drills) + "</p>")
    return body


def _short(r: Row) -> str:
    reason = r.reason
    return reason if len(reason) <= 140 else reason[:137] + "..."


def _value(v: Any) -> Any:
    if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
        keys = sorted({k for x in v.values() for k in x})
        return page.table(["", *keys], [[name, *(x.get(k) for k in keys)] for name, x in v.items()])
    return v


def _charts(a: Assessment) -> list[str]:
    if not a.topics:
        return []
    from cutover.report import charts

    names = list(a.topics)
    rates = [float(a.topics[t]["rate"] or 0) for t in names]
    hours = [float(a.topics[t]["replay_window_seconds"] or 0) / 3600 for t in names]
    out = ["<h2>Produce rate and retention headroom</h2>",
           '<div class="chart">' + charts.stacked_bars("topic", "records/s", names, {"produce rate": rates},
                                                     {"produce rate": "#0969da"}) + "</div>"]
    if any(hours):
        out.append('<div class="chart">' + charts.stacked_bars(
            "topic", "hours", names, {"replay window": hours}, {"replay window": "#1a7f37"}) + "</div>")
        out.append("<p class=note>" + ", ".join(
            f"{page.esc(t)}: {duration(a.topics[t]['replay_window_seconds'])}" for t in names) + "</p>")
    return out
