"""spark-checkpoint readers: a Structured Streaming query's checkpoint, read and moved.

The query's last committed batch N is read from its checkpoint; every Kafka position in it is
translated (the next record to read on the source cluster -> the same record's offset on the
target); batch N+1 is added with those positions and a commit, so the stopped query resumes on
the target cluster at exactly the next record. Nothing existing is changed: the added files can
be removed to undo it.

A partition the mirror has not copied refuses the whole translation (nothing written). An
interrupted execution (offsets/N+1 written, its commit not) is finished by the next one when
offsets/N+1 is exactly what it would write; any other uncommitted batch is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cutover.common import iso_z
from cutover.errors import CutoverError, Refused, UsageError
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import state as st
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import Reader
from cutover.readers import journal, store
from cutover.readers import spark_checkpoint as sc
from cutover.readers.kind import Mode, Problem
from cutover.readers.mapping import Mapped, moved_pairs, positions_table, unselected_text


def position(plan: Plan, r: Reader) -> tuple[dict[str, Any], list[Problem]]:
    """The query's last committed batch and its positions (a batch in flight is shown, not a problem)."""
    entry: dict[str, Any] = {"reader": r.name, "kind": r.kind, "location": r.checkpoint,
                             "last_committed_batch": None, "in_flight": None, "positions": {}}
    try:
        folder = store.folder(plan, r.checkpoint)
        entry["location"] = str(folder)
        if not folder.exists():
            return entry, [(r.name, f"reader {r.name}: checkpoint folder {folder} not found",
                            "set the reader's checkpoint to the query's checkpointLocation")]
        ck = sc.Checkpoint(folder)
        try:
            batch = ck.last_committed()
        except sc.InFlight:
            entry["in_flight"] = ck.offsets()[-1]
            commits = ck.commits()
            if not commits:
                return entry, []
            batch = ck.committed(commits[-1])
        _refuse_without_kafka(r, ck, folder)
    except CutoverError as exc:  # the checkpoint as it is, or its storage out of reach
        return entry, [(r.name, f"reader {r.name}: {exc.message}", exc.fix or "")]
    entry["last_committed_batch"] = batch.batch
    for source in batch.kafka().values():
        for topic, parts in source.items():
            entry["positions"].setdefault(topic, {}).update({str(p): o for p, o in sorted(parts.items())})
    unselected = sorted(t for t in entry["positions"] if not plan.spec.topics.matches(t))
    if unselected:
        return entry, [(r.name, unselected_text(r, unselected), f"select {', '.join(unselected)} in topics.include")]
    return entry, []


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


def _refuse_without_kafka(r: Reader, ck: sc.Checkpoint, folder: object) -> None:
    """A last committed batch with no line in the Kafka source's form has nothing to translate: a query that reads
    no Kafka topic, or offsets not as Spark writes them (a partition's offset that is not a whole number). Moving
    it would write a batch that resumes nowhere in particular, and the canary would check no partition."""
    commits = ck.commits()
    if not commits:
        return  # last_committed names what is missing
    last = ck.committed(commits[-1])
    if not last.kafka():
        lines = "; ".join(line[:120] for line in last.sources) or "none"
        raise Refused(f"reader {r.name}: batch {last.batch} of {folder} holds no Kafka source position (its source "
                      f"lines: {lines}), so there is nothing to translate",
                      fix="point the reader at the checkpoint of a query that reads the selected topics with Spark's "
                          'Kafka source (its offsets lines are {"topic":{"partition":offset}}, whole numbers)')


