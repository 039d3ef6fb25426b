"""`cutover demo` as the tests run it: the full migration on a sandbox, checked end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cutover.kafka.clients import ClusterRef
from tests.conftest import cutover, secret_values


def run_demo(folder: Path, old_pipeline: str = "sink", value_format: str = "json",
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the demo on the sandbox in `folder`; check its summary; return it and the drill's result."""
    from cutover.local.sandbox import Sandbox

    kind = Sandbox(folder).status()["catalog"]["kind"]  # --catalog the same as the sandbox's: it goes on
    # 25 records a second (the default is 100): the producer runs through every step, and at 100 a
    # second the brokers, the mirror, the sink and the per-record commits of the sample consumer were
    # most of the demo's CPU beside CI's other lane; 150 records a phase take 6 s of it.
    run = cutover("demo", "--dir", str(folder), "--records", "150", "--rate", "25", "--catalog", kind,
                  "--old-pipeline", old_pipeline, "--format", value_format, "-o", "json", timeout=2400)
    assert run.code == 0, run.err[-3000:]
    s = run.json()
    assert s["catalog"] == kind and s["old_pipeline"] == old_pipeline and s["format"] == value_format
    assert s["passed"] and s["consumed_exactly_once"] and s["verify_passed"] and s["canonical_table_exactly_once"]
    assert s["verify_after_round_trip_passed"] and s["promoted_again"] and s["verify_after_second_promote_passed"]
    assert s["each_cluster_exactly_once"]
    assert s["freeze_window_seconds"] > 0 and s["carried_back"] > 0 and s["records"] > 450
    result = json.loads((Path(s["report"]).parent / "result.json").read_text())
    assert result["runbook"] == "full-migration" and len(result["steps"]) == 32
    assert [st["outcome"] for st in result["steps"]] == ["passed"] * 32
    # Then complete: the final verify passed, the mirrors retired and their state removed (the demo's plan
    # has state topics of its own), the journal archived beside the completion record.
    record = Path(s["completion_record"])
    assert s["completed"] and record.exists() and not record.with_name("journal.jsonl").exists()
    assert json.loads(record.read_text())["action"] == "complete" and s["removed"] >= 4
    # the last verify, after the traffic stopped, compared every row of both tables: none beyond either
    last = next(st for st in result["steps"] if st["name"] == "verify after the second promote")["detail"]["tables"]
    assert len(last) == 2 and all(c["matched"] == c["old_rows"] == c["new_rows"] > 0 for c in last.values()), last
    if old_pipeline == "sink":
        _the_sink_wrote_the_old_tables(folder, Path(s["plan"]))
        # each switch (promote, rollback, promote) waits one commit interval for the paused sinks, in its first
        # table's hand-over: the second table's finds its sink paused that long already
        waited = _commit_cycle_waits(record.parent)
        assert len(waited) == 3 and all(len(w) == 2 and w[0] > 0 and w[1] == 0 for w in waited), waited
    # No secret of the sandbox (S3 keys, the database's password) in the output, the plan, the
    # journal, the report or the checkpoints.
    written = [run.out, run.err, *(f.read_bytes().decode(errors="replace")
                                   for f in Path(s["plan"]).parent.rglob("*") if f.is_file())]
    for value in secret_values(folder):
        assert not [text for text in written if value in text]
    return s, result


def _commit_cycle_waits(journal: Path) -> list[list[float]]:
    """Per switch run in the archived journal, the seconds each sink hand-over waited for a commit cycle."""
    runs: list[list[float]] = []
    for path in sorted((journal / "archive").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "begin":
                runs.append([])
            elif event.get("event") == "step-end" and "waited_for_a_commit_cycle" in (event.get("detail") or {}):
                runs[-1].append(event["detail"]["waited_for_a_commit_cycle"])
    return [r for r in runs if r]


def _the_sink_wrote_the_old_tables(folder: Path, plan_file: Path) -> None:
    """Iceberg's sink connectors wrote the old tables, and run on the new cluster now (the demo ends
    promoted), each with its group there at the end of its topic. (Its summary offsets are gone by
    then: the lake team's compaction and expiry of the old table left one snapshot, without them.)"""
    from cutover.kafka.connect import Connect
    from cutover.kafka.inspect import partition_counts
    from cutover.kafka.offsets import group_info
    from cutover.local.sandbox import Sandbox
    from cutover.plan import load_plan

    plan = load_plan(plan_file)
    worker = Sandbox(folder).status()["connect"]
    assert worker["running"] and worker["cluster"] == "new"
    new = ClusterRef.of(plan, "new")
    for pair in plan.spec.tables:
        assert pair.writer_offsets == "iceberg-connect" and pair.connector and pair.connect_url == worker["url"]
        state = Connect(worker["url"]).state(pair.connector)
        assert state is not None and state.state == "RUNNING", state
        done = group_info(new, pair.sink_group, 30).offsets
        assert {p for (t, p) in done if t == pair.topic} == set(range(partition_counts(new)[pair.topic])), done


def registries_agree(summary: dict[str, Any]) -> None:
    """The registry moved with the topics: each table topic's subject has the same versions under the
    same ids on both registries."""
    from cutover.plan import load_plan
    from cutover.registry.sync import clients

    plan = load_plan(summary["plan"])
    old, new = clients(plan, 30)
    for pair in plan.spec.tables:
        subject = f"{pair.topic}-value"
        assert old.versions(subject) and new.versions(subject) == old.versions(subject)
        for v in old.versions(subject):
            assert new.version(subject, v).id == old.version(subject, v).id  # type: ignore[union-attr]
