"""The drill report: result.json (stable keys) and report.html for a person.

The page leads with the verdict and the numbers that prove it (records exactly once, the freeze
windows, records carried back, rows compared and differences found), then the steps on a time
axis, then the timeline of the Grafana dashboard's series (view.py): mirror lag both ways, the shadow's lag,
rows and commit health, dead letters, table freshness, and the catalog, storage and registries up, with
promote, rollback and the faults marked where they happened, and stretches where a rising line is expected
labelled as such.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from cutover.drill import view
from cutover.drill.context import Drill
from cutover.drill.model import Runbook
from cutover.plan import Plan
from cutover.report import charts, page
from cutover.report.page import Card, Html

COLORS = {"passed": "#2e7d32", "manual": "#6a1b9a", "failed": "#c62828", "error": "#ef6c00", "running": "#757575"}
#: the ops whose detail holds a verify's counts per table
EXPECTED_LAG = ("expected: the forward mirror stops at promote; the old cluster then takes the reverse mirror's\n"
                "copies and, after a rollback, the clients' writes, so its forward lag rises and loses nothing")
_VERIFIES = ("verify", "verify-passed", "replay")
_WHERE = {"old": "on the old cluster", "new": "on the new cluster", "consumer": "in what the consumer processed",
          "tables": "in the tables"}


def result(runbook: Runbook, plan: Plan, drill: Drill, started: float) -> dict[str, Any]:
    steps = [r.as_dict() for r in drill.results]
    from cutover.assess.model import exercised

    bad = next((s for s in steps if s["outcome"] in ("failed", "error")), None)
    ran = {s["number"] for s in steps}
    return {
        "readiness": exercised(runbook.name),
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


def _epoch(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso).timestamp() if iso else None


def _switches(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each promote or rollback the drill ran: what, when it froze and switched, what it carried back."""
    out = []
    for s in r["steps"]:
        if s["op"] not in ("promote", "rollback"):
            continue
        window = (s["detail"] or {}).get("freeze_window") or {}
        out.append({"action": s["op"], "ok": s["outcome"] == "passed", "step": s,
                    "frozen": _epoch(window.get("frozen_at")), "switched": _epoch(window.get("switched_at")),
                    "seconds": window.get("seconds"), "carried_back": (s["detail"] or {}).get("carried_back")})
    return out


def marks(r: dict[str, Any]) -> tuple[list[charts.Event], list[charts.Span]]:
    """The drill's events for the time axis: each switch where it switched (its freeze window shaded), each
    fault where it was injected; and, from the first promote on, the stretch where rising forward lag is
    expected."""
    events: list[charts.Event] = []
    spans: list[charts.Span] = []
    switches = _switches(r)
    for sw in switches:
        at = sw["switched"] or sw["step"]["ended"] or sw["step"]["started"]
        events.append(charts.Event(at, sw["action"] if sw["ok"] else f"{sw['action']} ({sw['step']['outcome']})"))
        if sw["frozen"] is not None:
            spans.append(charts.Span(sw["frozen"], sw["switched"] or at, f"{sw['action']} freeze window"))
    for s in r["steps"]:
        if s["kind"] == "fault":
            events.append(charts.Event(s["started"], f"fault (step {s['number']})", "fault"))
    promoted = [sw["switched"] for sw in switches if sw["action"] == "promote" and sw["ok"] and sw["switched"]]
    if promoted:
        spans.append(charts.Span(promoted[0], max(r["ended"], r["started"] + 1), EXPECTED_LAG, "expected"))
    return events, spans


