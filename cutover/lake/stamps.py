"""Kafka offsets kept in the table itself: what every shadow commit stamps on its snapshot.

Each Iceberg snapshot that `cutover shadow` commits carries, in its summary:

- `cutover.version`: the format of these keys (this cutover reads 1; a newer one is refused);
- `cutover.kafka.cluster-id`, `cutover.kafka.topic`: where the rows came from;
- `cutover.kafka.offsets`: `{"partition": [first, last]}`, the offsets of the rows this
  snapshot added (the dead-letter table's own snapshots: of the rows it added there);
- `cutover.kafka.positions`: `{"partition": next}`, every partition's next offset to read,
  cumulative over the table's history for this cluster: the restart position;
- `cutover.run-id`: the shadow run that wrote it; `cutover.rows.dead-letter`: the
  cumulative count of records sent to the dead-letter table.

The same commit that moves the table's main branch to a stamped snapshot also records
its stamp in the table property `cutover.kafka.state` (with the snapshot's id and time):
table maintenance that cutover did not do (compaction, then snapshot expiry) can leave a
head whose ancestry holds no stamped snapshot, and the positions must survive it.

The table is the checkpoint: a restart reads the newest stamped snapshot in the current
snapshot's lineage, or, when maintenance expired it, the table's recorded state; so a
lost or fresh Spark checkpoint resumes exactly. Pure logic: fed snapshots and properties
by pyiceberg (status) or by the job.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cutover.errors import CutoverError

VERSION = 1
K_VERSION = "cutover.version"
K_CLUSTER = "cutover.kafka.cluster-id"
K_TOPIC = "cutover.kafka.topic"
K_OFFSETS = "cutover.kafka.offsets"
K_POSITIONS = "cutover.kafka.positions"
K_RUN = "cutover.run-id"
K_DEAD = "cutover.rows.dead-letter"
#: Table property: the stamp of the snapshot main was last moved to by cutover, with its id and time.
K_STATE = "cutover.kafka.state"


class TableStateError(CutoverError):
    """A table's stamped offsets cannot be read by this cutover."""


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    summary: Mapping[str, str]


@dataclass(frozen=True)
class TableOffsets:
    """Where a table stands, read from its newest stamped snapshot."""

    cluster_id: str | None = None
    topic: str | None = None
    #: partition -> next offset to read (everything below is in the table or its dead letters)
    positions: dict[int, int] = field(default_factory=dict)
    committed_at_ms: int | None = None
    snapshot_id: int | None = None
    run_id: str | None = None
    dead_letter_rows: int = 0

    @property
    def stamped(self) -> bool:
        return self.cluster_id is not None

    def for_cluster(self, cluster_id: str) -> dict[int, int]:
        """The positions that hold for records read from `cluster_id` (none from another cluster)."""
        return dict(self.positions) if self.cluster_id == cluster_id else {}


def _ints(text: str, where: str) -> dict[int, object]:
    try:
        data = json.loads(text)
        return {int(k): v for k, v in data.items()}
    except (ValueError, AttributeError) as exc:
        raise TableStateError(f"{where}: unreadable offsets {text[:80]!r} ({exc})",
                              fix="the snapshot summary was not written by cutover; "
                                  "roll the table back to the last cutover snapshot") from None


def read(snapshot: Snapshot, table: str) -> TableOffsets:
    s = snapshot.summary
    version = int(s.get(K_VERSION, "0") or 0)
    if version > VERSION:
        raise TableStateError(f"table {table}: snapshot {snapshot.snapshot_id} has cutover offsets of version "
                              f"{version}; this cutover reads version {VERSION}",
                              fix="upgrade cutover to the version that wrote the table")
    where = f"table {table} snapshot {snapshot.snapshot_id}"
    positions = {p: int(v) for p, v in _ints(s.get(K_POSITIONS, "{}"), where).items()}  # type: ignore[call-overload]
    return TableOffsets(cluster_id=s[K_CLUSTER], topic=s.get(K_TOPIC), positions=positions,
                        committed_at_ms=snapshot.timestamp_ms, snapshot_id=snapshot.snapshot_id,
                        run_id=s.get(K_RUN), dead_letter_rows=int(s.get(K_DEAD, "0")))


