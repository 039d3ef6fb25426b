"""flink readers: a Flink job's KafkaSource, moved from its savepoint.

A KafkaSource keeps each split's (topic, partition, next offset) in the job's state, with no
cluster in it: a job restored on the other cluster would seek the old offsets there. So the job is
stopped with a savepoint (its stop_reader hook), and a move reads the source's splits from the
newest savepoint in the reader's folder with Flink's State Processor API (FlinkSavepoint.java),
translates each next offset through the mirror's map, checks with the canary that each points at
the same record, and writes the start file the job's restart reads: the savepoint to restore, the
source's uid on the target cluster (a new one: the old source's state goes unclaimed, every other
operator keeps its state) and the offsets for OffsetsInitializer.offsets(map, OffsetResetStrategy.NONE).
With start: committed the offsets are also committed to the job's group on the target, for
committedOffsets(OffsetResetStrategy.NONE).

The uid tells the clusters apart: a savepoint taken on the old cluster holds the old uid's splits,
one taken on the new the new uid's. A move of a savepoint already moved the same way is not done
again (a re-run after a crash, or twice).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutover import jvm
from cutover.common import iso_z, replace_file
from cutover.errors import Refused, UsageError
from cutover.kafka import offsets
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import state as st
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import Reader
from cutover.readers import journal
from cutover.readers.kind import Mode, Problem
from cutover.readers.mapping import Mapped, moved_pairs, positions_table
from cutover.readers.store import local

_PROGRAM = jvm.JAVA_SOURCES / "FlinkSavepoint.java"

#: What Flink 1.20's own config.yaml adds for Java 17 (its runtime reflects into these packages).
JAVA17_OPENS = tuple(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text", "java.time",
    "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks"))

#: Split offsets below 0 are markers, not positions (-2 earliest, -3 committed): a split not read yet.
_MARKERS = {-1: "latest", -2: "earliest", -3: "committed"}


class SavepointError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def uid(r: Reader, cluster: ClusterSide) -> str:
    """The KafkaSource's uid while the job runs on that cluster."""
    assert r.source_uid is not None
    return r.source_uid if cluster == "old" else (r.new_source_uid or f"{r.source_uid}-new")


def start_file(plan: Plan, r: Reader) -> Path:
    return local(plan, r.start_file) if r.start_file else local(plan, r.savepoints) / "cutover-start.json"


def newest_savepoint(plan: Plan, r: Reader) -> Path | None:
    """The newest complete savepoint in the reader's folder (a folder holding _metadata, which Flink
    writes last), or None."""
    folder = local(plan, r.savepoints)
    found = [m.parent for m in folder.glob("*/_metadata") if m.is_file()] if folder.is_dir() else []
    return max(found, key=lambda p: (p.joinpath("_metadata").stat().st_mtime_ns, p.name)) if found else None


def splits(savepoint: Path, source_uid: str, timeout: float = 300) -> list[dict[str, Any]]:
    """The KafkaSource's splits in a savepoint: [{topic, partition, offset}], offset the next to read."""
    cmd = [jvm.java(), "-Xmx512m", *jvm.LEAN, *JAVA17_OPENS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
           *jvm.program(_PROGRAM, jvm.resolve(jvm.FLINK)), str(savepoint), source_uid]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise SavepointError(f"reading savepoint {savepoint} took longer than {timeout:.0f}s") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.startswith("cutover-flink: ")]
        raise SavepointError(said[-1].removeprefix("cutover-flink: ") if said else
                             (done.stderr.strip().splitlines() or ["(no output)"])[-1])
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return sorted(({"topic": s["topic"], "partition": int(s["partition"]), "offset": int(s["offset"])} for s in rows),
                  key=lambda s: (s["topic"], s["partition"]))


