"""The verify result for people: text on stdout, and an HTML report a person reads at a glance.

The page leads with the verdict and its numbers (rows compared, identical, differences, rows
beyond the window, suites), then per table the gates, the differences per partition as a chart,
the schema differences and the sample rows as tables: one column per column, never JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cutover.output import table
from cutover.report import charts, page
from cutover.report.page import Card, Html
from cutover.verify.results import VerifyResult

#: the kinds of difference, as the chart and the cards name them, with their colours
_DIFFS = {"missing": "#cf222e", "extra": "#bf8700", "mismatched": "#8250df", "duplicated": "#0072B2",
          "beyond the window": "#8c959f"}


def _differences(c: dict[str, int]) -> int:
    return c["missing"] + c["extra"] + c["mismatched"] + c["duplicates_old"] + c["duplicates_new"]


def headline(result: dict[str, Any]) -> list[Card]:
    ts = result["tables"]
    compared = sum(t["counts"]["old_rows"] for t in ts)
    diffs = sum(_differences(t["counts"]) for t in ts)
    beyond = sum(t["lag"]["old_ahead"] + t["lag"]["new_ahead"] for t in ts)
    lag_ok = all(g["passed"] for t in ts for n, g in t["gates"].items() if n.startswith("max_lag_rows"))
    suites = [su for t in ts for su in t["suites"]]
    out = [Card("PASSED" if result["passed"] else "FAILED", "verify", "ok" if result["passed"] else "bad",
                f"{sum(t['passed'] for t in ts)} of {len(ts)} table pair(s) passed"),
           Card(f"{compared:,}", "rows compared", "info",
                f"old table(s); the new hold {sum(t['counts']['new_rows'] for t in ts):,}"),
           Card(f"{sum(t['counts']['matched'] for t in ts):,}", "rows identical", "info",
                "same identity, same content"),
           Card(f"{diffs:,}", "differences", "ok" if diffs == 0 else "bad",
                "missing, extra, mismatched or duplicated rows"),
           Card(f"{beyond:,}", "rows beyond the window", "ok" if beyond == 0 else ("warn" if lag_ok else "bad"),
                "one table ahead of the other; not compared" + ("" if lag_ok else ": over the lag gate"))]
    if suites:
        good = sum(1 for su in suites if su["success"])
        out.append(Card(f"{good} of {len(suites)}", "quality suites passed", "ok" if good == len(suites) else "bad",
                        "great-expectations, from checks/"))
    schema_bad = [t["table"] for t in ts if not t["schema"]["passed"]]
    if schema_bad:
        out.append(Card("DIFFERS", "schema", "bad", ", ".join(schema_bad)))
    return out


def _schema_rows(s: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = [[c, "missing in the new table", "", "", page.verdict(False, no="fails")]
                             for c in s["missing_in_new"]]
    rows += [[c, "only in the new table", "", "", "listed"] for c in s["extra_in_new"]]
    rows += [[c["column"], "type changed" + (" (narrowing: can lose data)" if c["narrowing"] else "")
              + ("" if c["same_family"] else " (another family)"), c["old"], c["new"],
              "allowed" if c["allowed"] else page.verdict(False, no="fails")] for c in s["type_changed"]]
    rows += [[c["column"], "nullability changed", "nullable" if c["old_nullable"] else "required",
              "nullable" if c["new_nullable"] else "required", "listed"] for c in s["nullability_changed"]]
    return rows


def _value(v: Any) -> Any:
    """A sample value: null and the empty string look different, so a difference between them shows."""
    if v is None:
        return Html('<i class="note">null</i>')
    return Html('<i class="note">(empty)</i>') if v == "" else v


def _samples(kind: str, mode: str, samples: list[dict[str, Any]]) -> Html:
    ident = "offset" if mode == "offsets" else "key" if mode == "key" else "row hash"
    if kind == "mismatched":
        return page.table(["partition", ident, "column", "old", "new"],
                          [[x["partition"], x["id"], col, _value(v["old"]), _value(v["new"])]
                           for x in samples for col, v in x["columns"].items()], numeric=(0,), wrap=(3, 4))
    if kind == "duplicates":
        return page.table(["partition", ident, "copies in old", "copies in new"],
                          [[x["partition"], x["id"], x.get("old_copies"), x.get("new_copies")] for x in samples],
                          numeric=(0, 2, 3))
    columns = list(dict.fromkeys(c for x in samples for c in x.get("values", {})))
    return page.table(["partition", ident, *columns],
                      [[x["partition"], x["id"], *(_value(x.get("values", {}).get(c)) for c in columns)]
                       for x in samples],
                      numeric=(0,))


def _table_section(t: dict[str, Any]) -> list[str]:
    c = t["counts"]
    out = [f"<h2>{page.esc(t['old_table'])} &rarr; {page.esc(t['table'])}: {page.verdict(t['passed'])}</h2>",
           f"<p>topic <code>{page.esc(t['topic'])}</code>; rows identified by <b>{page.esc(t['mode'])}</b>; "
           f"old {c['old_rows']:,} rows, new {c['new_rows']:,}; took {page.esc(t['cost'].get('seconds'))} s.</p>"]
    if t["lag"].get("note"):
        out.append(f"<p class='note'>{page.esc(t['lag']['note'])}</p>")
    out.append(page.table(["gate", "limit", "found", ""], [
        [g, "no limit" if v["limit"] is None else v["limit"], v["found"], page.verdict(v["passed"])]
        for g, v in t["gates"].items()], numeric=(1, 2)))
    parts = t["partitions"]
    if any(_differences(p) + p["old_ahead"] + p["new_ahead"] for p in parts):
        out.append("<h3>Differences per partition</h3>")
        out.append(charts.stacked_bars("partition", "rows", [str(p["partition"]) for p in parts], {
            "missing": [p["missing"] for p in parts], "extra": [p["extra"] for p in parts],
            "mismatched": [p["mismatched"] for p in parts],
            "duplicated": [p["duplicates_old"] + p["duplicates_new"] for p in parts],
            "beyond the window": [p["old_ahead"] + p["new_ahead"] for p in parts]}, _DIFFS))
    out.append("<h3>Per partition</h3>")
    out.append(page.table(
        ["partition", "old", "new", "identical", "missing", "extra", "mismatched", "dup old", "dup new", "offsets",
         "window end", "beyond: old / new"],
        [[p["partition"], p["old_rows"], p["new_rows"], p["matched"], p["missing"], p["extra"], p["mismatched"],
          p["duplicates_old"], p["duplicates_new"],
          f"{p['min_offset']:,} .. {p['max_offset']:,}" if p["min_offset"] is not None else "",
          p["window_end"], f"{p['old_ahead']:,} / {p['new_ahead']:,}"] for p in parts],
        numeric=range(9)))
    s = t["schema"]
    rows = _schema_rows(s)
    out.append(f"<h3>Schema: {page.verdict(s['passed'], 'same', 'DIFFERS')}</h3>")
    out.append(page.table(["column", "difference", "old", "new", ""], rows, wrap=(1,)) if rows
               else "<p>Same columns, same types, same nullability.</p>")
    for kind, samples in t["samples"].items():
        if samples:
            out.append(f"<h3>Sample rows: {page.esc(kind)} ({len(samples)} shown)</h3>")
            out.append(_samples(kind, t["mode"], samples))
    if t["suites"]:
        out.append("<h3>great-expectations suites</h3>")
        out.append(page.table(["suite", "table", "", "expectation", "arguments", "unexpected", "of"], [
            [su["suite"], su["table"], page.verdict(ex["success"]), ex["type"], ex["kwargs"], ex["unexpected_count"],
             ex["element_count"]] for su in t["suites"] for ex in su["expectations"]], numeric=(5, 6)))
    return out


def render_html(result: dict[str, Any]) -> str:
    body = [f"<h1>cutover verify: {page.verdict(result['passed'])}</h1>", page.cards(headline(result)),
            f"<p class='note'>plan <code>{page.esc(result['plan'])}</code> ({page.esc(result['name'])}) at "
            f"{page.esc(result['at'])}</p>"]
    for t in result["tables"]:
        body += _table_section(t)
    return page.page(f"cutover verify {result['name']}: {'PASSED' if result['passed'] else 'FAILED'}", body)


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
    reg = result.get("registry")
    if reg is not None:
        lines.append(f"registry audit of the new cluster: {'passed' if reg['passed'] else 'FAILED'}; "
                     f"{reg['records']:,} record(s), {len(reg['ids_checked'])} schema id(s)")
        lines += [f"  {f['kind']}" + (f" at {f['topic']}/{f['partition']} offset {f['offset']}" if f["topic"] else "")
                  + f": {f['text']}" for f in reg["failures"]]
    for t in result["tables"]:
        c = t["counts"]
        lines.append(f"{t['old_table']} -> {t['table']} [{t['mode']}]: {'passed' if t['passed'] else 'FAILED'}; "
                     f"old {c['old_rows']:,}, new {c['new_rows']:,}, matched {c['matched']:,}, missing "
                     f"{c['missing']:,}, extra {c['extra']:,}, mismatched {c['mismatched']:,}, duplicates "
                     f"{c['duplicates_old'] + c['duplicates_new']:,}; lag old {t['lag']['old_ahead']:,} / new "
                     f"{t['lag']['new_ahead']:,}")
        lines += _freshness_lines(t.get("freshness"))
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


def _freshness_lines(fresh: dict[str, Any] | None) -> list[str]:
    """Each table's record-to-commit delay, and what a platform's table cannot prove."""
    if not fresh:
        return []
    out = []
    for side in ("old", "new"):
        f = fresh[side]
        out.append(f"  freshness, {side} table: " + (f"p50 {f['p50_ms'] / 1000:.2f} s, p95 {f['p95_ms'] / 1000:.2f} s "
                                                     f"over {f['rows']:,} rows (record timestamp to commit)"
                                                     if f["p50_ms"] is not None else f"not measured: {f['note']}"))
    if fresh.get("cannot_prove"):
        out.append(f"  not provable from the platform's table: {fresh['cannot_prove']}; rows compared by key "
                   "(else content) and partition")
    return out
