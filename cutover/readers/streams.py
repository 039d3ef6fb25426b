"""kafka-streams readers: a stopped Kafka Streams application's local state, moved with its group.

Its input positions are its group's (application.id): the mirror's group sync translates them
like any group's. Its stores' positions are in its state folder (streams_state). state: rewrite
translates every positions file exactly, so the stores carry on where they were without a
restore; state: wipe sets the task folders aside (renamed, never deleted), so the stores restore
from the target's changelogs.

A move is recorded as planned (each file's text before and after, or each folder's new name)
before the first change and done after the last: a move cut short is finished by the next run
(each file is found as it was, or as planned; anything else is refused), and a move already done
is not done again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutover.common import fsync_dir, iso_z, replace_file
from cutover.errors import Refused, UsageError
from cutover.kafka import offsets
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import state as st
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import Reader
from cutover.readers import journal
from cutover.readers import streams_state as ss
from cutover.readers.kind import Mode, Problem
from cutover.readers.mapping import Mapped
from cutover.readers.store import local


def state_dir(plan: Plan, r: Reader) -> ss.StateDir:
    assert r.application_id is not None
    return ss.StateDir(local(plan, r.state_dir), r.application_id)


def position(plan: Plan, r: Reader) -> tuple[dict[str, Any], list[Problem]]:
    """Each store's changelog position (last applied) and each global store's (next to read)."""
    sd = state_dir(plan, r)
    entry: dict[str, Any] = {"reader": r.name, "kind": r.kind, "location": str(sd.root), "group": r.application_id,
                             "state": r.state, "running": None, "tasks": 0, "positions": {}}
    problems: list[Problem] = []
    if r.application_id is not None and not plan.spec.groups.matches(r.application_id):
        problems.append((r.name, f"reader {r.name}: its group {r.application_id} (the application.id) is not in the "
                         "plan's group selection: its input positions would not move",
                         f"add {r.application_id} to groups.include"))
    if not sd.root.is_dir():
        problems.append((r.name, f"reader {r.name}: no state folder {sd.root}",
                         "set state_dir to the application's state.dir (its folder is named after the "
                         "application.id); a stateless application needs no reader: its group moves"))
        return entry, problems
    entry["running"] = sd.running()
    entry["tasks"] = len(sd.tasks())
    try:
        files = sd.files()
    except ss.StateError as exc:
        if r.state == "rewrite":
            problems.append((r.name, f"reader {r.name}: {exc.message}", exc.fix or ""))
        return entry, problems
    for f in files:
        kind = "global" if f.next_offsets else ("position" if f.path.name.endswith(ss.POSITION) else "changelog")
        for topic, partition, offset in f.entries:
            entry["positions"].setdefault(topic, {})[str(partition)] = {"offset": offset, "file": kind}
    unselected = sorted(t for t in entry["positions"] if not plan.spec.topics.matches(t))
    if unselected:
        problems.append((r.name, f"reader {r.name}'s stores hold positions in {', '.join(unselected)}, which the "
                         "plan's topic selection leaves out: the mirror never copies them, so there is no map to "
                         "translate through", f"select {', '.join(unselected)} in topics.include"))
    return entry, problems


def move(plan: Plan, r: Reader, direction: st.Direction, mode: Mode,
         timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Move the application's state to the other cluster's offsets; write only when `mode` is execute."""
    if mode == "starting-offsets":
        raise UsageError(f"reader {r.name}: --starting-offsets is for spark-checkpoint readers; a Kafka Streams "
                         "application starts from its group",
                         fix="use --dry-run or --execute")
    sd = state_dir(plan, r)
    if not sd.root.is_dir():
        raise UsageError(f"reader {r.name}: no state folder {sd.root}",
                         fix="set state_dir to the application's state.dir (its folder is named after the "
                             "application.id)")
    if sd.running():
        raise Refused(f"reader {r.name}: an instance of {r.application_id} holds {sd.root / '.lock'}: it runs",
                      fix="stop it (its stop_reader hook), then run again; nothing was written")
    out: dict[str, Any] = {"reader": r.name, "kind": r.kind, "direction": direction, "location": str(sd.root),
                           "state": r.state, "mode": mode, "written": [], "set_aside": [], "positions": [],
                           "already_moved": False, "resumed": False}
    last = journal.last(plan, str(sd.root))
    journal.refuse_back_first(plan, r, last, direction)
    if last is not None and last["direction"] == direction:
        if last["phase"] == "done":  # the stores' positions are already the target's: nothing to do
            return {**out, "already_moved": True, "positions": last["positions"]}
        if mode == "execute":  # planned, cut short: finish exactly what was planned
            return _carry_out(plan, r, sd, {**out, "resumed": True, "positions": last["positions"]}, last)
    if r.state == "wipe":
        planned = _plan_wipe(sd, direction)
    else:
        planned, mapped = _plan_rewrite(plan, r, sd, direction, out, timeout)
        if mode == "execute":
            mapped.refuse_canary(r, out)
    if mode == "dry-run":
        return {**out, **planned}
    entry = {"at": iso_z(), "reader": r.name, "kind": r.kind, "direction": direction, "location": str(sd.root),
             "state": r.state, "positions": out["positions"], **planned}
    journal.record(plan, {**entry, "phase": "planned"})
    return _carry_out(plan, r, sd, out, entry)


