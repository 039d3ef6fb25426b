"""Hand-over of a table that Apache Iceberg's Kafka Connect sink writes (tables[].writer_offsets:
iceberg-connect): the same connector goes on writing it from the other cluster, at the next record.

Where the sink keeps its progress (iceberg-kafka-connect 1.11, read from its source):

- Each worker writes data files, then, in one Kafka transaction, sends a `DataWritten` event (the
  files) to the control topic and commits the connector's consumer group (`connect-<name>`, or
  `iceberg.connect.group-id`) at the records those files hold. So the group says what was *sent
  to the control topic*, not what is in the table.
- The coordinator reads the control topic and commits the files to the table; each snapshot's
  summary holds `kafka.connect.offsets.<control topic>.<group>`: the coordinator's positions in the
  **control topic** (partition -> next offset). On start it drops every `DataWritten` below them.
  They are not offsets of the data topics.

So the group is authoritative for the data topics once no `DataWritten` of the group is left on
the control topic beyond the table's stored positions: then every record the group counts is in
the table, and no file is in flight. That is what the hand-over checks (and waits for, while a
paused connector's coordinator still commits), with the connector paused or stopped.

Why the sink silently stops committing after a plain cluster move: on the new cluster's empty
control topic every event's offset lies below the positions stored for the old one, and the
coordinator finds "nothing to commit". The hand-over therefore stamps the table with the new
control topic's end offsets under the same key, commits the connector's group on the new cluster
at the translated positions, and the coordinator's own group (`<group>-coord`) at the control
topic's end. Rollback does the same the other way.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from cutover.errors import Refused
from cutover.kafka.clients import ClusterRef, admin
from cutover.kafka.inspect import cluster_id, partition_counts
from cutover.kafka.offsets import commit_group, committed_records, group_info, log_offsets, wait_all
from cutover.lake import stamps, tables
from cutover.mirror.state import Direction
from cutover.output import progress
from cutover.plan import ClusterSide, Plan, TablePair

SUMMARY_PREFIX = "kafka.connect.offsets."
#: Iceberg's AvroEncoderUtil: these two bytes, the writer's schema (Java writeUTF), the datum.
MAGIC = b"\xc2\x01"
#: The sink releases whose control events and summary format this reads.
KNOWN_VERSIONS = "Apache Iceberg 1.11"
DATA_WRITTEN = "DataWritten"


def summary_key(control_topic: str, group: str) -> str:
    return f"{SUMMARY_PREFIX}{control_topic}.{group}"


@dataclass(frozen=True)
class Stored:
    """The sink coordinator's control-topic positions as the table holds them."""

    positions: dict[int, int]
    snapshot: int


def stored_positions(snaps: list[stamps.Snapshot], current: int | None, table: str, control_topic: str,
                     group: str) -> Stored:
    """The positions in the newest snapshot of the current lineage that has the sink's key, as the
    coordinator finds them (it walks back from the current snapshot)."""
    key = summary_key(control_topic, group)
    by_id = {s.snapshot_id: s for s in snaps}
    others: set[str] = set()
    sid = current
    while sid is not None and sid in by_id:
        snap = by_id[sid]
        if key in snap.summary:
            return Stored(_parse(table, key, snap.summary[key]), snap.snapshot_id)
        others |= {k for k in snap.summary if k.startswith(SUMMARY_PREFIX)}
        sid = snap.parent_id
    if others:
        raise Refused(f"table {table}: its snapshots hold Iceberg sink offsets for {', '.join(sorted(others))}, "
                      f"not for {key} (control topic {control_topic}, group {group})",
                      fix="set tables[].control_topic to the sink's iceberg.control.topic and connector (or "
                      "writer_group) to the connector whose group wrote the table")
    raise Refused(f"table {table}: no snapshot of its current lineage holds the Iceberg sink's offsets "
                  f"({key}); the Kafka Connect sink has not committed to it, or another writer wrote it",
                  fix="check that Iceberg's Kafka Connect sink writes this table (tables[].writer_offsets: "
                  "iceberg-connect), or use writer_offsets: columns or group; if a compaction and snapshot expiry "
                  "removed the sink's last commit, resume the connector until it commits again, then pause it "
                  "and re-run")


def _parse(table: str, key: str, value: str) -> dict[int, int]:
    try:
        raw = json.loads(value)
        if not isinstance(raw, dict):
            raise ValueError(value)
        return {int(p): int(o) for p, o in raw.items()}
    except (ValueError, TypeError):
        raise Refused(f"table {table}: the sink's summary {key} = {value[:200]!r} is not the format cutover "
                      f"reads (a JSON object of control partition -> offset, as {KNOWN_VERSIONS} writes)",
                      fix="check the sink's version; cutover knows the format of " + KNOWN_VERSIONS) from None


