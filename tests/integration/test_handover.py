"""The old writer's position at a promote after a rollback, from a canonical table that holds rows
of both clusters (issue 16 item 2): offsets of the old writer's latest era that cutover's
new-cluster era also spans are told apart by the files they are in, and never guessed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cutover.errors import CutoverError
from cutover.lake import eras
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.integration.kafka_util import create_topic
from tests.integration.test_switch import _plan


def _append(tbl: object, rows: list[tuple[int, int]]) -> int:
    import pyarrow as pa

    data = pa.table({"kafka_partition": pa.array([p for p, _o in rows], pa.int32()),
                     "kafka_offset": pa.array([o for _p, o in rows], pa.int64()),
                     "seq": pa.array([p * 1000 + o for p, o in rows], pa.int64())})
    tbl.append(data)  # type: ignore[attr-defined]
    return tbl.current_snapshot().snapshot_id  # type: ignore[attr-defined,no-any-return]


def _note(tbl: object, direction: str, old: dict[int, int], new: dict[int, int], snapshot: int) -> None:
    props = dict(tbl.properties)  # type: ignore[attr-defined]
    note = {"direction": direction, "run": "test", "old": old, "new": new}
    with tbl.transaction() as tx:  # type: ignore[attr-defined]
        tx.set_properties({eras.K_HANDOVERS: eras.appended(props, note, snapshot, 0)})


@pytest.mark.lake(only="rest")
def test_after_a_round_trip_the_old_writers_position_counts_only_its_own_rows(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, LongType, NestedField

    from cutover.lake import catalog as catalog_mod
    from cutover.lake import spark as spark_mod
    from cutover.switch import handover

    main = _plan(sandbox, ns, tmp_path, {})
    create_topic(plan.cluster("old"), f"{ns}.orders", 2)
    assert main.spec.catalog is not None
    cat = catalog_mod.load(main.spec.catalog)
    cat.create_namespace_if_not_exists(ns)
    tbl = cat.create_table(f"{ns}.legacy", Schema(NestedField(1, "kafka_partition", IntegerType()),
                                                   NestedField(2, "kafka_offset", LongType()),
                                                   NestedField(3, "seq", LongType())))
    first = _append(tbl, [(p, o) for p in (0, 1) for o in range(10)])  # the old writer: old offsets 0..9
    _note(tbl, "forward", {0: 10, 1: 10}, {0: 12, 1: 12}, first)  # promote: new offsets from 12
    back = _append(tbl, [(p, o) for p in (0, 1) for o in range(12, 20)])  # cutover: new offsets 12..19
    tbl = cat.load_table(f"{ns}.legacy")
    _note(tbl, "reverse", {0: 15, 1: 15}, {0: 20, 1: 20}, back)  # rollback: old offsets from 15
    tbl = cat.load_table(f"{ns}.legacy")
    # The old writer again: partition 0 only up to old 17, inside the numbers new 12..19 took;
    # partition 1 beyond them.
    _append(tbl, [(0, o) for o in (15, 16, 17)] + [(1, o) for o in range(15, 25)])

    spark = spark_mod.session(main, "test-handover")
    positions, source = handover.writer_positions(spark, main, main.spec.tables[0], 10)
    assert positions == {0: 18, 1: 25}, "not 20 for partition 0: rows 18 and 19 there are new-cluster offsets"
    assert source == f"columns kafka_partition/kafka_offset of {ns}.legacy"

    # Compacted since the rollback: which file a row came from no longer tells its cluster. Partition
    # 0's latest rows are ambiguous, so the position is refused, naming what to do instead.
    spark.sql(f"CALL `{main.spec.catalog.name}`.system.rewrite_data_files(table => '{ns}.legacy', "
              "options => map('rewrite-all', 'true'))").collect()
    with pytest.raises(CutoverError) as refused:
        handover.writer_positions(spark, main, main.spec.tables[0], 10)
    text = f"{refused.value} {refused.value.fix}"  # type: ignore[attr-defined]
    assert f"{ns}.legacy" in text and "partition 0" in text and "writer_offsets: group" in text, text
    assert json.loads(cat.load_table(f"{ns}.legacy").properties[eras.K_HANDOVERS])[-1]["direction"] == "reverse"
