"""The routing file: which cluster clients use now. Written atomically; only the switch writes it.

Contents: {"active": "old"|"new", "bootstrap.servers": ..., "plan": ..., "changed_at": ...,
"run": ...}. Only bootstrap servers, never credentials: clients keep their own.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from cutover.errors import CutoverError


def path(plan: Any) -> Path | None:
    return plan.base_dir / plan.spec.routing.file if plan.spec.routing else None


def read(plan: Any) -> dict[str, Any] | None:
    p = path(plan)
    if p is None or not p.exists():
        return None
    try:
        data: dict[str, Any] = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CutoverError(f"routing file {p} cannot be read: {exc}",
                           fix="restore it (cutover status shows the active side) or delete it") from None
    return data


def active(plan: Any) -> str:
    """The side clients use: the routing file's, else old (before any switch there is no file)."""
    data = read(plan)
    return str(data["active"]) if data else "old"


def write(plan: Any, side: str, run: str) -> dict[str, Any] | None:
    """Point the routing file at `side` (write to a temporary file, fsync, rename, fsync the folder)."""
    p = path(plan)
    if p is None:
        return None
    body = {"active": side, "bootstrap.servers": plan.cluster(side).get("bootstrap.servers", ""),
            "plan": plan.name, "changed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "run": run}
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    with tmp.open("w") as f:
        json.dump(body, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, p)
    fd = os.open(p.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return body
