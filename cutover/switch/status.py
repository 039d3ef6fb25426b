"""`cutover status`: where the migration stands: phase, steps, freeze window, lag, verify, routing.

Read from the journal and the live systems. A part that cannot be read (a cluster
down, the catalog away) is reported as such; status itself still answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from cutover import interrupt
from cutover.common import NETWORK_TIMEOUT
from cutover.errors import CutoverError
from cutover.mirror import owner
from cutover.output import table
from cutover.plan import Plan
from cutover.switch import background, journal, routing
from cutover.switch.runner import step_table, window


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except CutoverError as exc:
        return {"error": exc.message}


def _lag(plan: Plan, direction: Literal["forward", "reverse"], timeout: float) -> dict[str, Any]:
    from cutover.mirror import status

    s = status.status(plan, direction, timeout)
    return {"lag": s.lag, "partitions": len(s.partitions), "partitions_behind": sum(1 for p in s.partitions if p.lag),
            "unmirrored": sum(1 for p in s.partitions if p.position is None), "gaps": len(s.gaps),
            "owners": list(s.owners)}


#: what each mirror is expected to do in each phase: (expected to run, what its lag means then)
_ROLES: dict[tuple[str, str], tuple[bool, str]] = {
    ("forward", "ready"): (True, "copies old -> new until promote"),
    ("forward", "promoting"): (True, "drains, then stops at the switch"),
    ("forward", "promoted"): (False, "stopped at promote: the clients write to the new cluster; its lag counts what "
                                     "the reverse mirror copies back to the old cluster, which is expected"),
    ("forward", "rolling-back"): (False, "stopped since promote"),
    ("forward", "rolled-back"): (False, "not required after a rollback: its lag counts records the old cluster "
                                        "took since, which is expected and loses nothing; start it again before "
                                        "the next promote (it maps the records carried back, never copies them "
                                        "twice)"),
    ("reverse", "promoting"): (True, "starts at the switch"),
    ("reverse", "promoted"): (True, "copies new -> old so that a rollback loses nothing"),
    ("reverse", "rolling-back"): (True, "drains, then stops at the switch back"),
    ("reverse", "rolled-back"): (False, "stopped at rollback: the clients write to the old cluster again"),
    ("forward", "completing"): (False, "retired by complete"),
    ("reverse", "completing"): (False, "retired by complete"),
    ("forward", "cancelling"): (False, "retired by cancel"),
    ("reverse", "cancelling"): (False, "retired by cancel"),
}


_WAYS = {"forward": "old -> new", "reverse": "new -> old"}


def role(direction: str, phase: str) -> dict[str, Any]:
    """Which way a mirror copies, whether it is expected to run in this phase, and what its lag means then."""
    expected, note = _ROLES.get((direction, phase), (False, "not started"))
    return {"direction": _WAYS[direction], "expected_to_run": expected, "role": note}


def _verify(plan: Plan) -> dict[str, Any]:
    from cutover.verify.run import last_result

    return {pair.new: last.as_dict() if (last := last_result(plan, pair.new)) else None for pair in plan.spec.tables}


def ended(plan: Plan, record: dict[str, Any]) -> dict[str, Any]:
    """A migration that complete or cancel ended: its completion record; the mirrors are retired."""
    folder = journal.directory(plan)
    report = {
        "plan": plan.name, "phase": "completed" if record.get("action") == "complete" else "cancelled",
        "cycle": max((a["cycle"] for a in record.get("attempts", [])), default=0),
        "journal": str(folder / "archive" / str(record.get("journal"))), "running": journal.holder(folder),
        "attempts": record.get("attempts", []), "action": record.get("action"), "steps": record.get("steps", []),
        "freeze_window": None, "carried_back": None, "ended": {k: record.get(k) for k in ("at", "record", "run")},
        "removed": record.get("removed", []), "kept": record.get("kept", []),
        "mirror": {"forward": None, "reverse": None, "reverse_process": background.running(plan)},
        "verify": _try(lambda: _verify(plan)),
        "routing": _try(lambda: routing.read(plan)) or {"active": "old", "note": "no routing file written yet"},
    }
    report["problems"] = problems(report)
    return report


def status(plan: Plan, timeout: float = NETWORK_TIMEOUT, mirrors: bool = True) -> dict[str, Any]:
    """The report of `cutover status`; without `mirrors`, the mirrors' lag is not read (a caller that reads the
    mirrors' state itself: the exporter)."""
    folder = journal.directory(plan)
    history = journal.read(folder)
    if history.ended is not None and not history.runs:
        return ended(plan, history.ended)
    last = history.last
    action: journal.Action = last.action if last else "promote"
    parts: dict[str, Callable[[], Any]] = {"verify": lambda: _try(lambda: _verify(plan)),
                                           "routing": lambda: _try(lambda: routing.read(plan)),
                                           "readers": lambda: _try(lambda: _readers(plan))}
    if mirrors:
        parts["forward"] = lambda: _try(lambda: _lag(plan, "forward", timeout))
        if history.promote_attempt():
            parts["reverse"] = lambda: _try(lambda: _lag(plan, "reverse", timeout))
    got = {name: {"error": v.message} if isinstance(v, interrupt.Late) else v  # one --timeout for all
           for name, v in interrupt.side_by_side(parts, timeout, f"status {plan.file}").items()}
    phase = history.phase()
    lags: dict[str, Any] = {"forward": got.get("forward"), "reverse": got.get("reverse")}
    for d, m in lags.items():
        if m is not None and "error" not in m:
            m.update(role(d, phase))
    attempts = history.attempts()
    report = {
        "plan": plan.name, "phase": phase, "cycle": attempts[-1].cycle if attempts else 0,
        "journal": str(folder / "journal.jsonl"),
        "running": journal.holder(folder),
        "attempts": [a.as_dict() for a in attempts],
        "action": last.action if last else None,
        "steps": [s.as_dict() for s in step_table(history.runs_of(action))] if last else [],
        "freeze_window": frozen.as_dict() if last and (frozen := window(history, action)) else None,
        "carried_back": last.detail.get("carried_back") if last and last.outcome == "done" else None,
        "mirror": {**lags, "reverse_process": background.running(plan)},
        "verify": got["verify"],
        "routing": got["routing"] or {"active": "old", "note": "no routing file written yet"},
        "readers": got["readers"],
    }
    report["problems"] = problems(report)
    return report


