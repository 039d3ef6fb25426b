"""The verify result for people: text on stdout, and an HTML report a person reads at a glance."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from cutover.output import table
from cutover.verify.results import VerifyResult

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
.bar{display:flex;width:320px;height:12px;background:#eee}.bar span{display:block;height:12px}
.m{background:#2da44e}.x{background:#cf222e}.e{background:#bf8700}.d{background:#8250df}.l{background:#8c959f}
code{background:#f6f8fa;padding:0 3px}
"""


def _verdict(ok: bool) -> str:
    return '<span class="ok">PASSED</span>' if ok else '<span class="bad">FAILED</span>'


def _bar(p: dict[str, Any]) -> str:
    total = max(1, p["matched"] + p["missing"] + p["extra"] + p["mismatched"] + p["old_ahead"] + p["new_ahead"])
    parts = [("m", p["matched"], "matched"), ("x", p["missing"], "missing"), ("e", p["extra"], "extra"),
             ("d", p["mismatched"], "mismatched"), ("l", p["old_ahead"] + p["new_ahead"], "lag")]
    spans = "".join(f'<span class="{c}" style="width:{100 * n / total:.2f}%" title="{t}: {n}"></span>'
                    for c, n, t in parts if n)
    return f'<div class="bar">{spans}</div>'


