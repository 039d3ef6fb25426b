"""A Spark checkpoint's Kafka positions read and moved (pure file logic; the real query runs in
tests/integration/test_readers_spark.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.errors import UsageError
from cutover.readers import spark_checkpoint as sc
from cutover.readers.store import Local

META = '{"batchWatermarkMs":0,"batchTimestampMs":1764000000000,"conf":{"spark.sql.shuffle.partitions":"4"}}'


def _checkpoint(tmp: Path, batches: dict[int, list[str]], commits: list[int]) -> sc.Checkpoint:
    (tmp / "offsets").mkdir(parents=True)
    (tmp / "commits").mkdir()
    for n, sources in batches.items():
        (tmp / "offsets" / str(n)).write_text("\n".join(["v1", META, *sources]))
    for n in commits:
        (tmp / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return sc.Checkpoint(Local(tmp))


def test_the_next_batch_carries_each_kafka_position_translated_and_other_sources_as_they_were(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path, {
        0: ['{"orders":{"0":5,"1":7}}', "-", '{"logOffset":0}'],
        1: ['{"orders":{"1":9,"0":6},"payments":{"0":3}}', '{"audit":{"0":100}}', '{"logOffset":1}'],
    }, commits=[0, 1])
    last = ck.last_committed()
    assert last.batch == 1
    assert last.kafka() == {0: {"orders": {0: 6, 1: 9}, "payments": {0: 3}}, 1: {"audit": {0: 100}}}

    moved = sc.moved(last, lambda t, p, o: o * 10 + p)
    assert moved.batch == 2 and moved.metadata == META
    assert moved.sources == ('{"orders":{"0":60,"1":91},"payments":{"0":30}}', '{"audit":{"0":1000}}',
                             '{"logOffset":1}')
    written = sc.write(ck, moved)
    assert written == [str(tmp_path / "offsets" / "2"), str(tmp_path / "commits" / "2")]
    assert (tmp_path / "offsets" / "2").read_text() == "\n".join(["v1", META, *moved.sources])
    assert (tmp_path / "commits" / "2").read_text() == 'v1\n{"nextBatchWatermarkMs":0}'
    assert ck.last_committed() == moved
    assert sorted(f.name for f in (tmp_path / "offsets").iterdir()) == ["0", "1", "2"]  # nothing else left


def test_an_uncommitted_last_batch_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path, {0: ['{"t":{"0":1}}'], 1: ['{"t":{"0":4}}']}, commits=[0])
    with pytest.raises(sc.CheckpointError) as err:
        ck.last_committed()
    assert "batch 1 is planned (offsets/1) but not committed (last commit: 0)" in str(err.value)
    assert "stop it cleanly" in err.value.render()
    assert sorted(f.name for f in (tmp_path / "commits").iterdir()) == ["0"]


def test_a_batch_written_meanwhile_by_a_running_query_is_never_overwritten(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path, {0: ['{"t":{"0":1}}']}, commits=[0])
    moved = sc.moved(ck.last_committed(), lambda t, p, o: o + 1)
    (tmp_path / "offsets" / "1").write_text("v1\n{}\n{\"t\":{\"0\":2}}")  # the query got there first
    with pytest.raises(sc.CheckpointError, match="the query is running"):
        sc.write(ck, moved)
    assert (tmp_path / "offsets" / "1").read_text() == "v1\n{}\n{\"t\":{\"0\":2}}"
    assert not (tmp_path / "commits" / "1").exists()
    assert [f.name for f in (tmp_path / "offsets").iterdir() if f.name.startswith(".")] == []


@pytest.mark.parametrize("line", ["-", '{"logOffset":3}', "17", '{"t":{"0":"x"}}', '{"t":[1]}', "{bad", "{}"])
def test_lines_of_other_sources_are_not_taken_for_kafka(line: str) -> None:
    assert sc.kafka_positions(line) is None


def test_a_folder_that_is_not_a_checkpoint_is_named(tmp_path: Path) -> None:
    with pytest.raises(sc.CheckpointError, match="has no offsets/ entries"):
        sc.Checkpoint(Local(tmp_path)).last_committed()
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v2\n{}\n-")
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "0").write_text("v1\n{}")
    with pytest.raises(sc.CheckpointError, match="not a Spark offset log entry of version v1"):
        sc.Checkpoint(Local(tmp_path)).last_committed()


def test_an_interrupted_translation_is_finished_and_any_other_uncommitted_batch_refused(tmp_path: Path) -> None:
    from cutover.readers.spark import _base

    ck = _checkpoint(tmp_path, {0: ['{"t":{"0":3,"1":4}}']}, commits=[0])
    plus = lambda t, p, o: o + 100  # noqa: E731
    planned = sc.moved(ck.last_committed(), plus)
    (tmp_path / "offsets" / "1").write_text("\n".join(["v1", META, *planned.sources]))  # died before the commit
    base, _planned, resuming = _base(ck, plus)
    assert base.batch == 0 and resuming
    assert sc.write(ck, sc.moved(base, plus)) == [str(tmp_path / "commits" / "1")]  # only what was missing
    assert ck.last_committed().sources == ('{"t":{"0":103,"1":104}}',)

    (tmp_path / "offsets" / "2").write_text("v1\n" + META + '\n{"t":{"0":200,"1":200}}')  # the query's own
    with pytest.raises(sc.CheckpointError, match="batch 2 is planned"):
        _base(ck, plus)


def test_a_stateful_query_is_refused_and_a_file_sink_gets_its_empty_entry(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path / "ck", {0: ['{"t":{"0":3}}']}, commits=[0])
    sink = tmp_path / "out" / "_spark_metadata"
    sink.mkdir(parents=True)
    (sink / "0").write_text('v1\n{"path":"file:/out/part-0.parquet","size":1,"isDir":false,"modificationTime":1,'
                            '"blockReplication":1,"blockSize":1,"action":"add"}')
    written = sc.write(ck, sc.moved(ck.last_committed(), lambda t, p, o: o), Local(sink))
    assert written == [str(tmp_path / "ck" / "offsets" / "1"), str(sink / "1"), str(tmp_path / "ck" / "commits" / "1")]
    assert (sink / "1").read_text() == "v1"
    with pytest.raises(sc.CheckpointError, match="no file sink log here"):
        sc.write(ck, sc.moved(ck.last_committed(), lambda t, p, o: o), Local(tmp_path / "elsewhere"))
    (tmp_path / "ck" / "state" / "0").mkdir(parents=True)
    with pytest.raises(sc.CheckpointError, match="holds state") as err:
        ck.last_committed()
    assert "--starting-offsets" in err.value.render()


def test_plan_check_shows_each_readers_position_and_names_what_a_translation_would_refuse(tmp_path: Path) -> None:
    from tests.conftest import cutover

    _checkpoint(tmp_path / "ck", {0: ['{"orders":{"0":5,"1":7}}', '{"logOffset":2}']}, commits=[0])
    plan = tmp_path / "plan.yaml"
    plan.write_text("clusters:\n  old: {bootstrap.servers: 'o:9092'}\n  new: {bootstrap.servers: 'n:9092'}\n"
                    "topics: {include: ['orders']}\n"
                    "readers:\n  - {name: orders-query, kind: spark-checkpoint, checkpoint: ck}\n")
    run = cutover("plan", "check", "--plan", str(plan), "--offline", "-o", "json")
    assert run.code == 0, run.err
    assert run.json()["readers"] == [{"reader": "orders-query", "kind": "spark-checkpoint",
                                      "location": str(tmp_path / "ck"), "last_committed_batch": 0, "in_flight": None,
                                      "positions": {"orders": {"0": 5, "1": 7}}}]
    text = cutover("plan", "check", "--plan", str(plan), "--offline")
    assert "reader orders-query (spark-checkpoint): batch 0 committed, next records at orders" in text.out
    # a batch in flight (the query runs): shown, not a finding; the switch stops the query first
    (tmp_path / "ck" / "offsets" / "1").write_text("v1\n" + META + '\n{"orders":{"0":6,"1":7}}\n{"logOffset":3}')
    running = cutover("plan", "check", "--plan", str(plan), "--offline")
    assert running.code == 0 and "batch 1 in flight" in running.out and "batch 0 committed" in running.out
    # a stateful checkpoint, or a topic the plan does not select: findings, exit 3
    (tmp_path / "ck" / "state" / "0").mkdir(parents=True)
    plan.write_text(plan.read_text().replace("include: ['orders']", "include: ['payments']"))
    refused = cutover("plan", "check", "--plan", str(plan), "--offline", "-o", "json")
    assert refused.code == 3
    assert [f["check"] for f in refused.json()["findings"]] == ["readers"]
    assert "holds state (state/)" in refused.json()["findings"][0]["problem"]
    (tmp_path / "ck" / "state" / "0").rmdir()
    refused = cutover("plan", "check", "--plan", str(plan), "--offline", "-o", "json")
    assert refused.code == 3 and "reads orders, which the plan's topic selection leaves out" in \
        refused.json()["findings"][0]["problem"]


def test_a_batch_cutover_wrote_is_not_moved_twice_in_the_same_direction(tmp_path: Path) -> None:
    import json

    from cutover.plan import load_plan
    from cutover.readers import translate

    _checkpoint(tmp_path / "ck", {0: ['{"orders":{"0":5}}'], 1: ['{"orders":{"0":9}}']}, commits=[0, 1])
    (tmp_path / "plan.yaml").write_text("name: p\nclusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n"
                                        "  new: {bootstrap.servers: '127.0.0.1:2'}\n"
                                        "readers:\n  - {name: q, kind: spark-checkpoint, checkpoint: ck}\n")
    plan = load_plan(tmp_path / "plan.yaml")
    journal = tmp_path / ".cutover" / "p" / "readers.jsonl"
    journal.parent.mkdir(parents=True)
    positions = [{"topic": "orders", "partition": 0, "source_offset": 5, "target_offset": 9}]
    journal.write_text(json.dumps({"location": str(tmp_path / "ck"), "batch": 1, "direction": "forward",
                                   "phase": "done", "positions": positions}) + "\n{torn")
    # no cluster is asked (none listens on those ports): the record says batch 1 is already on the new cluster
    got = translate.move(plan, plan.spec.readers[0], "forward", "execute", timeout=1)
    assert got["already_moved"] and got["written"] == [] and got["positions"] == positions
    assert sorted(f.name for f in (tmp_path / "ck" / "offsets").iterdir()) == ["0", "1"]


def test_a_stateful_checkpoint_still_gives_its_positions_for_a_new_checkpoint(tmp_path: Path) -> None:
    ck = _checkpoint(tmp_path, {0: ['{"t":{"0":3}}']}, commits=[0])
    (tmp_path / "state" / "0").mkdir(parents=True)
    with pytest.raises(sc.CheckpointError, match="holds state"):
        ck.last_committed()
    assert sc.starting_offsets(sc.moved(ck.last_committed(stateful_ok=True), lambda t, p, o: o + 1)) == \
        {"0": '{"t":{"0":4}}'}


def test_where_a_checkpoint_is_and_what_offline_reads(tmp_path: Path) -> None:
    from cutover.plan import load_plan
    from cutover.readers import store, translate

    _checkpoint(tmp_path / "ck", {0: ['{"orders":{"0":5}}']}, commits=[0])
    (tmp_path / "plan.yaml").write_text(
        "name: p\nclusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n  new: {bootstrap.servers: '127.0.0.1:2'}\n"
        "topics: {include: [orders]}\n"
        "readers:\n  - {name: q, kind: spark-checkpoint, checkpoint: 'file://" + str(tmp_path / "ck") + "'}\n"
        "  - {name: s3, kind: spark-checkpoint, checkpoint: 's3a://lake/ck'}\n"
        "  - {name: c, kind: connect, old_url: 'http://127.0.0.1:1', new_url: 'http://127.0.0.1:2', "
        "connectors: [files]}\n")
    plan = load_plan(tmp_path / "plan.yaml")
    assert store.local(plan, "file:///var/x") == Path("/var/x") and store.local(plan, "ck") == tmp_path / "ck"
    assert [store.remote(r.checkpoint) for r in plan.spec.readers] == [False, True, False]
    assert isinstance(store.folder(plan, "s3a://lake/ck"), store.ObjectStore)
    # --offline: the local checkpoint is read; nothing on a server is asked (no storage or worker listens here)
    found, problems = translate.positions(plan, reach=False)
    assert [(e["reader"], e.get("last_committed_batch"), e.get("not_read")) for e in found] == [
        ("q", 0, None), ("s3", None, "on a server: --offline connects to nothing"),
        ("c", None, "on a server: --offline connects to nothing")]
    assert problems == []
    with pytest.raises(UsageError, match="no bucket in this location"):
        store.folder(plan, "s3a:///ck")
    # storage out of reach (nothing listens on the endpoint): a named problem, not a stack trace
    (tmp_path / "plan.yaml").write_text(
        "name: p\nclusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n  new: {bootstrap.servers: '127.0.0.1:2'}\n"
        "catalog: {name: c, type: rest, uri: 'http://127.0.0.1:1', properties: {s3.endpoint: 'http://127.0.0.1:1', "
        "s3.region: us-east-1, s3.access-key-id: k, s3.secret-access-key: s}}\n"
        "readers:\n  - {name: s3, kind: spark-checkpoint, checkpoint: 's3a://lake/ck'}\n")
    found, problems = translate.positions(load_plan(tmp_path / "plan.yaml"))
    assert found[0]["location"] == "s3a://lake/ck" and len(problems) == 1
    assert problems[0][1].startswith("reader s3: storage http://127.0.0.1:1 bucket lake (listing s3a://lake/ck) "
                                     "cannot be used: "), problems
    assert problems[0][2] == "check catalog.properties s3.endpoint and that the storage is up and reachable from " \
                             "this host"