def _readers(plan: Plan) -> list[dict[str, Any]]:
    from cutover.readers import translate

    return translate.status(plan)


def problems(s: dict[str, Any]) -> list[str]:
    """What is in error: a part that could not be read, records lost to a gap, a step that failed. `cutover
    status` exits 1 when there is one."""
    found = [f"{s['action']} step {st['name']} failed: {st['error']}" for st in s["steps"]
             if st["outcome"] == "failed"]
    for d in ("forward", "reverse"):
        m = s["mirror"][d]
        if m is not None and "error" in m:
            found.append(f"mirror {d}: {m['error']}")
        elif m is not None and m["gaps"]:
            found.append(f"mirror {d}: {m['gaps']} DATA LOSS gap(s) (see cutover mirror status)")
    found += [f"{part}: {s[part]['error']}" for part in ("verify", "routing") if "error" in s[part]]
    if isinstance(s.get("readers"), dict) and "error" in s["readers"]:
        found.append(f"readers: {s['readers']['error']}")
    return found


def render(s: dict[str, Any]) -> str:
    lines = [f"plan {s['plan']}: phase {s['phase']}" + (f", cycle {s['cycle']}" if s["cycle"] else "")
             + (f" (running: {s['running']})" if s["running"] else "")]
    if s.get("ended"):
        e = s["ended"]
        lines.append(f"{s['action']} finished at {e['at']}: record {e['record']}, journal archived to {s['journal']}; "
                     f"{len(s['removed'])} item(s) removed, {len(s['kept'])} kept")
        lines += [f"  kept {k['kind']} {k['name']} ({k['where']}): {k['note']}" for k in s["kept"]]
    if s["attempts"]:
        lines.append("attempts:")
        lines.append(table([[str(a["cycle"]), a["action"], a["started_at"], a["outcome"]
                             + (f" at {a['failed_step']}" if a["failed_step"] else ""), str(a["runs"]),
                             "-" if a["freeze_window_seconds"] is None else f"{a['freeze_window_seconds']:.1f}s",
                             "-" if a["carried_back"] is None else f"{a['carried_back']:,}"]
                            for a in s["attempts"]],
                           ["cycle", "action", "started", "outcome", "runs", "freeze window", "carried back"]))
    if s["steps"]:
        lines.append(f"{s['action']} steps (latest attempt):")
        lines.append(table([[st["name"], st["outcome"], "-" if st["seconds"] is None else f"{st['seconds']:.1f}s",
                             st["error"] or ""] for st in s["steps"]], ["step", "outcome", "took", "error"]))
    fw = s["freeze_window"]
    if fw:
        lines.append(f"freeze window: {fw['seconds']}s (frozen {fw['frozen_at']}, switched {fw['switched_at']})"
                     if fw["seconds"] is not None else f"frozen since {fw['frozen_at']}, not switched yet")
    if s["carried_back"] is not None:
        lines.append(f"records carried back from the new cluster: {s['carried_back']:,}")
    for d in ("forward", "reverse"):
        m = s["mirror"][d]
        if m is None:
            continue
        lines.append(f"mirror {d} ({_WAYS[d]}): " + (m["error"] if "error" in m else
                                        f"lag {m['lag']:,} records, {m['partitions_behind']} of "
                                        f"{m['partitions']} partitions behind"
                                        + (f", {m['unmirrored']} not mirrored" if m["unmirrored"] else "")
                                        + (f", {m['gaps']} DATA LOSS gaps" if m["gaps"] else "")
                                        + ("" if m["expected_to_run"] else " (not running, as expected)")
                                        + f"\n  {m['role']}"
                                        + "".join(f"\n  {line}" for line in owner.render(m.get("owners", [])))))
    if s["mirror"]["reverse_process"]:
        lines.append(f"reverse mirror process: pid {s['mirror']['reverse_process']}")
    v = s["verify"]
    if "error" in v:
        lines.append(f"verify: {v['error']}")
    for name, r in ({} if "error" in v else v).items():
        lines.append(f"verify {name}: " + ("never run" if r is None else
                                            f"{'passed' if r['passed'] else 'FAILED'} at {r['at']}"))
    r = s["routing"]
    lines.append("routing: " + (r["error"] if "error" in r else f"active {r['active']}"
                                + (f" ({r['bootstrap.servers']}, since {r['changed_at']})" if "changed_at" in r
                                   else "")))
    readers = s.get("readers") or []
    if isinstance(readers, dict):
        lines.append(f"readers: {readers['error']}")
        readers = []
    lines += reader_lines(readers)
    if s["problems"]:
        lines.append(f"NOT OK: {len(s['problems'])} part(s) in error (above); exit code 1")
    return "\n".join(lines)


def reader_lines(readers: list[dict[str, Any]]) -> list[str]:
    """Each reader's line in `cutover status` (its kind says its position and last move)."""
    from cutover.readers import translate

    return [f"reader {rd['reader']}: on the {rd['on']} cluster, " + translate.kind(rd["kind"]).status_text(rd)
            for rd in readers]
