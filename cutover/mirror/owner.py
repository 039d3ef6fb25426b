"""Who runs a mirror's shard: the owner record a mirror process writes when it takes the shard.

Fencing by transactional id makes the newest process of a shard the only one that can write,
silently: the one fenced learns it at its next transaction, and nobody else learns it at all.
The owner record says which process holds the shard now (host, pid, when it started, whether
promote, a switch's drain or someone by hand started it, and whom it took the shard from). It
lives in the mirror's own state on the target cluster, like everything that must outlive a
process, and it is written inside the process's transactions: its first one (the record) and,
on a clean end, its last one (the end). A fenced process can write nothing more, so it never
overwrites its successor's record. `mirror status` and `cutover status` show it; a process that
takes a shard over names the one it fences, and the fenced one names its successor.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from cutover.common import iso_seconds


def mine(started_by: str, drain: bool, took_over: dict[str, Any] | None) -> dict[str, Any]:
    """This process's owner record, as it takes a shard. `started_by`: "hand" (an operator, a service unit),
    "promote" (the reverse mirror promote starts), or the switch action whose in-process drain this is (`drain`);
    `took_over`: the record of the process it fenced."""
    prior = None if took_over is None else {k: took_over.get(k) for k in ("host", "pid", "started_at", "started_by",
                                                                          "drain")}
    return {"host": socket.gethostname(), "pid": os.getpid(), "started_at": time.time(), "started_by": started_by,
            "drain": drain, "took_over": prior, "ended_at": None, "ended": None}


def ended(record: dict[str, Any], how: str) -> dict[str, Any]:
    """The record once its process ended cleanly (`how`: "caught up" or "stopped")."""
    return {**record, "ended_at": time.time(), "ended": how}


def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two records are of one process (a record and its end are)."""
    return a is not None and b is not None and all(a.get(k) == b.get(k) for k in ("host", "pid", "started_at"))


def running(record: dict[str, Any] | None) -> bool:
    """Whether a record's process may still hold its shard: it has not recorded an end, and it is not a process
    of this host that is gone. A switch's drain records no end (its last transaction would lengthen the freeze
    window): it is taken as running only while it is seen to run."""
    if record is None or record.get("ended") is not None:
        return False
    seen = alive(record)
    return seen is True if record.get("drain") else seen is not False


def alive(record: dict[str, Any]) -> bool | None:
    """Whether the record's process runs: known on its own host only (None elsewhere). A pid the kernel gave to
    a process started after the record was written is another process."""
    if record.get("host") != socket.gethostname():
        return None
    try:
        fields = Path(f"/proc/{int(record['pid'])}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime"))
    except (OSError, ValueError, KeyError, TypeError, IndexError, StopIteration):
        return False
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: the start, in clock ticks
    return fields[0] != "Z" and started <= float(record.get("started_at") or 0) + 2  # btime is whole seconds


def starter(started_by: str | None, drain: bool | None) -> str:
    """How a process came to run, in words that follow "started": "by hand", "by cutover promote", "by cutover
    rollback's drain"."""
    by = started_by or "hand"
    if drain:
        return f"by cutover {by}'s drain"
    return "by cutover promote" if by == "promote" else "by hand"


def describe(record: dict[str, Any]) -> str:
    """"pid 123 on host h, started by hand at 2026-11-23T05:00:00+00:00"."""
    return (f"pid {record.get('pid')} on host {record.get('host')}, started "
            f"{starter(record.get('started_by'), record.get('drain'))} at {iso_seconds(record.get('started_at'))}")


def as_status(shard: str, record: dict[str, Any]) -> dict[str, Any]:
    """One shard's owner for `mirror status` and `cutover status` (-o json, documented in docs/guide/mirror.md)."""
    prior = record.get("took_over")
    return {"shard": shard, **_who(record), "alive": alive(record), "ended_at": iso_seconds(record.get("ended_at")),
            "ended": record.get("ended"), "took_over": None if prior is None else _who(prior)}


def _who(record: dict[str, Any]) -> dict[str, Any]:
    return {"host": record.get("host"), "pid": record.get("pid"), "started_at": iso_seconds(record.get("started_at")),
            "started_by": record.get("started_by"), "drain": bool(record.get("drain"))}


def render(owners: list[dict[str, Any]]) -> list[str]:
    """Lines for the status pages: per shard, who holds it, whether it runs, and whom it took the shard from."""
    lines = []
    for o in owners:
        state = (f"ended {o['ended_at']} ({o['ended']})" if o["ended"] else "running" if o["alive"] else
                 "ended with its switch step" if o["drain"] else
                 "no longer running" if o["alive"] is False else "running, as recorded (on another host)")
        prior = o["took_over"]
        took = "" if prior is None else (f"; it took the shard over from pid {prior['pid']} on host {prior['host']} "
                                         f"(started {starter(prior['started_by'], prior['drain'])})")
        lines.append(f"shard {o['shard']}: pid {o['pid']} on host {o['host']}, started "
                     f"{starter(o['started_by'], o['drain'])} at {o['started_at']}, {state}{took}")
    return lines