def _warnings(r: Reader) -> list[str]:
    reset = r.reset or "earliest"
    if reset == "none":
        return []
    return [f"reader {r.name}: the job's KafkaSource resets an out-of-range offset to {reset} (its initializer's "
            f"OffsetResetStrategy; Flink's default is earliest): a start offset that is not on the target would "
            f"silently {'rewind to the start' if reset == 'earliest' else 'skip to the end'} instead of failing. "
            "Build the restarted source with OffsetsInitializer.offsets(map, OffsetResetStrategy.NONE) (or "
            "committedOffsets(OffsetResetStrategy.NONE)) and set reset: none"]


def position(plan: Plan, r: Reader) -> tuple[dict[str, Any], list[Problem]]:
    """The newest savepoint's splits for the source uid of the cluster the job is on (read once per
    savepoint: kept in the journal folder, so `status` runs no JVM twice for one savepoint)."""
    folder = local(plan, r.savepoints)
    sp = newest_savepoint(plan, r)
    on = journal.side(journal.last(plan, str(folder)))
    entry: dict[str, Any] = {"reader": r.name, "kind": r.kind, "location": str(folder), "job": r.job,
                             "savepoint": None if sp is None else str(sp), "source_uid": uid(r, on),
                             "warnings": _warnings(r), "positions": {}, "note": None}
    if not folder.is_dir():
        return entry, [(r.name, f"reader {r.name}: no savepoint folder {folder}",
                        "set savepoints to the folder the job's stop-with-savepoint writes into (flink stop "
                        "--savepointPath DIR), and create it")]
    if sp is None:
        entry["note"] = "no savepoint yet: the stop_reader hook takes one"
        return entry, []
    if jvm.cached(jvm.FLINK) is None:  # plan check and status fetch nothing: the first move does
        entry["note"] = f"newest savepoint {sp.name}: its splits are read at the move (Flink's jars not fetched yet)"
        return entry, []
    try:
        found = _cached_splits(plan, sp, uid(r, on))
    except SavepointError as exc:
        entry["note"] = f"the newest savepoint gives no splits of source uid {uid(r, on)}: {exc.message}"
        return entry, []
    for s in found:
        entry["positions"].setdefault(s["topic"], {})[str(s["partition"])] = s["offset"]
    return entry, []


def _cached_splits(plan: Plan, sp: Path, source_uid: str) -> list[dict[str, Any]]:
    cache = plan.journal_dir / "flink-savepoints.json"
    key = f"{sp}#{source_uid}#{(sp / '_metadata').stat().st_mtime_ns}"
    known: dict[str, Any] = json.loads(cache.read_text(encoding="utf-8")) if cache.is_file() else {}
    if key not in known:
        known = {key: splits(sp, source_uid)}  # only the newest savepoint is ever asked for again
        cache.parent.mkdir(parents=True, exist_ok=True)
        replace_file(cache, json.dumps(known, sort_keys=True) + "\n")
    return list(known[key])


