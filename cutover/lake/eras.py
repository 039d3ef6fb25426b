"""Which cluster's offsets a canonical table's rows carry, era by era.

A canonical table handed over at promote and back at rollback holds rows whose offset
columns come from two clusters: the old writer's (old-cluster offsets) up to the
hand-over, cutover's writer (new-cluster offsets) from there to the hand-back, the old
writer's again after it, and so on for every cycle. Each hand-over or hand-back stamps
the table with a note of both positions (where the stopping writer stood on its cluster,
where the next one starts on the other). Per partition those notes cut the table's
history into eras: `[(cluster, first, end)]`, each a half-open range of one cluster's
offsets. An offset both an old era and a new era contain is ambiguous by number alone
(the clusters' offsets overlap); verify settles those rows by content (see
`cutover.verify.align`).

The notes are read from the hand-over snapshots in the table's lineage and from the
table property `cutover.kafka.handovers`, which the same commit appends to, so snapshot
expiry does not lose them. Pure logic.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cutover.lake import stamps

#: Snapshot summary key: the hand-over note of a stamp-only snapshot.
K_HANDOVER = "cutover.handover"
#: Table property: every hand-over note, oldest first, each with its snapshot id.
K_HANDOVERS = "cutover.kafka.handovers"

Side = Literal["old", "new"]


@dataclass(frozen=True)
class Span:
    cluster: Side
    first: int  # inclusive
    end: int | None  # exclusive; None: still open (the current writer's)

    def holds(self, offset: int) -> bool:
        return self.first <= offset and (self.end is None or offset < self.end)


def notes(snapshots: Iterable[stamps.Snapshot], current_id: int | None,
          properties: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every hand-over note of the table, oldest first, each once (by its snapshot id): the property's
    in the order they were appended, then those only the lineage still has, in lineage order, all
    ordered by commit time (a stable sort: notes of the same millisecond keep that order)."""
    by_snapshot: dict[int, dict[str, Any]] = {}
    for entry in json.loads(properties.get(K_HANDOVERS) or "[]"):
        by_snapshot[int(entry["snapshot"])] = entry
    for snap in reversed(stamps.lineage(snapshots, current_id)):
        raw = snap.summary.get(K_HANDOVER)
        if raw and snap.snapshot_id not in by_snapshot:
            by_snapshot[snap.snapshot_id] = {**json.loads(raw), "snapshot": snap.snapshot_id,
                                             "timestamp-ms": snap.timestamp_ms}
    return sorted(by_snapshot.values(), key=lambda n: int(n.get("timestamp-ms", 0)))


def appended(properties: Mapping[str, str], note: Mapping[str, Any], snapshot_id: int,
             timestamp_ms: int) -> str:
    """The value of K_HANDOVERS once the hand-over snapshot `snapshot_id` carrying `note` is committed."""
    kept = [n for n in json.loads(properties.get(K_HANDOVERS) or "[]") if int(n["snapshot"]) != snapshot_id]
    entry = {**note, "snapshot": snapshot_id, "timestamp-ms": timestamp_ms}
    return json.dumps([*kept, entry], separators=(",", ":"), sort_keys=True)


def spans(handovers: list[dict[str, Any]]) -> dict[int, list[Span]]:
    """Per partition, the eras of the table's offsets, oldest first; {} when it was never handed over."""
    out: dict[int, list[Span]] = {}
    parts = {int(p) for n in handovers for side in ("old", "new") for p in n.get(side, {})}
    for p in parts:
        line: list[Span] = []
        cluster: Side = "old"
        first = 0
        for n in handovers:
            forward = n["direction"] == "forward"
            if (cluster == "old") != forward:
                continue  # a note that repeats the direction the table already went (never written twice)
            stop, start = (n["old"], n["new"]) if forward else (n["new"], n["old"])
            if str(p) not in stop or str(p) not in start:
                continue
            line.append(Span(cluster, first, int(stop[str(p)])))
            cluster, first = ("new" if forward else "old"), int(start[str(p)])
        line.append(Span(cluster, first, None))
        out[p] = line
    return out


def sides(line: list[Span], offsets: Any) -> tuple[Any, Any]:
    """For a numpy array of one partition's offsets: (an old era holds it, a new era holds it), as two
    boolean arrays. An offset below every era counts as old."""
    import numpy as np

    o = np.asarray(offsets, dtype=np.int64)
    old = o < line[0].first if line else np.zeros(len(o), dtype=bool)
    new = np.zeros(len(o), dtype=bool)
    for s in line:
        inside = (o >= s.first) & (o < (s.end if s.end is not None else np.iinfo(np.int64).max))
        if s.cluster == "old":
            old = old | inside
        else:
            new = new | inside
    return old, new

