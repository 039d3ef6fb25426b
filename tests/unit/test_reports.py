"""The drill and verify reports: the numbers that prove the run first, tables not JSON, matplotlib charts
with the switches and faults marked on the time axis, and what a person could misread labelled."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from cutover.drill import report as drill_report
from cutover.verify import report as verify_report

T0 = 1_795_486_435.0


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _step(n: int, name: str, kind: str, op: str, start: float, took: float, detail: dict[str, Any] | None = None,
          outcome: str = "passed", error: str | None = None) -> dict[str, Any]:
    return {"number": n, "name": name, "kind": kind, "op": op, "started": T0 + start, "ended": T0 + start + took,
            "seconds": took, "outcome": outcome, "detail": detail or {}, "error": error}


def _switch(action: str, at: float, frozen: float, carried: int | None) -> dict[str, Any]:
    return {"phase": "promoted" if action == "promote" else "rolled-back", "carried_back": carried,
            "freeze_window": {"frozen_at": _iso(T0 + at), "switched_at": _iso(T0 + at + frozen), "seconds": frozen}}


COUNTS = {"old_rows": 1187, "new_rows": 1187, "matched": 1187, "missing": 0, "extra": 0, "mismatched": 0,
          "duplicates_old": 0, "duplicates_new": 0}


def drill_result(**change: Any) -> dict[str, Any]:
    steps = [
        _step(1, "sample traffic", "action", "traffic.start", 0, 0.1, {"rate": 100.0, "topics": ["a.orders"]}),
        _step(2, "the old and new tables agree", "expect", "verify-passed", 5, 12,
              {"passed": True, "tables": {"a.orders": COUNTS}}),
        _step(3, "kill a broker of <new>", "fault", "broker.kill", 18, 1, {"broker": 1}),
        _step(4, "switch to the new cluster", "action", "promote", 20, 13, _switch("promote", 24, 6.931, None)),
        _step(5, "switch back to the old cluster", "action", "rollback", 40, 11, _switch("rollback", 42, 9.006, 340)),
        _step(6, "the old cluster holds every record exactly once", "expect", "exactly-once", 55, 0.6,
              {"records": 3645, "where": "old"}),
        _step(7, "the canonical table holds every record exactly once", "expect", "exactly-once", 56, 0.1,
              {"records": 3645, "where": "tables", "table": "old"}),
    ]
    r = {"runbook": "full-migration", "purpose": "The whole path.", "file": "runbooks/full-migration.yaml",
         "plan": "/tmp/plan.yaml", "sandbox": True, "parameters": {"rate": 100}, "started": T0, "ended": T0 + 60,
         "passed": True, "failed_step": None, "steps": steps, "not_run": [],
         "samples": [{"t": T0 + t, "lag": lag, "freshness": {"a.orders": 2.0 + t / 10, "a_legacy.orders": None},
                      "series": {"cutover_mirror_state_lag_records": {"forward": lag, "reverse": 0.0},
                                 "cutover_shadow_rows_total": {"a.orders": 10.0 * t},
                                 "cutover_shadow_commit_failures_total": {"a.orders": float(t > 20)},
                                 "cutover_shadow_dead_letters_total": {"a.orders": 0.0},
                                 "cutover_shadow_lag_records": {"a.orders": 5.0},
                                 "cutover_catalog_up": {"": float(not 15 <= t <= 20)}, "cutover_storage_up": {"": 1.0},
                                 "cutover_switch_phase": {"ready": 1.0, "promoted": 0.0}}}
                     for t, lag in ((3, 34), (15, 50), (30, 0), (45, 380), (58, 586))]}
    r.update(change)
    return r


def _outside_svg(page: str) -> str:
    return re.sub(r"<svg.*?</svg>", "", page, flags=re.S)


def test_the_drill_report_leads_with_the_proof() -> None:
    cards = [(c.value, c.label, c.tone) for c in drill_report.headline(drill_result())]
    assert cards[0][:2] == ("PASSED", "drill full-migration")
    assert cards[1:] == [
        ("3,645", "records exactly once", "ok"), ("6.9 s", "promote freeze window", "info"),
        ("9.0 s", "rollback freeze window", "info"), ("340", "records carried back", "info"),
        ("1,187", "rows compared", "info"), ("0", "differences", "ok"), ("1", "faults injected", "warn")]
    page = drill_report.render(drill_result())
    assert page.index("records exactly once") < page.index("<h2>Steps")
    assert "on the old cluster; in the canonical tables" in page


def test_the_drill_charts_are_matplotlib_svg_with_times_units_and_marks() -> None:
    page = drill_report.render(drill_result())
    # the steps, then the dashboard's timeline: mirror lag both ways, shadow lag, rows, commit health, freshness, up
    assert page.count("<svg") == 7 and 'id="line2d_' in page and "<polyline" not in page  # drawn, not hand-written
    assert "time (UTC)" in page and ">records<" in page and ">seconds since the last commit<" in page
    for legend in (">forward<", ">reverse<", ">a.orders commit failures<", ">a.orders dead letters<", ">catalog<",
                   ">storage<", ">rows<", ">1 = up<"):
        assert legend in page, legend
    assert ">promote<" in page and ">rollback<" in page and ">fault (step 3)<" in page
    assert "promote freeze window" in page and "the forward mirror stops at promote" in page  # lag rise: expected
    events, spans = drill_report.marks(drill_result())
    assert [(e.label, e.kind, round(e.t - T0, 3)) for e in events] == [
        ("promote", "switch", 30.931), ("rollback", "switch", 51.006), ("fault (step 3)", "fault", 18)]
    assert [(s.kind, round(s.start - T0, 3), round(s.end - T0, 3)) for s in spans] == [
        ("freeze", 24, 30.931), ("freeze", 42, 51.006), ("expected", 30.931, 60)]


def test_the_drill_tables_hold_text_not_json_and_escape_names() -> None:
    page = drill_report.render(drill_result())
    text = _outside_svg(page)
    assert '{"' not in text and "<new>" not in text and "kill a broker of &lt;new&gt;" in text
    assert "frozen_at: 2026" in text and "carried_back: 340" in text


def test_a_failed_drill_says_so_first_and_names_the_step() -> None:
    r = drill_result()
    r["steps"][5] = {**r["steps"][5], "outcome": "failed", "error": "old: 2 records lost, 0 duplicated"}
    r.update(passed=False, failed_step={"number": 6, "name": r["steps"][5]["name"], "error": "old: 2 records lost"},
             not_run=[{"number": 8, "name": "never reached"}])
    cards = drill_report.headline(r)
    assert cards[0].value == "FAILED" and cards[0].tone == "bad"
    assert (cards[1].value, cards[1].tone) == ("NOT exactly once", "bad") and "2 records lost" in cards[1].note
    page = drill_report.render(r)
    assert "failed at step 6 (the old cluster holds every record exactly once)" in page
    assert "not run: never reached" in page


def test_a_drill_without_samples_or_switches_still_renders() -> None:
    page = drill_report.render(drill_result(samples=[], steps=drill_result()["steps"][:1]))
    assert page.count("no samples") == 6 and "<h2>Steps" in page


def verify_result() -> dict[str, Any]:
    counts = {"old_rows": 60, "new_rows": 60, "matched": 55, "missing": 1, "extra": 1, "mismatched": 3,
              "duplicates_old": 0, "duplicates_new": 1}
    part = {"min_offset": 0, "max_offset": 29, "window_end": 30, "old_ahead": 0, "new_ahead": 0}
    return {"name": "demo", "plan": "/tmp/plan.yaml", "at": "2026-11-24T10:00:00Z", "passed": False, "tables": [{
        "table": "ns.orders", "old_table": "ns.legacy", "topic": "ns.orders", "mode": "offsets", "passed": False,
        "counts": counts,
        "gates": {"max_missing_rows": {"limit": 0, "found": 1, "passed": False},
                  "max_lag_rows.old_ahead": {"limit": None, "found": 0, "passed": True}},
        "schema": {"passed": False, "missing_in_new": ["note"], "extra_in_new": ["kafka_offset"],
                   "type_changed": [{"column": "amount", "old": "decimal(10,2)", "new": "double",
                                     "same_family": False, "narrowing": False, "allowed": False}],
                   "nullability_changed": [{"column": "id", "old_nullable": False, "new_nullable": True}]},
        "suites": [{"suite": "orders", "table": "ns.orders", "success": False, "expectations": [
            {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}, "success": False,
             "unexpected_count": 2, "element_count": 60}]}],
        "partitions": [{"partition": 0, "old_rows": 30, "new_rows": 31, "matched": 27, "missing": 0, "extra": 1,
                        "mismatched": 2, "duplicates_old": 0, "duplicates_new": 1, **part},
                       {"partition": 1, "old_rows": 30, "new_rows": 29, "matched": 28, "missing": 1, "extra": 0,
                        "mismatched": 1, "duplicates_old": 0, "duplicates_new": 0, **part}],
        "samples": {"missing": [{"partition": 1, "id": 7, "values": {"id": 7, "name": "n7", "amount": "7.25"}}],
                    "extra": [],
                    "mismatched": [{"partition": 0, "id": 9, "columns": {
                        "name": {"old": "n9", "new": "changed"}, "note": {"old": None, "new": ""},
                        "score": {"old": 3.6666666666666665, "new": 3.666666666666667}}}],
                    "duplicates": [{"partition": 0, "id": 8, "old_copies": 1, "new_copies": 2}]},
        "lag": {"old_ahead": 0, "new_ahead": 0, "note": None}, "cost": {"seconds": 1.5},
        "old_snapshot": 1, "new_snapshot": 2}]}


def test_the_verify_report_leads_with_its_numbers() -> None:
    cards = [(c.value, c.label, c.tone) for c in verify_report.headline(verify_result())]
    assert cards == [("FAILED", "verify", "bad"), ("60", "rows compared", "info"), ("55", "rows identical", "info"),
                     ("6", "differences", "bad"), ("0", "rows beyond the window", "ok"),
                     ("0 of 1", "quality suites passed", "bad"), ("DIFFERS", "schema", "bad")]
    page = verify_report.render_html(verify_result())
    assert page.index("rows compared") < page.index("<h2>")


def test_the_verify_report_shows_schema_and_samples_as_rows_not_json() -> None:
    page = verify_report.render_html(verify_result())
    text = _outside_svg(page)
    assert '{"' not in text and "[" not in text.split("<body>")[1]
    cells = re.findall(r"<tr>(.*?)</tr>", text)
    plain = [re.sub(r"\|+", "|", re.sub(r"<[^>]+>", "|", c)).strip("|") for c in cells]
    assert "amount|type changed (another family)|decimal(10,2)|double|fails" in plain
    assert "note|missing in the new table|fails" in plain and "kafka_offset|only in the new table|listed" in plain
    assert "id|nullability changed|required|nullable|listed" in plain
    assert "0|9|name|n9|changed" in plain  # a mismatched row: partition, offset, column, old, new
    assert "0|9|note|null|(empty)" in plain  # null and empty differ on the page too
    assert "0|9|score|3.6666666666666665|3.666666666666667" in plain  # every digit: never two equal-looking values
    assert "1|7|7|n7|7.25" in plain  # a missing row, one column per column
    assert "0|8|1|2" in plain  # a duplicate: copies in old, in new
    assert "orders|ns.orders|FAILED|expect_column_values_to_not_be_null|column: id|2|60" in plain


def test_the_verify_report_charts_differences_per_partition_only_when_there_are_some() -> None:
    page = verify_report.render_html(verify_result())
    assert "Differences per partition" in page and page.count("<svg") == 1 and 'id="patch_' in page
    assert ">missing<" in page and ">mismatched<" in page and ">partition<" in page
    clean = verify_result()
    t = clean["tables"][0]
    t["counts"] = {**t["counts"], "missing": 0, "extra": 0, "mismatched": 0, "duplicates_new": 0, "matched": 60}
    t["partitions"] = [{**p, "missing": 0, "extra": 0, "mismatched": 0, "duplicates_new": 0} for p in t["partitions"]]
    t["schema"] = {"passed": True, "missing_in_new": [], "extra_in_new": [], "type_changed": [],
                   "nullability_changed": []}
    page = verify_report.render_html(clean)
    assert "<svg" not in page and "Same columns, same types, same nullability." in page


def test_the_drill_report_marks_the_scorecard_rows_it_rehearsed() -> None:
    from cutover.assess.model import exercised

    assert exercised("full-migration") == ["Kafka semantics that must stay unchanged", "Cost model", "Rollback model",
                                           "Offset ownership"]
    assert exercised("replay") == ["Table semantics: offsets to snapshots, schema evolution, late data",
                                   "Replay window"]
    r = {**drill_result(), "readiness": exercised("full-migration")}
    page = drill_report.render(r)
    section = page[page.index("Readiness this drill rehearses"):page.index("<h2>Steps</h2>")]
    assert "Rollback model" in section and section.count("PASSED") == 4
    failed = drill_report.render({**r, "passed": False})
    assert failed[failed.index("Readiness this drill rehearses"):].count("FAILED") >= 4
