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

from cutover.errors import CutoverError, Refused
from cutover.kafka.clients import ClusterRef
from cutover.kafka.inspect import cluster_id
from cutover.kafka.offsets import commit_group, group_info, log_offsets
from cutover.lake import eras, stamps, tables
from cutover.mirror import groups
from cutover.mirror import state as st
from cutover.mirror.offsetmap import NotYetMirrored
from cutover.output import progress
from cutover.plan import ClusterSide, Plan, TablePair
from cutover.plan.model import OffsetColumns

BRANCH = "cutover_handover"


def _partitions(plan: Plan, side: ClusterSide, topic: str, timeout: float) -> list[int]:
    from cutover.kafka.inspect import partition_counts

    return list(range(partition_counts(ClusterRef.of(plan, side), timeout).get(topic, 0)))


def writer_positions(spark: Any, plan: Plan, pair: TablePair, timeout: float) -> tuple[dict[int, int], str]:
    """Where the old writer stands on the old cluster: partition -> next offset, and where that came from."""
    unsaid = pair.handover_problem()  # promote's tables-handover check refuses it first; a plan edited since not
    if unsaid:
        raise Refused(unsaid, fix="say it in the plan's table pair, then run promote again (it resumes)")
    parts = _partitions(plan, "old", pair.topic, timeout)
    if pair.writer_offsets == "group" and pair.writer_group:
        committed = group_info(ClusterRef.of(plan, "old"), pair.writer_group, timeout).offsets
        found = {p: o for (t, p), o in committed.items() if t == pair.topic}
        source = f"consumer group {pair.writer_group}"
    elif pair.old_offset_columns is not None:
        cols = pair.old_offset_columns
        found = _from_columns(spark, plan, pair, cols)
        source = f"columns {cols.partition}/{cols.offset} of {pair.old}"
    else:
        raise Refused(f"table {pair.old}: writer_offsets {pair.writer_offsets} is not read by the hand-over",
                      fix="use writer_offsets: columns or group (iceberg-connect pairs are handed over by the sink)")
    missing = [p for p in parts if p not in found]
    starts = log_offsets(ClusterRef.of(plan, "old"), [(pair.topic, p) for p in missing], "start", timeout)
    return {p: found.get(p, starts.get((pair.topic, p), 0)) for p in parts}, source