def lineage(snapshots: Iterable[Snapshot], current_id: int | None) -> list[Snapshot]:
    """The current snapshot and its ancestors, newest first (rolled-back branches left out)."""
    by_id = {s.snapshot_id: s for s in snapshots}
    out: list[Snapshot] = []
    sid = current_id
    while sid is not None and sid in by_id and len(out) <= len(by_id):
        out.append(by_id[sid])
        sid = by_id[sid].parent_id
    return out


def latest(snapshots: Iterable[Snapshot], current_id: int | None, table: str,
           properties: Mapping[str, str] | None = None) -> TableOffsets:
    """The table's offsets: from the newest snapshot in its lineage that cutover stamped, or from the
    table's recorded state when maintenance expired that snapshot.

    The recorded state names its snapshot S. S in the lineage: that is the stamp. S gone
    and the lineage's history cut short by expiry (its oldest snapshot's parent is gone
    too), with no stamp left in it: S was expired below the head, and its record is the
    position. S still present but off the lineage, or the lineage complete to its root:
    the table was rolled back past S, and the lineage's own stamp (if any) holds.
    """
    snaps = list(snapshots)
    line = lineage(snaps, current_id)
    newest = next((s for s in line if K_CLUSTER in s.summary), None)
    state = _state(properties or {}, table)
    if state is not None and newest is None:
        sid = int(state["snapshot-id"])
        truncated = bool(line) and line[-1].parent_id is not None and \
            all(s.snapshot_id != line[-1].parent_id for s in snaps)
        if truncated and all(s.snapshot_id != sid for s in snaps):
            return read(Snapshot(sid, None, int(state["timestamp-ms"]), state["stamp"]), table)
    return read(newest, table) if newest is not None else TableOffsets()


def state_property(stamp_props: Mapping[str, str], snapshot_id: int, timestamp_ms: int) -> str:
    """The value of K_STATE for a commit that moves main to `snapshot_id` carrying `stamp_props`."""
    stamp = {k: v for k, v in stamp_props.items() if k.startswith("cutover.") and k != K_OFFSETS}
    return json.dumps({"snapshot-id": snapshot_id, "timestamp-ms": timestamp_ms, "stamp": stamp},
                      separators=(",", ":"), sort_keys=True)


def _state(properties: Mapping[str, str], table: str) -> dict[str, Any] | None:
    raw = properties.get(K_STATE)
    if not raw:
        return None
    try:
        state: dict[str, Any] = json.loads(raw)
        if K_CLUSTER not in state["stamp"]:
            raise KeyError(K_CLUSTER)
    except (ValueError, KeyError, TypeError) as exc:
        raise TableStateError(f"table {table}: property {K_STATE} is unreadable ({exc})",
                              fix=f"remove the property (ALTER TABLE ... UNSET TBLPROPERTIES ('{K_STATE}')) and "
                                  "give the positions with --start-offsets") from None
    return state


def stamped(snapshots: Iterable[Snapshot], current_id: int | None) -> list[Snapshot]:
    """Every stamped snapshot in the lineage, oldest first (for audits and tests)."""
    return [s for s in reversed(lineage(snapshots, current_id)) if K_CLUSTER in s.summary]


def ranges(snapshot: Snapshot) -> dict[int, tuple[int, int]]:
    """The offsets of the rows a stamped snapshot added: partition -> (first, last)."""
    raw = _ints(snapshot.summary.get(K_OFFSETS, "{}"), f"snapshot {snapshot.snapshot_id}")
    return {p: (int(v[0]), int(v[1])) for p, v in raw.items()}  # type: ignore[index]


def advance(positions: Mapping[int, int], batch: Mapping[int, tuple[int, int]]) -> dict[int, int]:
    """Positions after a batch whose partitions span `batch` (partition -> (first, last) offset)."""
    out = dict(positions)
    for p, (_first, last) in batch.items():
        out[p] = max(out.get(p, 0), last + 1)
    return out


def stamp(cluster_id: str, topic: str, added: Mapping[int, tuple[int, int]], positions: Mapping[int, int],
          run_id: str, dead_letter_rows: int) -> dict[str, str]:
    """The snapshot properties of one commit."""
    return {
        K_VERSION: str(VERSION),
        K_CLUSTER: cluster_id,
        K_TOPIC: topic,
        K_OFFSETS: json.dumps({str(p): [a, b] for p, (a, b) in sorted(added.items())}, separators=(",", ":")),
        K_POSITIONS: json.dumps({str(p): o for p, o in sorted(positions.items())}, separators=(",", ":")),
        K_RUN: run_id,
        K_DEAD: str(dead_letter_rows),
    }