def event(value: bytes, where: str) -> tuple[str, str]:
    """The payload type (the writer's record name: DataWritten, DataComplete, StartCommit, ...) and
    group id of one control-topic event."""
    if not value.startswith(MAGIC):
        raise Refused(f"{where}: not an Iceberg control event (it does not begin with Iceberg's Avro header)",
                      fix=f"check tables[].control_topic; cutover reads the events of {KNOWN_VERSIONS}")
    try:
        size = int.from_bytes(value[2:4], "big")
        schema = json.loads(value[4:4 + size].decode())
        payload = next(f["type"] for f in schema["fields"] if f["name"] == "payload")
        names = [f["name"] for f in schema["fields"]]
        if names[:4] != ["id", "type", "timestamp", "group_id"]:
            raise ValueError(names)
        pos = 4 + size + 16  # the event id: a 16-byte fixed
        for _ in range(2):  # type (int), timestamp (long): zig-zag varints
            while value[pos] & 0x80:
                pos += 1
            pos += 1
        length, shift = 0, 0
        while True:
            byte = value[pos]
            length |= (byte & 0x7F) << shift
            pos, shift = pos + 1, shift + 7
            if not byte & 0x80:
                break
        if length & 1 or pos + (length >> 1) > len(value):  # a negative or cut-off length: not an event
            raise ValueError(length)
        group = value[pos:pos + (length >> 1)].decode()
        return str(payload["name"] if isinstance(payload, dict) else payload), group
    except (ValueError, KeyError, IndexError, StopIteration, TypeError, UnicodeDecodeError):
        raise Refused(f"{where}: an Iceberg control event cutover cannot read (not the {KNOWN_VERSIONS} layout)",
                      fix="check the sink's version; cutover knows the events of " + KNOWN_VERSIONS) from None


def in_flight(ref: ClusterRef, control_topic: str, stored: dict[int, int], group: str,
              timeout: float) -> list[tuple[int, int]]:
    """(partition, offset) of the group's DataWritten events beyond the stored positions: files the
    workers sent (and counted in the group) that the coordinator has not committed to the table."""
    parts = partition_counts(ref, timeout).get(control_topic, 0)
    if not parts:
        raise Refused(f"the {ref.name} cluster has no topic {control_topic}, the sink's control topic",
                      fix="set tables[].control_topic to the sink's iceberg.control.topic")
    start = log_offsets(ref, [(control_topic, p) for p in range(parts)], "start", timeout)
    end = log_offsets(ref, [(control_topic, p) for p in range(parts)], "end", timeout)
    found = []
    for msg in committed_records(ref, [(control_topic, p, max(stored.get(p, 0), start[(control_topic, p)]))
                                       for p in range(parts)], f"reading the control topic {control_topic}",
                                 timeout, until=end):
        where = f"control topic {control_topic} partition {msg.partition()} offset {msg.offset()}"
        kind, of = event(msg.value() or b"", where)
        if kind == DATA_WRITTEN and of == group:
            found.append((int(msg.partition() or 0), int(msg.offset() or 0)))
    return found


def _not_running(plan: Plan, pair: TablePair, side: ClusterSide, timeout: float) -> dict[str, Any]:
    """The connector must be paused or stopped: by its Connect cluster's word when the plan names it,
    else by its consumer group having no members."""
    if pair.connect_url and pair.connector:
        from cutover.kafka.connect import Connect

        state = Connect(pair.connect_url).state(pair.connector)
        if state is not None and state.state not in ("PAUSED", "STOPPED"):
            raise Refused(f"table {pair.old}: the sink connector {pair.connector} is {state.state} at "
                          f"{pair.connect_url} (tasks {state.tasks}); it must not write during the hand-over",
                          fix=f"pause it (curl -X PUT {pair.connect_url}/connectors/{pair.connector}/pause) or "
                          "stop it, in the plan's stop_old_writer hook or by hand, then re-run")
        return {"connector_state": state.state if state else "absent"}
    info = group_info(ClusterRef.of(plan, side), pair.sink_group, timeout)
    if info.active:
        raise Refused(f"table {pair.old}: the sink's consumer group {pair.sink_group} has {info.members} members "
                      f"on the {side} cluster: the connector is running",
                      fix="stop the connector (PUT /connectors/<name>/stop) or delete it, or give "
                      "tables[].connect_url so cutover can see it is paused; then re-run")
    return {"connector_state": "no members in its group"}


#: When this switch run first saw each sink connector paused (time.monotonic()), by (Connect URL, connector).
PausedSince = dict[tuple[str, str], float]


