"""The record of every reader move: `readers.jsonl` in the plan's journal folder, one JSON line per
event, fsynced. A move that changes several files is recorded as `planned` (what each file holds
before and after) before the first change and `done` after the last, so a move cut short is
finished, never done twice. Each entry names the reader's `location`: its checkpoint or state folder.
"""

from __future__ import annotations

import json
import os
from typing import Any

from cutover.errors import Refused
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import Reader


def moves(plan: Plan) -> list[dict[str, Any]]:
    """Every recorded entry, oldest first (a torn last line: that execution did not finish recording)."""
    from cutover.common import json_lines

    return json_lines(plan.journal_dir / "readers.jsonl")


def last(plan: Plan, location: str) -> dict[str, Any] | None:
    """The newest entry for this location."""
    found = None
    for entry in moves(plan):
        if entry.get("location") == location:
            found = entry
    return found


def side(last: dict[str, Any] | None) -> ClusterSide:
    """The cluster a reader is on after its last recorded move (old before any)."""
    return "old" if last is None or last.get("direction") == "reverse" else "new"


def refuse_back_first(plan: Plan, r: Reader, last: dict[str, Any] | None, direction: str) -> None:
    """--reverse before any recorded move: the reader's positions are still the old cluster's, and read as the
    new cluster's they would be translated to other records (no canary can tell: the map is exact for both)."""
    if direction == "reverse" and last is None:
        raise Refused(f"reader {r.name}: --reverse moves a reader back from the new cluster, and no move of it there "
                      f"is recorded ({plan.journal_dir / 'readers.jsonl'}): its positions are the old "
                      "cluster's",
                      fix="drop --reverse: promote (or readers translate --execute) moves it to the new cluster, "
                          "and rollback back; nothing was written")


def record(plan: Plan, entry: dict[str, Any]) -> None:
    folder = plan.journal_dir
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "readers.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
