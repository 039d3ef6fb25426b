"""`cutover readers translate`: a declared reader's positions moved through the mirror's exact map.

spark-checkpoint: the query's last committed batch N is read from its checkpoint; every Kafka
position in it is translated (the next record to read on the source cluster -> the same record's
offset on the target); batch N+1 is added with those positions and a commit, so the stopped
query resumes on the target cluster at exactly the next record. Nothing existing is changed: the
added files can be removed to undo it. Each execution is recorded, fsynced, in the plan's
journal folder (`readers.jsonl`).

A partition the mirror has not copied refuses the whole translation (nothing written). An
interrupted execution (offsets/N+1 written, its commit not) is finished by the next one when
offsets/N+1 is exactly what it would write; any other uncommitted batch is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from cutover.common import iso_z
from cutover.errors import Refused, UsageError
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import groups
from cutover.mirror import state as st
from cutover.mirror.offsetmap import NotYetMirrored
from cutover.plan import Plan
from cutover.plan.model import Reader
from cutover.readers import canary
from cutover.readers import spark_checkpoint as sc

Mode = Literal["dry-run", "execute", "starting-offsets"]


def reader(plan: Plan, name: str) -> Reader:
    """The plan's reader of that name; a usage error naming the ones declared."""
    for r in plan.spec.readers:
        if r.name == name:
            return r
    declared = ", ".join(r.name for r in plan.spec.readers) or "none"
    raise UsageError(f"{plan.file}: no reader named {name} (readers declared: {declared})",
                     fix="name one of the plan's readers, or declare it under readers: (name, kind, checkpoint)")


def checkpoint_folder(plan: Plan, r: Reader) -> Path:
    path = Path(r.checkpoint).expanduser()
    return path if path.is_absolute() else plan.base_dir / path


def positions(plan: Plan) -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """Each declared reader's current position (what `plan check`, `status` and the dry run show), and
    what a translation would refuse whatever the query does: (reader, problem, fix). A batch in flight
    is shown, not a problem (a running query has one; the switch stops it first). Reads the checkpoints
    only: nothing is asked of the clusters."""
    out: list[dict[str, Any]] = []
    problems: list[tuple[str, str, str]] = []
    for r in plan.spec.readers:
        folder = checkpoint_folder(plan, r)
        entry: dict[str, Any] = {"reader": r.name, "kind": r.kind, "checkpoint": str(folder),
                                 "last_committed_batch": None, "in_flight": None, "positions": {}}
        out.append(entry)
        if not folder.is_dir():
            problems.append((r.name, f"reader {r.name}: checkpoint folder {folder} not found",
                             "set the reader's checkpoint to the query's checkpointLocation"))
            continue
        ck = sc.Checkpoint(folder)
        try:
            batch = ck.last_committed()
        except sc.InFlight:
            entry["in_flight"] = ck.offsets()[-1]
            commits = ck.commits()
            if not commits:
                continue
            batch = ck.committed(commits[-1])
        except sc.CheckpointError as exc:
            problems.append((r.name, f"reader {r.name}: {exc.message}", exc.fix or ""))
            continue
        entry["last_committed_batch"] = batch.batch
        for source in batch.kafka().values():
            for topic, parts in source.items():
                entry["positions"].setdefault(topic, {}).update({str(p): o for p, o in sorted(parts.items())})
        unselected = sorted(t for t in entry["positions"] if not plan.spec.topics.matches(t))
        if unselected:
            problems.append((r.name, f"reader {r.name} reads {', '.join(unselected)}, which the plan's topic "
                             "selection leaves out: the mirror never copies it, so there is no map to translate "
                             "through", f"select {', '.join(unselected)} in topics.include"))
    return out, problems


def _base(ck: sc.Checkpoint, translate: sc.Translate, stateful_ok: bool = False,
          ) -> tuple[sc.Batch, sc.Batch, bool]:
    """The last committed batch, the batch it moves to (translated once), and whether that batch is this
    translation's own, interrupted before its commit."""
    offsets, commits = ck.offsets(), ck.commits()
    if offsets and commits and offsets[-1] == commits[-1] + 1:
        base = ck.committed(commits[-1])
        planned = sc.moved(base, translate)
        if ck.read(offsets[-1]) == sc.Batch(planned.batch, planned.metadata, planned.sources):
            return base, planned, True
    base = ck.last_committed(stateful_ok)
    return base, sc.moved(base, translate), False