def position(plan: Plan, pair: TablePair, side: ClusterSide, timeout: float,
             paused: PausedSince | None = None) -> tuple[dict[int, int], dict[str, Any]]:
    """Where the sink stands on `side` (data partition -> next offset), once nothing is in flight.
    `paused`: the run's record of when it saw each connector paused (a fresh one when not given)."""
    ref = ClusterRef.of(plan, side)
    seen = _not_running(plan, pair, side, timeout)
    deadline = time.monotonic() + timeout
    if seen.get("connector_state") == "PAUSED":
        seen["waited_for_a_commit_cycle"] = _one_commit_cycle(plan, pair, deadline, {} if paused is None else paused)
    while True:
        snaps, current, _tbl = tables.snapshots(plan, pair.old)
        stored = stored_positions(snaps, current, pair.old, pair.control_topic, pair.sink_group)
        flying = in_flight(ref, pair.control_topic, stored.positions, pair.sink_group, timeout)
        if not flying:
            break
        if time.monotonic() > deadline:
            raise Refused(f"table {pair.old}: {len(flying)} DataWritten event(s) of {pair.sink_group} on "
                          f"{pair.control_topic} (first at partition {flying[0][0]} offset {flying[0][1]}) are "
                          f"not committed to the table (it stores {stored.positions}); their records count as "
                          "done in the connector's group, so handing over now would lose them",
                          fix="resume the connector, and pause it (not stop) once its coordinator has committed "
                          "(iceberg.control.commit.interval-ms); then re-run")
        progress(f"  {pair.old}: waiting for the sink's coordinator to commit {len(flying)} DataWritten event(s)")
        time.sleep(1)
    parts = partition_counts(ref, timeout).get(pair.topic, 0)
    committed = group_info(ref, pair.sink_group, timeout).offsets
    found = {p: o for (t, p), o in committed.items() if t == pair.topic}
    missing = [(pair.topic, p) for p in range(parts) if p not in found]
    starts = log_offsets(ref, missing, "start", timeout)
    return ({p: found.get(p, starts.get((pair.topic, p), 0)) for p in range(parts)},
            {**seen, "control_positions": stored.positions, "stored_in_snapshot": stored.snapshot})


#: The Iceberg sink's commit interval when its config does not set one (iceberg.control.commit.interval-ms).
DEFAULT_COMMIT_INTERVAL_MS = 300_000


def _one_commit_cycle(plan: Plan, pair: TablePair, deadline: float, paused: PausedSince) -> float:
    """Wait one commit interval for a paused sink: its tasks stay up, and the coordinator's next cycle
    commits what they wrote before the pause, with the group's offsets, after a position read now
    (a CI run met it: the hand-over's commit then found another writer's; had the hand-over ended
    first, those records would have come twice). A stopped sink's tasks are gone: no wait.

    The interval counts from when this run first saw the connector paused. A wait begun for one table
    notes every sink of the plan on the same Connect cluster that is paused by then (the stop_old_writer
    hook pauses them together), so the next table's hand-over waits only for what is left of its own
    interval: with N tables, one interval, not N. Returns the seconds waited."""
    from cutover.kafka.connect import Connect

    assert pair.connect_url and pair.connector
    connect = Connect(pair.connect_url)
    config = connect.config(pair.connector) or {}
    interval = int(config.get("iceberg.control.commit.interval-ms", DEFAULT_COMMIT_INTERVAL_MS)) / 1000
    now = time.monotonic()
    paused.setdefault((pair.connect_url, pair.connector), now)  # _not_running saw it paused
    for other in plan.spec.tables:  # the plan's other sinks on this Connect cluster, paused by now as it says
        key = (pair.connect_url, other.connector or "")
        if other.connect_url == pair.connect_url and other.connector and key not in paused:
            state = connect.state(other.connector)
            if state is not None and state.state == "PAUSED":
                paused[key] = now
    left = paused[(pair.connect_url, pair.connector)] + interval + 1 - now
    if left <= 0:
        progress(f"  {pair.old}: the sink was seen paused {interval + 1 - left:.0f}s ago, more than one commit "
                 f"interval ({interval:.0f}s): its last commit is in")
        return 0.0
    if now + left > deadline:
        raise Refused(f"table {pair.old}: the sink connector {pair.connector} is paused, and a paused sink may "
                      f"still commit for one commit interval ({interval:.0f}s), longer than this step may wait",
                      fix="stop the connector once its coordinator has committed, or give a --timeout above "
                      f"{interval:.0f}s (or lower iceberg.control.commit.interval-ms); then re-run")
    progress(f"  {pair.old}: the sink is paused: waiting {left:.0f}s, one commit interval ({interval:.0f}s) from "
             "when it was seen paused, for its last commit")
    time.sleep(left)
    return round(left, 1)