def _rows(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _e(v: Any) -> str:
    return html.escape(json.dumps(v, default=str) if not isinstance(v, str) else v)


def render_html(result: dict[str, Any]) -> str:
    out = [f"<!doctype html><meta charset='utf-8'><title>cutover verify: {_e(result['name'])}</title>",
           f"<style>{_CSS}</style>",
           f"<h1>cutover verify {_verdict(result['passed'])}</h1>",
           f"<p>plan <code>{_e(result['plan'])}</code> at {_e(result['at'])}</p>"]
    for t in result["tables"]:
        c = t["counts"]
        out.append(f"<h2>{_e(t['old_table'])} &rarr; {_e(t['table'])} {_verdict(t['passed'])}</h2>")
        out.append(f"<p>topic <code>{_e(t['topic'])}</code>, rows identified by <b>{t['mode']}</b>; "
                   f"old {c['old_rows']:,} rows, new {c['new_rows']:,}; matched {c['matched']:,}, missing "
                   f"{c['missing']:,}, extra {c['extra']:,}, mismatched {c['mismatched']:,}, duplicates "
                   f"{c['duplicates_old']:,} old / {c['duplicates_new']:,} new. Lag beyond the window: old "
                   f"{t['lag']['old_ahead']:,}, new {t['lag']['new_ahead']:,}. {t['cost']['seconds']} s.</p>")
        out.append(_rows(["gate", "limit", "found", ""], [
            [g, "no limit" if v["limit"] is None else v["limit"], v["found"], _verdict(v["passed"])]
            for g, v in t["gates"].items()]))
        out.append('<p>' + " ".join(f'<span class="bar" style="display:inline-flex;width:12px"><span class="{c}" '
                                    f'style="width:12px"></span></span> {t}' for c, t in (
                                        ("m", "matched"), ("x", "missing"), ("e", "extra"), ("d", "mismatched"),
                                        ("l", "lag"))) + "</p>")
        out.append(_rows(["partition", "", "old", "new", "matched", "missing", "extra", "mismatched", "dup old",
                          "dup new", "offsets", "window end", "lag old/new"],
                         [[p["partition"], _bar(p), p["old_rows"], p["new_rows"], p["matched"], p["missing"],
                           p["extra"], p["mismatched"], p["duplicates_old"], p["duplicates_new"],
                           f"{p['min_offset']}..{p['max_offset']}" if p["min_offset"] is not None else "",
                           p["window_end"] if p["window_end"] is not None else "",
                           f"{p['old_ahead']}/{p['new_ahead']}"] for p in t["partitions"]]))
        s = t["schema"]
        out.append(f"<h3>Schema {_verdict(s['passed'])}</h3>")
        out.append(_rows(["missing in new", "extra in new", "type changed", "nullability changed"],
                         [[_e(s["missing_in_new"]), _e(s["extra_in_new"]), _e(s["type_changed"]),
                           _e(s["nullability_changed"])]]))
        for kind, samples in t["samples"].items():
            if samples:
                out.append(f"<h3>Samples: {kind}</h3>")
                out.append(_rows(["partition", "offset / key", "details"],
                                 [[x["partition"], _e(x["id"]), _e({k: v for k, v in x.items()
                                                                    if k not in ("partition", "id")})]
                                  for x in samples]))
        if t["suites"]:
            out.append("<h3>great-expectations suites</h3>")
            out.append(_rows(["suite", "table", "", "expectation", "unexpected", "of"],
                             [[_e(su["suite"]), _e(su["table"]), _verdict(ex["success"]),
                               _e(f"{ex['type']} {json.dumps(ex['kwargs'], default=str)}"), ex["unexpected_count"],
                               ex["element_count"]] for su in t["suites"] for ex in su["expectations"]]))
    return "\n".join(out) + "\n"


def write(verified: VerifyResult, folder: Path) -> Path:
    """DIR/report.html and DIR/result.json; returns the HTML path."""
    result = verified.as_dict()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")
    page = folder / "report.html"
    page.write_text(render_html(result))
    return page


def render_text(verified: VerifyResult) -> str:
    result = verified.as_dict()
    lines = [f"verify {'PASSED' if result['passed'] else 'FAILED'} ({result['name']})"]
    for t in result["tables"]:
        c = t["counts"]
        lines.append(f"{t['old_table']} -> {t['table']} [{t['mode']}]: {'passed' if t['passed'] else 'FAILED'}; "
                     f"old {c['old_rows']:,}, new {c['new_rows']:,}, matched {c['matched']:,}, missing "
                     f"{c['missing']:,}, extra {c['extra']:,}, mismatched {c['mismatched']:,}, duplicates "
                     f"{c['duplicates_old'] + c['duplicates_new']:,}; lag old {t['lag']['old_ahead']:,} / new "
                     f"{t['lag']['new_ahead']:,}")
        rows = [[str(p["partition"]), str(p["old_rows"]), str(p["new_rows"]), str(p["missing"]), str(p["extra"]),
                 str(p["mismatched"]), str(p["duplicates_old"] + p["duplicates_new"]),
                 f"{p['old_ahead']}/{p['new_ahead']}"] for p in t["partitions"]]
        lines.append(table(rows, ["partition", "old", "new", "missing", "extra", "mismatched", "dups", "lag"]))
        for name in ("max_lag_rows.old_ahead", "max_lag_rows.new_ahead"):
            gate = t["gates"].get(name)
            if gate and not gate["passed"]:
                side = "old" if name.endswith("old_ahead") else "new"
                lines.append(f"  lag: the {side} table holds {gate['found']:,} rows beyond the other's position, over "
                             f"gates.{name} ({gate['limit']}); those rows were not compared (window ends: "
                             + ", ".join(f"{p['partition']}:{p['window_end']}" for p in t["partitions"]
                                         if p["window_end"] is not None)[:300] + ")")
        s = t["schema"]
        for col in s["missing_in_new"]:
            lines.append(f"  schema: column {col} is missing from {t['table']}")
        for ch in s["type_changed"]:
            lines.append(f"  schema: column {ch['column']} is {ch['old']} in the old table, {ch['new']} in the new")
        for kind, samples in t["samples"].items():
            for x in samples:
                detail = x.get("columns") or x.get("values") or {k: x[k] for k in ("old_copies", "new_copies")
                                                                 if k in x}
                lines.append(f"  {kind}: partition {x['partition']} {'offset' if t['mode'] == 'offsets' else 'id'} "
                             f"{x['id']}: {json.dumps(detail, default=str)[:300]}")
        for su in t["suites"]:
            failed = [ex["type"] for ex in su["expectations"] if not ex["success"]]
            lines.append(f"  suite {su['suite']} on {su['table']}: "
                         + ("passed" if su["success"] else "FAILED " + ", ".join(failed)))
    return "\n".join(lines)