def move(plan: Plan, r: Reader, direction: st.Direction, mode: Mode,
         timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Read the source's splits from the newest savepoint, translate them, and (execute) write the start
    file (and commit the group, start: committed)."""
    if mode == "starting-offsets":
        raise UsageError(f"reader {r.name}: --starting-offsets is for spark-checkpoint readers; a flink reader's "
                         "--dry-run shows the offsets and the Java to start from them",
                         fix="use --dry-run or --execute")
    source_side: ClusterSide = "old" if direction == "forward" else "new"
    target_side: ClusterSide = "new" if direction == "forward" else "old"
    folder = local(plan, r.savepoints)
    sp = newest_savepoint(plan, r)
    head: dict[str, Any] = {"reader": r.name, "kind": r.kind, "direction": direction, "location": str(folder),
                            "mode": mode, "job": r.job, "savepoint": None if sp is None else str(sp),
                            "source_uid": uid(r, source_side), "target_uid": uid(r, target_side),
                            "warnings": _warnings(r), "written": []}
    if sp is None:
        raise Refused(f"reader {r.name}: no savepoint in {folder}",
                      fix=f"stop the job with a savepoint into that folder (flink stop --savepointPath {folder} "
                          "JOB_ID, in the stop_reader hook); nothing was written")
    last = journal.last(plan, str(folder))
    journal.refuse_back_first(plan, r, last, direction)
    if last is not None and last["direction"] == direction and last["savepoint"] == str(sp):
        return {**head, "positions": last["positions"], "start_file": last["start_file"], "already_moved": True}
    try:
        found = _cached_splits(plan, sp, uid(r, source_side))  # the dry run's read, not a second JVM
    except SavepointError as exc:
        other = f" (taken while the job ran on the {target_side} cluster, with source uid {uid(r, target_side)}?)"
        raise Refused(f"reader {r.name}: savepoint {sp} gives no splits of source uid {uid(r, source_side)}: "
                      f"{exc.message}" + (other if "does not contain" in exc.message else ""),
                      fix=f"stop the job on the {source_side} cluster with a savepoint into {folder} (its KafkaSource "
                          f"built with .uid(\"{uid(r, source_side)}\")) and run again; nothing was written") from None
    markers = [f"{s['topic']}[{s['partition']}] ({_MARKERS.get(s['offset'], s['offset'])})"
               for s in found if s["offset"] < 0]
    if markers:
        raise Refused(f"reader {r.name}: savepoint {sp} holds split(s) that had not read yet, at a marker and not "
                      f"an offset: {', '.join(markers[:5])}",
                      fix="let the job read each partition and take a savepoint again; nothing was written")
    if not found:
        raise Refused(f"reader {r.name}: savepoint {sp} holds no split for source uid {uid(r, source_side)}",
                      fix="check source_uid against the job's KafkaSource .uid(...); nothing was written")
    mapped = Mapped(plan, direction, timeout)
    for s in found:
        mapped(s["topic"], s["partition"], s["offset"])
    mapped.refuse_unmapped(r, f"savepoint {sp}")
    rows = sorted(mapped.rows, key=lambda row: (row["topic"], row["partition"]))
    target = plan.cluster(target_side)
    handoff = {"reader": r.name, "job": r.job, "cluster": target_side,
               "bootstrap.servers": target.get("bootstrap.servers"), "savepoint": str(sp),
               "allow_non_restored_state": True, "source_uid": uid(r, target_side), "reset": "none",
               "offsets": [{"topic": row["topic"], "partition": row["partition"], "offset": row["target_offset"]}
                           for row in rows]}
    out: dict[str, Any] = {**head, "positions": rows, "start_file": str(start_file(plan, r)), "start": handoff,
                           "java": java_snippet(handoff), "already_moved": False,
                           "canary": mapped.canary(rows)}
    if mode == "dry-run":
        return out
    mapped.refuse_canary(r, out)
    start_file(plan, r).parent.mkdir(parents=True, exist_ok=True)
    replace_file(start_file(plan, r), json.dumps(handoff, indent=2, sort_keys=True) + "\n")
    out["written"] = [str(start_file(plan, r))]
    if r.start == "committed":
        assert r.group is not None
        offsets.commit_group(mapped.route.target, r.group,
                             {(row["topic"], row["partition"]): row["target_offset"] for row in rows}, timeout)
        out["committed_group"] = r.group
    journal.record(plan, {"at": iso_z(), "reader": r.name, "kind": r.kind, "direction": direction,
                          "location": str(folder), "phase": "done", "savepoint": str(sp), "positions": rows,
                          "start_file": out["start_file"], "written": out["written"],
                          "undo": f"restart the job from {sp} with source uid {uid(r, source_side)} on the "
                                  f"{source_side} cluster: its savepoint is unchanged"})
    return out


def java_snippet(handoff: dict[str, Any]) -> str:
    """The Java that starts the job's KafkaSource at the start file's offsets (and the restore it needs)."""
    puts = "".join(f'offsets.put(new TopicPartition({json.dumps(o["topic"])}, {o["partition"]}), {o["offset"]}L);\n'
                   for o in handoff["offsets"])
    return ("Map<TopicPartition, Long> offsets = new HashMap<>();\n" + puts +
            "KafkaSource<...> source = KafkaSource.<...>builder()\n"
            f"    .setBootstrapServers({json.dumps(handoff['bootstrap.servers'])})  // and the rest as before\n"
            "    .setStartingOffsets(OffsetsInitializer.offsets(offsets, OffsetResetStrategy.NONE))\n"
            "    .build();\n"
            f"env.fromSource(source, watermarks, \"kafka\").uid({json.dumps(handoff['source_uid'])});\n"
            f"// restore: flink run -s {handoff['savepoint']} --allowNonRestoredState ...\n"
            "// (execution.state-recovery.path and execution.state-recovery.ignore-unclaimed-state: true)")


def started(plan: Plan, r: Reader, side: ClusterSide, timeout: float) -> None:
    """Nothing to ask after its start hook: the files the move wrote are where it resumes."""
    return None


# What the switch, plan check, status and `cutover readers move` say of a reader of this kind (ReaderKind).

def on_server(r: Reader) -> bool:
    """Its position is in a local savepoint folder: plan check --offline reads it."""
    return False


def step_text(r: Reader, target: ClusterSide) -> str:
    return (f"read its positions from its savepoint and write them, translated exactly to the {target} cluster, "
            "into the start file its restart reads")


def would_move(plan: Plan, r: Reader, target: ClusterSide, where: str, now: dict[str, Any] | None) -> str:
    return (f"read its KafkaSource's splits from the newest savepoint in {where} (the stop_reader hook takes it), "
            f"translate them exactly to the {target} cluster, check the next record is the same on both, and write "
            "the start file" + (f" and commit them to group {r.group}" if r.start == "committed" else ""))


def started_check(r: Reader, side: ClusterSide) -> str | None:
    return None


def hook_context(plan: Plan, r: Reader) -> dict[str, str | None]:
    """Its stop and start hooks' folders: where stop-with-savepoint writes (CUTOVER_SAVEPOINTS) and the start file a
    move wrote (CUTOVER_START_FILE)."""
    return {"savepoints": str(local(plan, r.savepoints)), "start_file": str(start_file(plan, r))}


def position_line(e: dict[str, Any]) -> str:
    where = ", ".join(f"{t} {parts}" for t, parts in e["positions"].items())
    return (f"reader {e['reader']} (flink, source uid {e['source_uid']}): "
            + (f"savepoint {e['savepoint']}, next records at {where}" if where else e["note"] or "")
            + "".join(f"\n  warning: {w}" for w in e["warnings"]))


def status_text(e: dict[str, Any]) -> str:
    move = e["last_move"]
    where = ", ".join(f"{t} {parts}" for t, parts in e["positions"].items()) or e["note"] or ""
    return (f"source uid {e['source_uid']}, newest savepoint {e['savepoint']}: {where}"
            + ("" if move is None else f"; last moved {move['direction']} at {move['at']} (from "
               f"{move['savepoint']}: {moved_pairs(move['positions'])})"))


def moved_text(head: str, m: dict[str, Any]) -> str:
    from cutover.readers import canary

    lines = [f"{head}: savepoint {m['savepoint']}, source uid {m['source_uid']} -> {m['target_uid']}",
             positions_table(m["positions"]),
             "  (each the next offset to read)"]
    lines += canary.summary_lines(m)
    lines += [f"warning: {w}" for w in m["warnings"]]
    lines += ["the restarted job's KafkaSource:", *(f"  {line}" for line in m["java"].splitlines())]
    if m["mode"] == "dry-run":
        lines.append(f"dry run: nothing written (--execute writes the start file {m['start_file']})")
    else:
        lines.append("wrote: " + ", ".join(m["written"]) + (f"; committed to group {m['committed_group']} on the "
                                                            "target" if m.get("committed_group") else ""))
    return "\n".join(lines)


if TYPE_CHECKING:  # mypy checks this module against the protocol of every reader kind (readers/kind.py)
    from cutover.readers import flink as _this
    from cutover.readers.kind import ReaderKind

    _checked: ReaderKind = _this