def move(plan: Plan, r: Reader, direction: st.Direction, mode: Mode,
         timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Translate a Spark checkpoint's positions; write batch N+1 when `mode` is execute."""
    folder = store.folder(plan, r.checkpoint)
    if not folder.exists():
        raise UsageError(f"reader {r.name}: checkpoint folder {folder} not found",
                         fix="set the reader's checkpoint to the query's checkpointLocation")
    ck = sc.Checkpoint(folder)
    head: dict[str, Any] = {"reader": r.name, "kind": r.kind, "direction": direction, "location": str(folder),
                            "mode": mode, "written": []}
    done = journal.last(plan, str(folder))
    journal.refuse_back_first(plan, r, done, direction)
    commits = ck.commits()
    if done is not None and done["direction"] == direction and commits and \
            (done["batch"] in commits or done["batch"] < commits[0]):
        # The last move already took this query to the target cluster (its batch is there, or Spark has
        # since purged it; removing it undoes the move): translating its positions again would move
        # positions that are already there. Nothing to do (a re-run after a crash, or twice).
        return {**head, "last_committed_batch": commits[-1] if commits else None, "next_batch": done["batch"],
                "positions": done["positions"], "already_moved": True}
    _refuse_without_kafka(r, ck, folder)
    mapped = Mapped(plan, direction, timeout)
    base, batch, resuming = _base(ck, mapped, stateful_ok=mode == "starting-offsets")
    mapped.refuse_unmapped(r, f"batch {base.batch} of {folder}")
    rows = sorted(mapped.rows, key=lambda row: (row["topic"], row["partition"]))
    out: dict[str, Any] = {**head, "last_committed_batch": base.batch, "next_batch": batch.batch, "positions": rows,
                           "already_moved": False}
    if mode == "starting-offsets":
        out["starting_offsets"] = sc.starting_offsets(batch)
        return out
    out["canary"] = mapped.canary(rows)  # the record the reader reads next is the same record on both clusters
    if mode == "dry-run":
        return out
    mapped.refuse_canary(r, out)
    sink = None if r.sink is None else store.folder(plan, r.sink).child("_spark_metadata")
    out["written"] = sc.write(ck, batch, sink)
    out["resumed"] = resuming
    journal.record(plan, {"at": iso_z(), "reader": r.name, "kind": r.kind, "direction": direction,
                          "location": str(folder), "phase": "done", "from_batch": base.batch, "batch": batch.batch,
                          "positions": rows, "written": out["written"],
                          "undo": "remove the written files: the query then resumes from batch "
                                  f"{base.batch}'s positions on the source cluster"})
    return out


def started(plan: Plan, r: Reader, side: ClusterSide, timeout: float) -> None:
    """Nothing to ask after its start hook: the files the move wrote are where it resumes."""
    return None


# What the switch, plan check, status and `cutover readers move` say of a reader of this kind (ReaderKind).

def on_server(r: Reader) -> bool:
    """Its position is read from a server (plan check --offline reads none): a checkpoint on object storage."""
    return store.remote(r.checkpoint)


def step_text(r: Reader, target: ClusterSide) -> str:
    return f"write its positions, translated exactly to the {target} cluster, into its checkpoint as the next batch"


def would_move(plan: Plan, r: Reader, target: ClusterSide, where: str, now: dict[str, Any] | None) -> str:
    at = (f" (now: batch {now['last_committed_batch']} committed, next records at {now['positions']})"
          if now is not None and now["last_committed_batch"] is not None else "")
    return (f"read the last committed batch of {where}{at}, translate its Kafka positions exactly to the {target} "
            "cluster, check the next record is the same on both, and add it as the next committed batch")


def started_check(r: Reader, side: ClusterSide) -> str | None:
    return None


def hook_context(plan: Plan, r: Reader) -> dict[str, str | None]:
    return {}


def position_line(e: dict[str, Any]) -> str:
    where = ", ".join(f"{t} {parts}" for t, parts in e["positions"].items())
    return (f"reader {e['reader']} ({e['kind']}): " + (
        f"batch {e['last_committed_batch']} committed, next records at {where or 'no Kafka source'}"
        if e["last_committed_batch"] is not None else "no position (see the findings)")
        + (f"; batch {e['in_flight']} in flight (the query runs, or stopped in the middle of it)"
           if e.get("in_flight") is not None else ""))


def status_text(e: dict[str, Any]) -> str:
    move = e["last_move"]
    where = ", ".join(f"{t} {parts}" for t, parts in e["positions"].items()) or "no position"
    return (f"batch {e['last_committed_batch']}: {where}"
            + ("" if move is None else f"; last moved {move['direction']} at {move['at']} (batch "
               f"{move['from_batch']} -> {move['batch']}: {moved_pairs(move['positions'])})"))


def moved_text(head: str, m: dict[str, Any]) -> str:
    from cutover.readers import canary

    lines = [f"{head}: checkpoint {m['location']}",
             f"  last committed batch {m['last_committed_batch']}; cutover "
             + ("adds" if m["mode"] == "execute" else "would add") + f" batch {m['next_batch']}"]
    lines.append(positions_table(m["positions"]))
    lines += canary.summary_lines(m)
    if m["mode"] == "starting-offsets":
        lines.append("startingOffsets for a query on a new checkpoint, one per Kafka source (by position):")
        lines += [f"  source {i}: {text}" for i, text in sorted(m["starting_offsets"].items())]
    elif m["mode"] == "dry-run":
        lines.append("dry run: nothing written (--execute writes it)")
    else:
        lines.append(("finished an interrupted translation: " if m.get("resumed") else "wrote: ")
                     + (", ".join(m["written"]) or "nothing new"))
    return "\n".join(lines)


if TYPE_CHECKING:  # mypy checks this module against the protocol of every reader kind (readers/kind.py)
    from cutover.readers import spark as _this
    from cutover.readers.kind import ReaderKind

    _checked: ReaderKind = _this
