"""Handing a canonical table between writers at exact, translated Kafka positions.

Promote: the old writer has stopped; where it stood (per partition, the next source
offset) comes from the old table's offset columns or the writer's consumer group, as
the plan says. Those positions go through the mirror's exact map, and a snapshot that
adds no rows stamps them (new cluster id, translated positions) on the table: the
durable hand-over point. `cutover shadow --canonical` then continues from the table's
own stamps, so the table goes on without a gap or a duplicate, and a re-run after a
crash sees the stamp and skips straight to catching up.

Rollback: the reverse. The table's new-cluster positions go back through the reverse
mirror's map (and the forward map's inverse below the reverse mirror's start), and are
stamped with the old cluster id; the old writer restarts there (CUTOVER_OFFSETS, and
its consumer group when the plan names one).
"""

from __future__ import annotations

import json
from typing import Any

from cutover.errors import CutoverError
from cutover.kafka.clients import ClusterRef
from cutover.kafka.inspect import cluster_id
from cutover.kafka.offsets import commit_group, group_info, log_offsets
from cutover.lake import stamps, tables
from cutover.mirror import groups
from cutover.mirror import state as st
from cutover.mirror.offsetmap import NotYetMirrored
from cutover.output import progress
from cutover.plan import ClusterSide, Plan, TablePair

HANDOVER = "cutover.handover"
BRANCH = "cutover_handover"


def _partitions(plan: Plan, side: ClusterSide, topic: str, timeout: float) -> list[int]:
    from cutover.kafka.inspect import partition_counts

    return list(range(partition_counts(ClusterRef.of(plan, side), timeout).get(topic, 0)))


def writer_positions(spark: Any, plan: Plan, pair: TablePair, timeout: float) -> tuple[dict[int, int], str]:
    """Where the old writer stands on the old cluster: partition -> next offset, and where that came from."""
    parts = _partitions(plan, "old", pair.topic, timeout)
    if pair.writer_offsets == "group":
        assert pair.writer_group
        committed = group_info(ClusterRef.of(plan, "old"), pair.writer_group, timeout).offsets
        found = {p: o for (t, p), o in committed.items() if t == pair.topic}
        source = f"consumer group {pair.writer_group}"
    else:
        from pyspark.sql import functions as F

        cols = pair.old_offset_columns
        assert cols is not None
        df = spark.table(tables.qualified(plan, pair.old))
        if cols.topic:
            df = df.where(F.col(cols.topic) == pair.topic)
        rows = df.groupBy(F.col(cols.partition).alias("p")).agg(F.max(cols.offset).alias("o")).collect()
        found = {int(r["p"]): int(r["o"]) + 1 for r in rows if r["p"] is not None}
        source = f"columns {cols.partition}/{cols.offset} of {pair.old}"
    missing = [p for p in parts if p not in found]
    starts = log_offsets(ClusterRef.of(plan, "old"), [(pair.topic, p) for p in missing], "start", timeout)
    return {p: found.get(p, starts.get((pair.topic, p), 0)) for p in parts}, source


def _translate(tr: groups.Translator, topic: str, positions: dict[int, int], what: str) -> dict[int, int]:
    out = {}
    for p, o in sorted(positions.items()):
        try:
            out[p] = tr.translate((topic, p), o)
        except NotYetMirrored as exc:
            raise CutoverError(f"{what}: {topic}/{p} position {o} cannot be translated exactly: {exc}",
                               fix="let the mirror drain (re-run to continue), then hand over again") from None
    return out


def _stamp(spark: Any, plan: Plan, pair: TablePair, cluster: str, positions: dict[int, int], note: dict[str, Any],
           dead_letters: int) -> int:
    props = stamps.stamp(cluster, pair.topic, {}, positions, f"{plan.name}-{note['run']}", dead_letters)
    props[HANDOVER] = json.dumps(note, sort_keys=True, separators=(",", ":"))
    return tables.stamp_only(spark, plan, pair.old, props, BRANCH)