def _from_columns(spark: Any, plan: Plan, pair: TablePair, cols: OffsetColumns) -> dict[int, int]:
    """The old writer's next offset per partition, from the highest offset in its table's rows.

    After a round trip the table also holds cutover's rows with new-cluster offsets
    (`cutover.lake.eras`), and those numbers may lie above where the old writer stands
    now. Only the old writer's latest era counts: from the hand-back's position, rows no
    new-cluster era spans, and the rows a new-cluster era's numbers also span when the
    files they are in were appended after the hand-back. When that cannot be told (the
    table was compacted or expired since) and such a row would move the position, the
    position is refused rather than guessed.
    """
    from pyspark.sql import functions as F

    df = spark.table(tables.qualified(plan, pair.old))
    if cols.topic:
        df = df.where(F.col(cols.topic) == pair.topic)
    p, o = F.col(cols.partition).cast("int").alias("p"), F.col(cols.offset).cast("bigint").alias("o")
    snaps, current, tbl = tables.snapshots(plan, pair.old)
    notes = eras.notes(snaps, current, tables.properties_of(tbl))
    if not notes:
        rows = df.groupBy(p).agg(F.max(o).alias("o")).collect()
        return {int(r["p"]): int(r["o"]) + 1 for r in rows if r["p"] is not None}
    back = notes[-1]
    if back["direction"] != "reverse":
        raise CutoverError(f"table {pair.old}: its last hand-over (snapshot {back['snapshot']}) gave it to the new "
                           "cluster, yet its stamps say the old writer has it", fix="run cutover status; "
                           "if a rollback was interrupted, run cutover rollback --execute to finish it")
    lines = eras.spans(notes)
    spans = [(q, s.first, s.end if s.end is not None else 1 << 62) for q, line in lines.items() for s in line
             if s.cluster == "new"]
    starts = spark.createDataFrame([(q, line[-1].first) for q, line in lines.items()], "p int, start bigint")
    news = spark.createDataFrame(spans, "p int, lo bigint, hi bigint")
    rows = df.select(p, o, F.col("_file").alias("f")).join(starts, "p", "left") \
        .where(F.col("start").isNull() | (F.col("o") >= F.col("start")))
    inside = (rows["p"] == news["p"]) & (rows["o"] >= news["lo"]) & (rows["o"] < news["hi"])
    clear = {int(r["p"]): int(r["o"]) + 1 for r in rows.join(news, inside, "left_anti").groupBy("p")
             .agg(F.max("o").alias("o")).collect() if r["p"] is not None}
    shared = rows.join(news, inside, "left_semi").groupBy("p", "f").agg(F.min("o").alias("lo"), F.max("o").alias("o"))
    found = {q: max(line[-1].first, clear.get(q, 0)) for q, line in lines.items()}
    found.update({q: o for q, o in clear.items() if q not in lines})
    ambiguous = [(int(r["p"]), str(r["f"]), int(r["lo"]), int(r["o"])) for r in shared.collect()]
    appended = tables.added_since(plan, pair.old, int(back["snapshot"])) if ambiguous else set()
    unsure = []
    for q, f, lo, hi in ambiguous:
        if appended is None:
            if hi + 1 > found[q]:
                unsure.append(f"partition {q} offsets {lo}..{hi}")
        elif f in appended:
            found[q] = max(found[q], hi + 1)
    if unsure:
        raise CutoverError(
            f"table {pair.old}: where the old writer stands cannot be told from its rows: "
            + ", ".join(sorted(set(unsure))) + " may be the old writer's since the rollback, or cutover's rows with "
            "new-cluster offsets from before it, and the table was compacted or its snapshots expired since the "
            f"hand-back (snapshot {back['snapshot']}), so the files no longer say which",
            fix="give the old writer's position from its consumer group instead (tables[].writer_offsets: group, "
                "writer_group: ...), or let the old writer write past those offsets, then promote again")
    return found


def translate(tr: groups.Translator, topic: str, positions: dict[int, int], what: str) -> dict[int, int]:
    out = {}
    for p, o in sorted(positions.items()):
        try:
            out[p] = tr.translate((topic, p), o)
        except NotYetMirrored as exc:
            raise CutoverError(f"{what}: {topic}/{p} position {o} cannot be translated exactly: {exc}",
                               fix="let the mirror drain (re-run to continue), then hand over again") from None
    return out


def stamp(spark: Any, plan: Plan, pair: TablePair, cluster: str, positions: dict[int, int], note: dict[str, Any],
          dead_letters: int, extra: dict[str, str] | None = None) -> int:
    """A snapshot adding no rows, stamped with `positions` of `cluster` and the hand-over's note (and
    `extra` summary entries): the durable hand-over point."""
    props = stamps.stamp(cluster, pair.topic, {}, positions, f"{plan.name}-{note['run']}", dead_letters)
    props.update(extra or {})
    props[eras.K_HANDOVER] = json.dumps(note, sort_keys=True, separators=(",", ":"))
    return tables.stamp_only(spark, plan, pair.old, props, BRANCH, lambda tbl, snapshot, at: {
        eras.K_HANDOVERS: eras.appended(tables.properties_of(tbl), note, snapshot, at)})


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
        new_pos = translate(tr, pair.topic, old_pos, f"hand-over of {pair.old}")
        snap = stamp(spark, plan, pair, new_id, new_pos, {"direction": "forward", "run": run, "from": source,
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
        old_pos = translate(tr, pair.topic, held.positions, f"hand-back of {pair.old}")
        spark = spark_mod.session(plan, f"cutover-rollback-{plan.name}")
        detail["snapshot"] = stamp(spark, plan, pair, old_id, old_pos, {
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