def _plan_rewrite(plan: Plan, r: Reader, sd: ss.StateDir, direction: st.Direction, out: dict[str, Any],
                  timeout: float) -> tuple[dict[str, Any], Mapped]:
    files = sd.files()
    mapped = Mapped(plan, direction, timeout)
    _refuse_unknown(r, sd, files, mapped, timeout)
    after = [ss.moved(f, mapped) for f in files]
    mapped.refuse_unmapped(r, str(sd.root))
    rows: list[dict[str, Any]] = []
    for before, moved in zip(files, after, strict=True):
        for (topic, partition, offset), (_t, _p, target) in zip(before.entries, moved.entries, strict=True):
            rows.append({"file": str(before.path), "topic": topic, "partition": partition, "offset": offset,
                         "target": target, "last_applied": not before.next_offsets})
    out["positions"] = rows
    # The canary reads the next record each restore would read: last applied + 1 (the global store's as is).
    nexts = [{"topic": row["topic"], "partition": row["partition"],
              "source_offset": row["offset"] + 1 if row["last_applied"] else row["offset"],
              "target_offset": row["target"] + 1 if row["last_applied"] else row["target"]}
             for row in rows if row["offset"] >= 0 and not row["file"].endswith(ss.POSITION)]
    out["canary"] = mapped.canary(nexts) if nexts else []
    return {"files": {str(b.path): {"before": b.text(), "after": a.text()}
                      for b, a in zip(files, after, strict=True) if b.text() != a.text()}}, mapped


def _refuse_unknown(r: Reader, sd: ss.StateDir, files: list[ss.PositionsFile], mapped: Mapped,
                    timeout: float) -> None:
    """A task's store with an unknown position (-4) while its changelog holds records: Kafka Streams under
    exactly-once writes a task's positions only at a clean close, and -4 before (Kafka Streams 4.x), so the
    application was not closed cleanly; its store would restore from the changelog's start anyway."""
    unknown = [(f.path, t, p) for f in files if not f.next_offsets and f.path.name == ss.CHECKPOINT
               for t, p, o in f.entries if o == ss.UNKNOWN]
    if not unknown:
        return
    ends = offsets.log_offsets(mapped.route.source, {(t, p) for _f, t, p in unknown}, "high", timeout)
    written = [(f, t, p) for f, t, p in unknown if ends.get((t, p), 0) > 0]
    if written:
        where = "; ".join(f"{f.parent.name}: {t}[{p}] ({ends[(t, p)]} records)" for f, t, p in written[:5])
        raise Refused(f"reader {r.name}: {len(written)} store(s) in {sd.root} have no known position (-4) while their "
                      f"changelogs hold records ({where}): the application was not closed cleanly (under "
                      "exactly-once Kafka Streams writes a task's positions only at a clean close), so those stores "
                      "would restore from the changelog's start",
                      fix="start the application on the cluster it ran on and close it cleanly (KafkaStreams.close()), "
                          "or set the reader's state: wipe; nothing was written")


def _plan_wipe(sd: ss.StateDir, direction: st.Direction) -> dict[str, Any]:
    aside = sd.root.parent / f"{sd.root.name}.cutover-{direction}-{iso_z().replace(':', '')}"
    return {"folders": {str(d): str(aside / d.relative_to(sd.root)) for d in sd.set_aside()}}


