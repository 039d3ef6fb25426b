"""The routing file: which cluster clients use now. Written atomically; only the switch writes it.

Contents: {"active": "old"|"new", "bootstrap.servers": ..., "plan": ..., "changed_at": ...,
"run": ..., "tables": {canonical name: the table to query}}. Only bootstrap servers, never credentials:
clients keep their own. A table's readers follow `tables` (a table the new cluster's platform writes is
the one to query after promote; see switch/platform.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cutover.common import iso_z, replace_file
from cutover.errors import CutoverError
from cutover.plan import ClusterSide, Plan


def path(plan: Plan) -> Path | None:
    return plan.base_dir / plan.spec.routing.file if plan.spec.routing else None


def read(plan: Plan) -> dict[str, Any] | None:
    p = path(plan)
    if p is None or not p.exists():
        return None
    try:
        data: Any = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CutoverError(f"routing file {p} cannot be read: {exc}",
                           fix="restore it (cutover status shows the active side) or delete it") from None
    if not isinstance(data, dict) or data.get("active") not in ("old", "new"):
        found = repr(data.get("active")) if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise CutoverError(f"routing file {p}: \"active\" must be \"old\" or \"new\"; found {found}",
                           fix="only cutover writes this file: restore it from the last switch's journal (cutover "
                               "status), or delete it if no switch ever ran") from None
    return data


def active(plan: Plan) -> ClusterSide:
    """The side clients use: the routing file's, else old (before any switch there is no file)."""
    data = read(plan)
    return "new" if data and data["active"] == "new" else "old"


def tables(plan: Plan, side: ClusterSide) -> dict[str, str]:
    """Each pair's canonical name (its old table's) -> the table that holds it with `side` active: the old table,
    written on by cutover after promote, or the platform's own after promote (tables[].new_writer)."""
    return {p.old: p.new if side == "new" and p.new_writer != "shadow" else p.old for p in plan.spec.tables}


def write(plan: Plan, side: ClusterSide, run: str) -> dict[str, Any] | None:
    """Point the routing file at `side` (write to a temporary file, fsync, rename, fsync the folder)."""
    p = path(plan)
    if p is None:
        return None
    body = {"active": side, "bootstrap.servers": plan.cluster(side).get("bootstrap.servers", ""),
            "plan": plan.name, "changed_at": iso_z(), "run": run, "tables": tables(plan, side)}
    p.parent.mkdir(parents=True, exist_ok=True)
    replace_file(p, json.dumps(body, indent=2, sort_keys=True) + "\n")
    return body
