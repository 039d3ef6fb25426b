"""The canary of `cutover readers translate`, as JSON: one entry per partition it checked, with both
positions and its verdict. The reader is a Spark checkpoint written by hand in Spark's own format (the
real query runs in test_readers_spark.py, in the slow lane); the topic, the mirror and the canary's
reads are the sandbox's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic, produce
from tests.integration.stream_query_util import value_at

META = '{"batchWatermarkMs":0,"batchTimestampMs":1764000000000,"conf":{"spark.sql.shuffle.partitions":"4"}}'


def _plan_file(sandbox: Sandbox, ns: str, tmp_path: Path) -> Path:
    """The test's plan: its topics, its journal, its own mirror state (other plans mirror beside it), and a
    Spark checkpoint reader."""
    return derive(sandbox.plan_file, tmp_path / f"{ns}.yaml", merge=True, name=ns,
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                  switch={"journal_dir": str(tmp_path / "journal")}, tables=[],
                  mirror={"state_prefix": f"__cutover_{ns}"},
                  readers=[{"name": "orders-query", "kind": "spark-checkpoint",
                            "checkpoint": str(tmp_path / "checkpoint")}]).file


def _checkpoint(folder: Path, positions: dict[str, dict[int, int]]) -> None:
    """A stopped query's checkpoint: batch 0 planned at `positions` and committed."""
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    line = "{" + ",".join(f'"{t}":{{' + ",".join(f'"{p}":{o}' for p, o in sorted(parts.items())) + "}"
                          for t, parts in positions.items()) + "}"
    (folder / "offsets" / "0").write_text("\n".join(["v1", META, line]))
    (folder / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')


def _records(props: dict[str, str], topic: str, phase: str, counts: dict[int, int]) -> None:
    produce(props, topic, [{"key": f"{p}-{i}".encode(), "value": f"{phase}|{p}|{i}".encode(), "partition": p}
                           for p, n in counts.items() for i in range(n)])


def test_the_canary_in_json_has_one_entry_per_partition_with_both_offsets_and_its_verdict(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    old, new = plan.cluster("old"), plan.cluster("new")
    topic = f"{ns}.orders"
    create_topic(old, topic, 3)
    plan_file = _plan_file(sandbox, ns, tmp_path)
    _records(old, topic, "1", {0: 4, 1: 6, 2: 2})
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    _records(old, topic, "2", {0: 5, 1: 3, 2: 0})  # the second run's transaction marker shifts these on new
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    # partition 0 in the second phase, 1 at its start, 2 at its end (the end agrees with the end)
    _checkpoint(tmp_path / "checkpoint", {topic: {0: 6, 1: 0, 2: 2}})

    run = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "orders-query", "--dry-run",
                  "-o", "json")
    assert run.code == 0, run.err
    moved = run.json()
    targets = {(p["topic"], p["partition"]): p["target_offset"] for p in moved["positions"]}
    assert targets[(topic, 0)] != 6  # the map is not the identity there: the canary's offsets are the map's
    checked = moved["canary"]
    assert [(c["topic"], c["partition"]) for c in checked] == [(topic, 0), (topic, 1), (topic, 2)]
    for c in checked:
        assert c["source_offset"] == {0: 6, 1: 0, 2: 2}[c["partition"]]
        assert c["target_offset"] == targets[(topic, c["partition"])]
        assert c["same"] is True
    first = checked[0]["source_record"]
    assert checked[0]["target_record"] == first == {"key_bytes": 3, "value_bytes": 5, "headers": 0,
                                                    "timestamp": first["timestamp"]}
    assert value_at(old, topic, 0, 6) == value_at(new, topic, 0, checked[0]["target_offset"]) == "2|0|2"
    assert checked[2]["source_record"] is None and checked[2]["target_record"] is None  # both at the end
    text = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "orders-query", "--dry-run")
    assert "canary: the next record of each of the 3 partition(s) is the same on both clusters" in text.out, text.out


def test_a_reader_reading_an_unselected_topic_or_moved_back_before_it_moved_forth_is_refused(
        sandbox: Sandbox, ns: str, tmp_path: Path) -> None:
    plan_file = _plan_file(sandbox, ns, tmp_path)
    _checkpoint(tmp_path / "checkpoint", {f"{ns}.orders": {0: 3}, "elsewhere": {0: 5, 1: 2}})
    files = sorted(p for p in tmp_path.rglob("*"))

    def translate(*args: str) -> Any:
        return cutover("readers", "translate", "--plan", str(plan_file), "--reader", "orders-query", *args)

    # the mirror never copies a topic outside the selection: "let the mirror copy it" would not help
    refused = translate("--dry-run")
    assert refused.code == 3, refused.err
    assert ("error: reader orders-query reads elsewhere, which the plan's topic selection leaves out: the mirror "
            "never copies it") in refused.err
    assert "fix: select elsewhere in topics.include; nothing was written" in refused.err
    # its positions are the old cluster's until a move takes it to the new one: read as the new cluster's,
    # they would move it back to other records. Before any promote, every --reverse command is refused first
    # (mirror/direction.py); after one, a reader with no recorded forward move is (readers.mapping).
    back = translate("--reverse", "--execute")
    assert back.code == 3, back.err
    said = f"error: cutover readers translate --reverse: there has been no promote of plan {ns} "
    assert back.err.startswith(said), back.err
    assert "Traceback" not in back.err + refused.err
    assert sorted(p for p in tmp_path.rglob("*")) == files  # nothing written


def test_a_canary_difference_refuses_the_move_and_its_json_still_says_which_partition_differs(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    old, new = plan.cluster("old"), plan.cluster("new")
    topic = f"{ns}.orders"
    create_topic(old, topic, 2)
    plan_file = _plan_file(sandbox, ns, tmp_path)
    _records(old, topic, "1", {0: 3, 1: 3})
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    produce(new, topic, [{"value": b"written on new, not by the mirror", "partition": 1}])
    _checkpoint(tmp_path / "checkpoint", {topic: {0: 3, 1: 3}})  # the query read everything on old

    run = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "orders-query", "--execute",
                  "-o", "json")
    assert run.code == 3, run.err
    assert "the translated positions point at other records on" in run.err and "on 1 of 2 partition(s)" in run.err
    checked = run.json()["canary"]
    assert [(c["partition"], c["same"]) for c in checked] == [(0, True), (1, False)]
    assert checked[1]["source_record"] is None and checked[1]["target_record"]["value_bytes"] == 33
    assert not (tmp_path / "checkpoint" / "offsets" / "1").exists()  # nothing written