def headline(r: dict[str, Any]) -> list[Card]:
    """The numbers that prove the drill, in the order a person asks for them."""
    out = [Card("PASSED" if r["passed"] else "FAILED", f"drill {r['runbook']}", "ok" if r["passed"] else "bad",
                f"{len(r['steps'])} of {len(r['steps']) + len(r['not_run'])} steps ran in "
                f"{max(r['ended'] - r['started'], 0):,.0f} s")]
    once = [s for s in r["steps"] if s["op"] == "exactly-once"]
    if once:
        good = [s for s in once if s["outcome"] == "passed"]
        counts = sorted({int(n) for s in good if (n := (s["detail"] or {}).get("records")) is not None})
        where = "; ".join(_where(s) for s in good)
        if len(good) == len(once):
            out.append(Card(" / ".join(f"{c:,}" for c in counts) or "all", "records exactly once", "ok",
                            where or ", ".join(s["name"] for s in good)))
        else:
            failed = next(s for s in once if s["outcome"] != "passed")
            out.append(Card("NOT exactly once", failed["name"], "bad", failed["error"] or failed["outcome"]))
    for sw in _switches(r):
        if sw["seconds"] is not None:
            out.append(Card(f"{sw['seconds']:,.1f} s", f"{sw['action']} freeze window", "info",
                            "producers frozen until the clients were switched"))
        elif not sw["ok"]:
            out.append(Card(sw["step"]["outcome"].upper(), sw["action"], "bad", sw["step"]["error"] or ""))
        if sw["carried_back"] is not None:
            out.append(Card(f"{sw['carried_back']:,}", "records carried back", "info",
                            "written on the new cluster after promote, copied back to the old one at rollback"))
    verified = [s for s in r["steps"] if s["op"] in _VERIFIES and isinstance((s["detail"] or {}).get("tables"), dict)
                and all(isinstance(c, dict) for c in s["detail"]["tables"].values())]
    if verified:
        last = verified[-1]["detail"]["tables"].values()
        rows = sum(c["old_rows"] for c in last)
        diffs = sum(c["missing"] + c["extra"] + c["mismatched"] + c["duplicates_old"] + c["duplicates_new"]
                    for c in last)
        out.append(Card(f"{rows:,}", "rows compared", "info", f"by the last verify, over {len(last)} table(s)"))
        out.append(Card(f"{diffs:,}", "differences", "ok" if diffs == 0 else "bad",
                        "missing, extra, mismatched or duplicated rows"))
    faults = [s for s in r["steps"] if s["kind"] == "fault"]
    if faults:
        out.append(Card(f"{len(faults)}", "faults injected", "warn", ", ".join(s["name"] for s in faults)))
    return out


def _where(step: dict[str, Any]) -> str:
    d = step["detail"] or {}
    if d.get("where") == "tables":
        return "in the canonical tables" if d.get("table") == "old" else "in the new tables"
    return _WHERE.get(str(d.get("where")), str(step["name"]))


def _steps_table(r: dict[str, Any]) -> Html:
    rows: list[list[Any]] = [[s["number"], s["name"], s["kind"], page.verdict(True, s["outcome"]) if s["outcome"] in (
        "passed", "manual") else page.verdict(False, no=s["outcome"]),
        "" if s["seconds"] is None else f"{s['seconds']:.1f} s", s["error"] or page.plain(s["detail"])]
        for s in r["steps"]]
    rows += [[s["number"], s["name"], "", "not run", "", ""] for s in r["not_run"]]
    return page.table(["#", "step", "kind", "outcome", "took", "what it found"], rows, numeric=(0, 4), wrap=(1, 5))


def render(r: dict[str, Any]) -> str:
    t0, t1 = r["started"], max(r["ended"], r["started"] + 1)
    events, spans = marks(r)
    switched = [s for s in spans if s.kind != "expected"]
    failed = r["failed_step"]
    body = [f"<h1>drill {page.esc(r['runbook'])}: {page.verdict(r['passed'])}</h1>",
            page.cards(headline(r))]
    if failed:
        body.append(f'<p class="failed">failed at step {failed["number"]} ({page.esc(failed["name"])}): '
                    f"{page.esc(failed['error'] or '')}</p>")
    if r["not_run"]:
        body.append("<p>not run: " + page.esc(", ".join(s["name"] for s in r["not_run"])) + "</p>")
    if r.get("readiness"):
        body.append("<h2>Readiness this drill rehearses</h2>"
                    "<p class='note'>The rows of <code>cutover assess</code>'s scorecard this runbook tests, marked "
                    "with its result.</p>"
                    + page.table(["row", "this drill"], [[row, page.verdict(r["passed"])] for row in r["readiness"]]))
    body += [f"<p>{page.esc(r['purpose'])}</p>",
             f"<p class='note'>plan <code>{page.esc(r['plan'])}</code> "
             f"({'the local sandbox' if r['sandbox'] else 'not the sandbox'}); started "
             f"{datetime.fromtimestamp(t0).astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')}; parameters "
             f"{page.esc(r['parameters'])}</p>",
             "<h2>Steps</h2>",
             charts.timeline("steps", [charts.Bar(f"{s['number']}. {s['name'][:38]}", s["started"],
                                                  s["ended"] or t1, COLORS.get(s["outcome"], "#999"))
                                       for s in r["steps"]], t0, t1, events, switched),
             _steps_table(r),
             *view.sections(r, t0, t1, events, spans)]
    return page.page(f"drill {r['runbook']}: {'PASSED' if r['passed'] else 'FAILED'}", body)

