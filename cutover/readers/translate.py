"""`cutover readers translate`: a declared reader's positions moved through the mirror's exact map.

Each kind has its module (spark: a Structured Streaming checkpoint; streams: a Kafka Streams
application's state folder); this one picks it, and gathers every reader's position for `plan
check`, `status` and the switch's preconditions. Each execution is recorded, fsynced, in the
plan's journal folder (`readers.jsonl`, readers.journal).
"""

from __future__ import annotations

import importlib
from typing import Any, cast

from cutover.errors import UsageError
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import state as st
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import Reader
from cutover.plan.reader_kinds import READER_KINDS
from cutover.readers import journal
from cutover.readers.kind import Mode, Problem, ReaderKind

__all__ = ["Mode", "kind", "move", "positions", "reader", "status"]



def kind(name: str) -> ReaderKind:
    """A reader kind's module (the plan's `kind:`), as plan/reader_kinds.py's table names it: a ReaderKind
    (readers/kind.py; each kind's module checks itself against it for mypy)."""
    return cast(ReaderKind, importlib.import_module(READER_KINDS[name].module))


def reader(plan: Plan, name: str) -> Reader:
    """The plan's reader of that name; a usage error naming the ones declared."""
    for r in plan.spec.readers:
        if r.name == name:
            return r
    declared = ", ".join(r.name for r in plan.spec.readers) or "none"
    raise UsageError(f"{plan.file}: no reader named {name} (readers declared: {declared})",
                     fix="name one of the plan's readers, or declare it under readers: (name, kind, ...)")


def positions(plan: Plan, reach: bool = True) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Each declared reader's current position (what `plan check`, `status` and the dry run show), and
    what a move would refuse whatever the reader does: (reader, problem, fix). Reads the readers' files
    (local, or a checkpoint on object storage) and the Connect workers' offsets topics; without `reach`
    (`plan check --offline`), only local files: the others are listed as not read."""
    out: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for r in plan.spec.readers:
        if not reach and kind(r.kind).on_server(r):
            out.append({"reader": r.name, "kind": r.kind, "location": r.checkpoint or r.old_url,
                        "not_read": "on a server: --offline connects to nothing"})
            continue
        entry, found = kind(r.kind).position(plan, r)
        out.append(entry)
        problems += found
    return out, problems


def move(plan: Plan, r: Reader, direction: st.Direction, mode: Mode,
         timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Move one reader's positions (`mode` execute writes; dry-run and starting-offsets only say)."""
    moved: dict[str, Any] = kind(r.kind).move(plan, r, direction, mode, timeout)
    return moved


def started(plan: Plan, r: Reader, side: ClusterSide, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any] | None:
    """After a reader's start hook: whether it resumed where it was moved to (connect: each source connector's
    offsets on the worker, through KIP-875); None for the kinds whose files are their proof."""
    return kind(r.kind).started(plan, r, side, timeout)


def status(plan: Plan) -> list[dict[str, Any]]:
    """Each declared reader for `cutover status`: its position now, the cluster that position is on,
    and its last move."""
    out = []
    recorded = [m for m in journal.moves(plan) if m.get("phase") == "done"]  # read once for every reader
    for entry in positions(plan)[0]:
        moves = [m for m in recorded if m.get("location") == entry["location"]]
        last = moves[-1] if moves else None
        out.append({**entry, "on": journal.side(last), "last_move": None if last is None else {
            k: last.get(k) for k in ("at", "direction", "from_batch", "batch", "positions", "savepoint")}})
    return out
