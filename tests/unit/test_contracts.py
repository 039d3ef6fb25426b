"""The JSON contracts of docs/reference/contracts.md, pinned: each typed result's `as_dict()` gives exactly these keys
and shapes (what `-o json` prints and automation reads). A rename or a dropped key fails here."""

from __future__ import annotations

import json

from cutover.mirror import owner
from cutover.mirror.groups import GroupOutcome
from cutover.mirror.runner import PartitionResult, RunSummary
from cutover.mirror.status import GapStatus, GroupStatus, MirrorStatus, PartitionStatus
from cutover.shadow.job import ShadowSummary, TableRun
from cutover.shadow.status import PartitionLag, ShadowStatus, TableStatus
from cutover.switch.checks import Outcome
from cutover.switch.results import Explanation, StepPlan, StepRow, SwitchResult
from cutover.verify import results as vr


def _same(obj: object, expected: dict[str, object]) -> None:
    got = obj.as_dict()  # type: ignore[attr-defined]
    assert got == expected
    json.dumps(got, allow_nan=False)  # plain JSON, whatever the values


def test_mirror_status() -> None:
    s = MirrorStatus("forward", "old", "new", "C1", (
        PartitionStatus("orders", 0, 120, 100, 20, (GapStatus(10, 25),), "2026-11-23T05:00:00+00:00"),
        PartitionStatus("orders", 1, 7, None, 7, (), None)), (GroupStatus("billing", None, 2),), (OWNER,))
    _same(s, {
        "direction": "forward", "source": "old", "target": "new", "source_cluster": "C1", "lag": 27,
        "partitions": [
            {"topic": "orders", "partition": 0, "source_end": 120, "position": 100, "lag": 20,
             "gaps": [{"start": 10, "end": 25, "records": 15}], "last_group_sync": "2026-11-23T05:00:00+00:00"},
            {"topic": "orders", "partition": 1, "source_end": 7, "position": None, "lag": 7, "gaps": [],
             "last_group_sync": None}],
        "gaps": [{"topic": "orders", "partition": 0, "start": 10, "end": 25, "records": 15}],
        "groups": [{"group": "billing", "last_sync": None, "partitions": 2}],
        "owners": [{"shard": "0/1", "host": "h2", "pid": 42, "started_at": "2026-11-23T05:00:10+00:00",
                    "started_by": "hand", "drain": False, "alive": None, "ended_at": None, "ended": None,
                    "took_over": {"host": "h1", "pid": 7, "started_at": "2026-11-23T05:00:00+00:00",
                                  "started_by": "promote", "drain": False}}]})


#: One shard's owner as `mirror/owner.py` makes it from the record (another host: whether it runs is unknown).
OWNER = owner.as_status("0/1", {"host": "h2", "pid": 42, "started_at": 1795410010.0, "started_by": "hand",
                                "drain": False, "ended_at": None, "ended": None,
                                "took_over": {"host": "h1", "pid": 7, "started_at": 1795410000.0,
                                              "started_by": "promote", "drain": False}})


def test_mirror_run_summary() -> None:
    outcome = GroupOutcome("billing", {("orders", 0): 5}, {("orders", 1): "not mirrored yet"}, None,
                           [("audit", 0)])
    s = RunSummary("reverse", "0/1", "C2", 10, 2048, 3, 1.5, (
        PartitionResult("orders", 0, 12, 14, ((3, 5),)), PartitionResult("orders", 1, 4, 4, ())), (outcome,))
    _same(s, {
        "direction": "reverse", "shard": "0/1", "source_cluster": "C2", "records": 10, "bytes": 2048,
        "transactions": 3, "seconds": 1.5,
        "partitions": [{"topic": "orders", "partition": 0, "position": 12, "target_position": 14, "gaps": [[3, 5]]},
                       {"topic": "orders", "partition": 1, "position": 4, "target_position": 4, "gaps": []}],
        "gaps": [{"topic": "orders", "partition": 0, "position": 12, "target_position": 14, "gaps": [[3, 5]]}],
        "groups": [{"group": "billing", "reason": None,
                    "committed": [{"topic": "orders", "partition": 0, "offset": 5}],
                    "skipped": [{"topic": "orders", "partition": 1, "reason": "not mirrored yet"}],
                    "unmirrored": [{"topic": "audit", "partitions": [0]}]}]})


def test_shadow_run_summary_and_status() -> None:
    _same(ShadowSummary("new", "C2", "plan-abc", "follow", 12.5, (
        TableRun("ns.orders", "orders", 3, 120, 2, ("coupon",), {1: 40, 0: 80},
                 {"status": 0.31, "decode": 2.5, "write": 4.0, "commit": 0.6}, 1),)), {
        "cluster": "new", "cluster_id": "C2", "run_id": "plan-abc", "mode": "follow", "seconds": 12.5,
        "tables": [{"table": "ns.orders", "topic": "orders", "batches": 3, "two_pass_batches": 1, "rows": 120,
                    "dead_letters": 2, "added_columns": ["coupon"], "positions": {"0": 80, "1": 40},
                    "phases": {"status": 0.31, "decode": 2.5, "write": 4.0, "commit": 0.6}}]})
    _same(ShadowStatus("new", "C2", (TableStatus(
        "ns.orders", "orders", True, "C2", False, "2026-11-23T05:00:00+00:00", 77, "plan-abc", 2,
        "ns.orders_dead_letter", None, (PartitionLag(0, 80, 90, 10, True), PartitionLag(1, None, 5, 5, True))),)), {
        "cluster": "new", "cluster_id": "C2",
        "tables": [{"table": "ns.orders", "topic": "orders", "exists": True, "cluster_id": "C2",
                    "other_cluster": False, "last_commit": "2026-11-23T05:00:00+00:00", "snapshot_id": 77,
                    "run_id": "plan-abc", "lag": 15, "dead_letters": 2, "dead_letter_table": "ns.orders_dead_letter",
                    "dead_letter_last_commit": None,
                    "partitions": [{"partition": 0, "position": 80, "last_offset": 79, "end_offset": 90, "lag": 10,
                                    "lag_exact": True},
                                   {"partition": 1, "position": None, "last_offset": None, "end_offset": 5,
                                    "lag": 5, "lag_exact": True}]}]})