def hand_over(plan: Plan, pair: TablePair, run: str, timeout: float) -> dict[str, Any]:
    """Promote: stamp the translated positions on the canonical table (the caller then has its writer
    write it from the new cluster, from those stamps)."""
    from cutover.lake import spark as spark_mod

    new_id = cluster_id(ClusterRef.of(plan, "new"), timeout)
    held = tables.table_offsets(plan, pair.old)
    spark = spark_mod.session(plan, f"cutover-promote-{plan.name}")
    detail: dict[str, Any] = {"table": pair.old, "topic": pair.topic}
    if held.cluster_id == new_id:
        detail["stamped_before"] = True
        progress(f"  {pair.old}: already handed over (stamped with the new cluster); catching up")
    else:
        old_pos, source = writer_positions(spark, plan, pair, timeout)
        tr = groups.translator(st.route(plan, "forward"), plan, timeout)
        new_pos = _translate(tr, pair.topic, old_pos, f"hand-over of {pair.old}")
        snap = _stamp(spark, plan, pair, new_id, new_pos, {"direction": "forward", "run": run, "from": source,
                                                            "old": old_pos, "new": new_pos}, held.dead_letter_rows)
        progress(f"  {pair.old}: handed over at " + ", ".join(f"{p}:{old_pos[p]}->{o}" for p, o in new_pos.items())
                 + f" (old writer's positions from {source})")
        detail.update({"from": source, "old_positions": old_pos, "new_positions": new_pos, "snapshot": snap})
    return detail


def hand_back(plan: Plan, pair: TablePair, run: str, timeout: float) -> dict[str, Any]:
    """Rollback: stamp the canonical table's positions, translated back, with the old cluster id."""
    from cutover.lake import spark as spark_mod

    old_id, new_id = cluster_id(ClusterRef.of(plan, "old"), timeout), cluster_id(ClusterRef.of(plan, "new"), timeout)
    held = tables.table_offsets(plan, pair.old)
    detail: dict[str, Any] = {"table": pair.old, "topic": pair.topic}
    if held.cluster_id == new_id:
        tr = groups.translator(st.route(plan, "reverse"), plan, timeout)
        old_pos = _translate(tr, pair.topic, held.positions, f"hand-back of {pair.old}")
        spark = spark_mod.session(plan, f"cutover-rollback-{plan.name}")
        detail["snapshot"] = _stamp(spark, plan, pair, old_id, old_pos, {
            "direction": "reverse", "run": run, "new": held.positions, "old": old_pos}, held.dead_letter_rows)
        detail["new_positions"] = held.positions
        progress(f"  {pair.old}: handed back at " + ", ".join(
            f"{p}:{held.positions[p]}->{o}" for p, o in old_pos.items()))
    elif held.cluster_id == old_id:
        old_pos = held.positions
        detail["stamped_before"] = True
    else:
        raise CutoverError(f"table {pair.old} carries no cutover offsets of either cluster; nothing to hand back",
                           fix="check the table; promote stamps it when it hands it over")
    if pair.writer_offsets == "group" and pair.writer_group:
        current = group_info(ClusterRef.of(plan, "old"), pair.writer_group, timeout)
        if current.active:
            raise CutoverError(f"the old writer's group {pair.writer_group} has {current.members} members on the old "
                               "cluster; its offsets cannot be set", fix="stop the old writer, then re-run")
        commit_group(ClusterRef.of(plan, "old"), pair.writer_group,
                     {(pair.topic, p): o for p, o in old_pos.items()}, timeout)
        detail["committed_group"] = pair.writer_group
    detail["old_positions"] = old_pos
    return detail


def positions_env(detail: dict[str, Any], key: str) -> str:
    """CUTOVER_OFFSETS for the writer hooks: {"topic": {"partition": offset}}."""
    return json.dumps({detail["topic"]: {str(p): o for p, o in sorted(detail.get(key, {}).items())}})