def _carry_out(plan: Plan, r: Reader, sd: ss.StateDir, out: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    for name, texts in entry.get("files", {}).items():
        path = Path(name)
        now = path.read_text(encoding="utf-8") if path.is_file() else None
        if now == texts["after"]:
            continue
        if now != texts["before"]:
            raise Refused(f"reader {r.name}: {path} changed since this move was planned (the application ran?)",
                          fix=f"check {path}; the planned texts are in the journal's readers.jsonl")
        replace_file(path, texts["after"])
        out["written"].append(name)
    for name, aside in entry.get("folders", {}).items():
        src, dst = Path(name), Path(aside)
        if src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            fsync_dir(src.parent)
            fsync_dir(dst.parent)
            out["set_aside"].append(aside)
    journal.record(plan, {k: v for k, v in entry.items() if k not in ("files",)} | {"phase": "done",
                                                                                    "written": out["written"]})
    return out


def started(plan: Plan, r: Reader, side: ClusterSide, timeout: float) -> None:
    """Nothing to ask after its start hook: the files the move wrote are where it resumes."""
    return None


# What the switch, plan check, status and `cutover readers move` say of a reader of this kind (ReaderKind).

def on_server(r: Reader) -> bool:
    """Its position is in a local state folder: plan check --offline reads it."""
    return False


def step_text(r: Reader, target: ClusterSide) -> str:
    return (f"write its stores' positions, translated exactly to the {target} cluster, into their checkpoint files "
            "(or set its state aside)")


def would_move(plan: Plan, r: Reader, target: ClusterSide, where: str, now: dict[str, Any] | None) -> str:
    what = ("translate each store's checkpoint and position exactly" if r.state == "rewrite" else
            "set its task folders aside, so its stores restore from the changelogs")
    return f"in its state folder {where}, {what} to the {target} cluster (its group moves with the group sync)"


def started_check(r: Reader, side: ClusterSide) -> str | None:
    return None


def hook_context(plan: Plan, r: Reader) -> dict[str, str | None]:
    return {}


def position_line(e: dict[str, Any]) -> str:
    where = ", ".join(f"{t} {{{_held(parts)}}}" for t, parts in e["positions"].items())
    return (f"reader {e['reader']} (kafka-streams, state: {e['state']}): {e['tasks']} task(s) in {e['location']}"
            + (", RUNNING" if e.get("running") else "") + (f"; stores at {where}" if where else ""))


def _held(parts: dict[str, dict[str, Any]]) -> str:
    return ", ".join(f"{p}: {v['offset']}" for p, v in parts.items())


def status_text(e: dict[str, Any]) -> str:
    move = e["last_move"]
    return (f"{e['tasks']} task(s) in {e['location']}"
            + ("" if move is None else f"; last moved {move['direction']} at {move['at']}: " + (", ".join(
                f"{p['topic']}[{p['partition']}] {p['offset']} -> {p['target']}"
                for p in move["positions"]) or "state set aside")))


def moved_text(head: str, m: dict[str, Any]) -> str:
    from cutover.output import table
    from cutover.readers import canary

    lines = [f"{head}: state {m['location']} ({m['state']})"]
    if m["state"] == "wipe":
        folders = m.get("folders") or {}
        lines.append("  the stores restore from the target's changelogs; their folders are set aside:")
        lines += [f"  {src} -> {dst}" for src, dst in folders.items()] or ["  (no task folders)"]
    else:
        lines.append(table([[p["file"].rsplit("/", 2)[-2] + "/" + p["file"].rsplit("/", 1)[-1], p["topic"],
                             str(p["partition"]), str(p["offset"]), str(p["target"])] for p in m["positions"]],
                           ["file", "topic", "partition", "source", "target"]))
        lines.append("  (task checkpoints and store positions hold the last record applied; global checkpoints "
                     "the next one to read)")
        lines += canary.summary_lines(m)
    if m["mode"] == "dry-run":
        lines.append("dry run: nothing written (--execute writes it)")
    else:
        lines.append(("finished an interrupted move: " if m.get("resumed") else "done: ")
                     + (", ".join(m["written"] + m["set_aside"]) or "nothing to change"))
    return "\n".join(lines)


if TYPE_CHECKING:  # mypy checks this module against the protocol of every reader kind (readers/kind.py)
    from cutover.readers import streams as _this
    from cutover.readers.kind import ReaderKind

    _checked: ReaderKind = _this