def test_verify_result_and_the_recorded_summary() -> None:
    counts = vr.Counts(10, 9, 8, 1, 0, 1, 0, 0)
    table = vr.TableResult(
        "ns.orders", "legacy.orders", "orders", "offsets", False, counts,
        {"max_missing_rows": vr.Gate(0, 1), "max_lag_rows.new_ahead": vr.Gate(None, 3)},
        {"passed": True, "missing_in_new": [], "extra_in_new": [], "type_changed": [], "nullability_changed": []},
        [], (vr.PartitionResult(0, counts, 0, 11, 12, 2, 3),), {"missing": [], "extra": [], "mismatched": [],
                                                              "duplicates": []},
        vr.Lag(2, 3, None), {"buckets": {"_b0": 1}, "differing": {"_b0": 1}, "rows_compared": 12, "seconds": 1.0},
        5, 6)
    counts_json = {"old_rows": 10, "new_rows": 9, "matched": 8, "missing": 1, "extra": 0, "mismatched": 1,
                   "duplicates_old": 0, "duplicates_new": 0}
    _same(vr.VerifyResult("/p/plan.yaml", "m", "2026-11-23T05:00:00+00:00", (table,)), {
        "passed": False, "plan": "/p/plan.yaml", "name": "m", "at": "2026-11-23T05:00:00+00:00", "registry": None,
        "tables": [{"table": "ns.orders", "old_table": "legacy.orders", "topic": "orders", "mode": "offsets",
                    "passed": False, "counts": counts_json,
                    "gates": {"max_missing_rows": {"limit": 0, "found": 1, "passed": False},
                              "max_lag_rows.new_ahead": {"limit": None, "found": 3, "passed": True}},
                    "schema": {"passed": True, "missing_in_new": [], "extra_in_new": [], "type_changed": [],
                               "nullability_changed": []},
                    "suites": [],
                    "partitions": [{"partition": 0, **counts_json, "min_offset": 0, "max_offset": 11,
                                    "window_end": 12, "old_ahead": 2, "new_ahead": 3}],
                    "samples": {"missing": [], "extra": [], "mismatched": [], "duplicates": []},
                    "lag": {"old_ahead": 2, "new_ahead": 3, "note": None},
                    "cost": {"buckets": {"_b0": 1}, "differing": {"_b0": 1}, "rows_compared": 12, "seconds": 1.0},
                    "old_snapshot": 5, "new_snapshot": 6, "freshness": None}]})
    last = table.summary("2026-11-23T05:00:00+00:00")
    _same(last, {"at": "2026-11-23T05:00:00+00:00", "passed": False, "counts": counts_json,
                 "lag": {"old_ahead": 2, "new_ahead": 3}, "old_snapshot": 5, "new_snapshot": 6})
    assert vr.LastVerify.from_property(last.to_property()) == last
    older = vr.LastVerify.from_property('{"at": "2026-11-22T00:00:00+00:00", "passed": true}')  # before lag
    assert older.passed and older.lag == vr.Lag(0, 0) and older.counts == vr.Counts()


def test_switch_explanation_and_result() -> None:
    _same(Explanation("promote", "m", "ready", (Outcome("phase", "the phase allows promote", None),
                                               Outcome("mirror-lag", "lag at most 0", "lag 4 > gate 0")),
                      (StepPlan("hold", "hold while the postpone file exists", False, ("go on at once",)),)), {
        "action": "promote", "plan": "m", "dry_run": True, "phase": "ready", "passed": False,
        "checks": [{"name": "phase", "expects": "the phase allows promote", "passed": True, "reason": None},
                   {"name": "mirror-lag", "expects": "lag at most 0", "passed": False, "reason": "lag 4 > gate 0"}],
        "steps": [{"name": "hold", "does": "hold while the postpone file exists", "done_earlier": False,
                   "would": ["go on at once"], "unknown": []}], "explained": True})
    refused = Explanation("cancel", "m", "ready", (Outcome("hooks", "hooks run", "no-such-hook is missing"),), (),
                          dry_run=False).as_dict()  # --execute refused: the same shape, no step ran
    assert (refused["dry_run"], refused["passed"], refused["steps"]) == (False, False, [])
    summary = {"freeze_window": {"frozen_at": "2026-11-23T05:00:00.000Z", "switched_at": "2026-11-23T05:00:09.500Z",
                                 "seconds": 9.5},
               "past_point_of_no_return": True, "carried_back": 12,
               "routing": {"active": "old", "bootstrap.servers": "127.0.0.1:9092"}}
    r = SwitchResult("rollback", "m", "run1", False, "rolled-back",
                     (StepRow("freeze-producers", "done", 0.1, "2026-11-23T05:00:00.000Z", None, {"hook": None}),),
                     summary)
    _same(r, {"action": "rollback", "plan": "m", "run": "run1", "already_done": False, "phase": "rolled-back",
              "steps": [{"name": "freeze-producers", "outcome": "done", "seconds": 0.1,
                         "started_at": "2026-11-23T05:00:00.000Z", "error": None, "detail": {"hook": None}}],
              **summary})
    assert r.carried_back == 12 and r.past_point_of_no_return and r.freeze_window is not None
    assert r.freeze_window.seconds == 9.5