def spark_checkpoint(plan: Plan, r: Reader, direction: st.Direction, mode: Mode,
                     timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Translate a Spark checkpoint's positions; write batch N+1 when `mode` is execute."""
    folder = checkpoint_folder(plan, r)
    if not folder.is_dir():
        raise UsageError(f"reader {r.name}: checkpoint folder {folder} not found",
                         fix="set the reader's checkpoint to the query's checkpointLocation")
    ck = sc.Checkpoint(folder)
    commits = ck.commits()
    done = _moved_already(plan, folder, commits[-1] if commits else None)
    if done is not None and done["direction"] == direction:
        # The last committed batch is the one this translation wrote: translating it again would move
        # positions that are already on the target cluster. Nothing to do (a re-run after a crash, or twice).
        return {"reader": r.name, "kind": r.kind, "direction": direction, "checkpoint": str(folder),
                "last_committed_batch": done["batch"], "next_batch": done["batch"], "positions": done["positions"],
                "mode": mode, "written": [], "already_moved": True}
    route = st.route(plan, direction)
    tr = groups.translator(route, plan, timeout)
    unmapped: list[str] = []
    rows: list[dict[str, Any]] = []

    def translate(topic: str, partition: int, offset: int) -> int:
        try:
            target = tr.translate((topic, partition), offset)
        except NotYetMirrored as exc:
            unmapped.append(f"{topic}[{partition}] at {offset}: {exc}")
            target = -1
        rows.append({"topic": topic, "partition": partition, "source_offset": offset, "target_offset": target})
        return target

    base, batch, resuming = _base(ck, translate, stateful_ok=mode == "starting-offsets")
    if unmapped:
        raise Refused(f"reader {r.name}: {len(unmapped)} position(s) in batch {base.batch} of {folder} have no "
                      "mapping yet: " + "; ".join(unmapped[:5]) + (" ..." if len(unmapped) > 5 else ""),
                      fix="let the mirror copy those partitions (cutover mirror --until-caught-up), or add their "
                          "topics to the plan's selection; nothing was written")
    rows.sort(key=lambda row: (row["topic"], row["partition"]))
    out: dict[str, Any] = {"reader": r.name, "kind": r.kind, "direction": direction, "checkpoint": str(folder),
                           "last_committed_batch": base.batch, "next_batch": batch.batch, "positions": rows,
                           "mode": mode, "written": [], "already_moved": False}
    if mode == "starting-offsets":
        out["starting_offsets"] = sc.starting_offsets(batch)
        return out
    # The canary: the record the reader reads next is the same record on both clusters.
    out["canary"] = canary.differences(route.source, route.target, rows, timeout)
    if mode == "dry-run":
        return out
    if out["canary"]:
        raise Refused(f"reader {r.name}: the translated positions point at other records on "
                      f"{route.target.describe()}: " + "; ".join(out["canary"][:3]),
                      fix="the clusters and the mirror's map disagree (a topic recreated, or written outside the "
                          "mirror on the target?): check `cutover mirror status`; nothing was written")
    sink = None
    if r.sink is not None:
        sink = Path(r.sink).expanduser()
        sink = (sink if sink.is_absolute() else plan.base_dir / sink) / "_spark_metadata"
    written = sc.write(ck, batch, sink)
    out["written"] = [str(p) for p in written]
    out["resumed"] = resuming
    _record(plan, {"at": iso_z(), "reader": r.name, "kind": r.kind, "direction": direction,
                   "checkpoint": str(folder), "from_batch": base.batch, "batch": batch.batch,
                   "positions": rows, "written": out["written"],
                   "undo": "remove the written files: the query then resumes from batch "
                           f"{base.batch}'s positions on the source cluster"})
    return out


def status(plan: Plan) -> list[dict[str, Any]]:
    """Each declared reader for `cutover status`: its position now, the cluster that position is on,
    and its last move (both sides' positions at that batch)."""
    out = []
    recorded = _moves(plan)  # read once for every reader
    for entry in positions(plan)[0]:
        moves = [m for m in recorded if m.get("checkpoint") == entry["checkpoint"]]
        last = moves[-1] if moves else None
        on = "old" if last is None or last.get("direction") == "reverse" else "new"
        out.append({**entry, "on": on, "last_move": None if last is None else {
            k: last.get(k) for k in ("at", "direction", "from_batch", "batch", "positions")}})
    return out


def _moves(plan: Plan) -> list[dict[str, Any]]:
    from cutover.switch import journal

    path = journal.directory(plan) / "readers.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line: that execution did not finish recording
    return out


def _moved_already(plan: Plan, folder: Path, batch: int | None) -> dict[str, Any] | None:
    """The record of the translation that wrote `batch` into this checkpoint, if one did."""
    if batch is None:
        return None
    found = None
    for entry in _moves(plan):
        if entry.get("checkpoint") == str(folder) and entry.get("batch") == batch:
            found = entry
    return found


def _record(plan: Plan, entry: dict[str, Any]) -> None:
    from cutover.switch import journal

    folder = journal.directory(plan)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "readers.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
