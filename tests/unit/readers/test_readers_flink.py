"""flink readers without a JVM: the newest savepoint, the reset warning, the Java a move prints, what
plan check shows before the first savepoint."""

from __future__ import annotations

import os
from pathlib import Path

from cutover.plan import Plan, load_plan
from cutover.readers import flink

PLAN = """clusters:
  old: {bootstrap.servers: "127.0.0.1:1"}
  new: {bootstrap.servers: "127.0.0.1:2"}
switch: {journal_dir: journal}
readers:
  - {name: clicks, kind: flink, source_uid: src, savepoints: sp%s}
"""


def _plan(tmp: Path, extra: str = "") -> Plan:
    (tmp / "plan.yaml").write_text(PLAN % extra)
    return load_plan(str(tmp / "plan.yaml"), environ={})


def test_the_newest_complete_savepoint_is_the_one_moved(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    r = plan.spec.readers[0]
    assert flink.newest_savepoint(plan, r) is None
    for i, name in enumerate(("savepoint-a", "savepoint-b")):
        (tmp_path / "sp" / name).mkdir(parents=True)
        (tmp_path / "sp" / name / "_metadata").write_bytes(b"x")
        os.utime(tmp_path / "sp" / name / "_metadata", ns=(10**18 + i, 10**18 + i))
    (tmp_path / "sp" / "savepoint-c").mkdir()  # being written: no _metadata yet
    assert flink.newest_savepoint(plan, r) == tmp_path / "sp" / "savepoint-b"
    assert flink.start_file(plan, r) == tmp_path / "sp" / "cutover-start.json"
    assert (flink.uid(r, "old"), flink.uid(r, "new")) == ("src", "src-new")


def test_a_source_that_resets_out_of_range_offsets_is_warned_about(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    (warning,) = flink.position(plan, plan.spec.readers[0])[0]["warnings"]
    assert "resets an out-of-range offset to earliest" in warning and "OffsetResetStrategy.NONE" in warning
    plan = _plan(tmp_path, ", reset: none, new_source_uid: src-b")
    (tmp_path / "sp").mkdir()
    entry, problems = flink.position(plan, plan.spec.readers[0])
    assert entry["warnings"] == [] and problems == [] and entry["note"].startswith("no savepoint yet")
    assert flink.uid(plan.spec.readers[0], "new") == "src-b"


def test_plan_check_names_a_missing_savepoint_folder(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    (problem,) = flink.position(plan, plan.spec.readers[0])[1]
    assert problem[1] == f"reader clicks: no savepoint folder {tmp_path / 'sp'}" and "--savepointPath" in problem[2]


def test_the_java_starts_the_new_source_at_exactly_the_offsets() -> None:
    java = flink.java_snippet({"bootstrap.servers": "127.0.0.1:2", "source_uid": "src-new", "savepoint": "/sp/s-1",
                               "offsets": [{"topic": "t", "partition": 0, "offset": 20},
                                           {"topic": "t", "partition": 1, "offset": 7}]})
    assert 'offsets.put(new TopicPartition("t", 0), 20L);\noffsets.put(new TopicPartition("t", 1), 7L);' in java
    assert ".setStartingOffsets(OffsetsInitializer.offsets(offsets, OffsetResetStrategy.NONE))" in java
    assert '.uid("src-new")' in java and "flink run -s /sp/s-1 --allowNonRestoredState" in java