def ensure_control_topic(ref: ClusterRef, pair: TablePair, partitions: int, timeout: float) -> bool:
    """Create the sink's control topic on `ref`'s cluster if it has none (the sink does not create
    it); True if it was created."""
    if pair.control_topic in partition_counts(ref, timeout):
        return False
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    client = admin(ref)
    wait_all(ref, client, client.create_topics([NewTopic(pair.control_topic, partitions, -1)],
                                               request_timeout=timeout),
             f"creating the sink's control topic {pair.control_topic}", timeout,
             frozenset({KafkaError.TOPIC_ALREADY_EXISTS}))
    progress(f"  {pair.old}: created the sink's control topic {pair.control_topic} on the {ref.name} cluster")
    return True


def prepare(plan: Plan, pair: TablePair, side: ClusterSide, positions: dict[int, int], timeout: float,
            control_partitions: int) -> dict[str, Any]:
    """On the cluster the sink moves to: its control topic (created like the other side's if missing),
    its consumer group at `positions`, and its coordinator's group at the control topic's end."""
    ref = ClusterRef.of(plan, side)
    ensure_control_topic(ref, pair, control_partitions, timeout)
    parts = partition_counts(ref, timeout)[pair.control_topic]
    ends = log_offsets(ref, [(pair.control_topic, p) for p in range(parts)], "end", timeout)
    control = {p: ends[(pair.control_topic, p)] for p in range(parts)}
    info = group_info(ref, pair.sink_group, timeout)
    if info.active:
        raise Refused(f"table {pair.old}: the sink's consumer group {pair.sink_group} already has {info.members} "
                      f"members on the {side} cluster; its offsets cannot be set",
                      fix="stop the connector there (it starts after the hand-over, in start_new_writer), "
                      "then re-run")
    commit_group(ref, pair.sink_group, {(pair.topic, p): o for p, o in positions.items()}, timeout)
    coordinator = f"{pair.sink_group}-coord"
    if not group_info(ref, coordinator, timeout).active:
        commit_group(ref, coordinator, {(pair.control_topic, p): o for p, o in control.items()}, timeout)
    return {"control_topic_ends": control, "committed_group": pair.sink_group}


def control_stamp(pair: TablePair, control: dict[int, int]) -> dict[str, str]:
    """The summary entry that supersedes the other cluster's control positions for the coordinator."""
    return {summary_key(pair.control_topic, pair.sink_group):
            json.dumps({str(p): o for p, o in sorted(control.items())}, separators=(",", ":"))}


def move(plan: Plan, pair: TablePair, run: str, timeout: float, direction: Direction,
         paused: PausedSince | None = None) -> dict[str, Any]:
    """Promote (forward: old -> new) or rollback (reverse: new -> old) of a sink-written table. `paused`:
    the switch run's record of when it saw each connector paused (see _one_commit_cycle)."""
    from cutover.lake import spark as spark_mod
    from cutover.mirror import groups
    from cutover.mirror import state as st
    from cutover.switch.handover import stamp, translate

    src: ClusterSide = "old" if direction == "forward" else "new"
    dst: ClusterSide = "new" if direction == "forward" else "old"
    dst_id = cluster_id(ClusterRef.of(plan, dst), timeout)
    held = tables.table_offsets(plan, pair.old)
    detail: dict[str, Any] = {"table": pair.old, "topic": pair.topic, "writer": "iceberg-connect",
                              "connector": pair.connector, "group": pair.sink_group}
    if held.cluster_id == dst_id and held.positions:
        # a re-run: the stamp comes last, so the groups were committed before it; since then the
        # connector may have written from there, and its own progress stands
        detail.update({"stamped_before": True, f"{dst}_positions": held.positions})
        progress(f"  {pair.old}: already handed to the {dst} cluster (the table is stamped with it)")
        return detail
    here, seen = position(plan, pair, src, timeout, paused)
    tr = groups.translator(st.route(plan, direction), plan, timeout)
    moved = translate(tr, pair.topic, here, f"hand-over of {pair.old}")
    detail.update(seen)
    detail[f"{src}_positions"] = here
    parts = partition_counts(ClusterRef.of(plan, src), timeout).get(pair.control_topic, 1)
    prepared = prepare(plan, pair, dst, moved, timeout, parts)
    spark = spark_mod.session(plan, f"cutover-{'promote' if direction == 'forward' else 'rollback'}-{plan.name}")
    detail["snapshot"] = stamp(spark, plan, pair, dst_id, moved, {
        "direction": direction, "run": run, "from": f"sink group {pair.sink_group}", src: here, dst: moved},
        held.dead_letter_rows, control_stamp(pair, prepared["control_topic_ends"]))
    detail.update(prepared)
    detail[f"{dst}_positions"] = moved
    progress(f"  {pair.old}: the sink continues on the {dst} cluster at "
             + ", ".join(f"{p}:{o}" for p, o in sorted(moved.items())) + f" (group {pair.sink_group})")
    return detail

