"""The reverse mirror promote leaves running: a detached `cutover mirror --reverse` process.

Its pid and log live in the journal folder. It only keeps the old cluster close behind
the new one; nothing depends on it surviving: its progress lives in the old cluster,
and rollback drains the reverse mirror in-process (fencing this one) before it moves
anything. In production run `cutover mirror --reverse` under a supervisor as well.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from cutover import process
from cutover.output import progress
from cutover.plan import Plan
from cutover.switch import journal

READY_TIMEOUT = 120.0


def _files(plan: Plan) -> tuple[Path, Path, Path]:
    folder = journal.directory(plan)
    return folder / "reverse-mirror.pid", folder / "reverse-mirror.log", folder / "reverse-mirror.ready"


def running(plan: Plan) -> int | None:
    """The pid of this plan's reverse mirror if it is alive."""
    pid_file, _log, _ready = _files(plan)
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if b"--reverse" in cmdline and _plan_path(plan).encode() in cmdline else None


def _plan_path(plan: Plan) -> str:
    return str(Path(plan.file).resolve())


def start(plan: Plan) -> dict[str, Any]:
    pid = running(plan)
    if pid is not None:
        return {"pid": pid, "already_running": True}
    pid_file, log_file, ready = _files(plan)
    ready.unlink(missing_ok=True)
    proc = process.spawn(["mirror", "--plan", _plan_path(plan), "--reverse", "--ready-file", str(ready)], log_file,
                         cwd=plan.base_dir)
    pid_file.write_text(f"{proc.pid}\n")
    process.wait_ready(proc, ready.exists, log_file, READY_TIMEOUT, "the reverse mirror")
    progress(f"  reverse mirror running (pid {proc.pid}, log {log_file})")
    return {"pid": proc.pid, "log": str(log_file)}


def stop(plan: Plan, timeout: float = 60.0) -> dict[str, Any]:
    """SIGTERM (it finishes its transaction), then SIGKILL if it does not exit in time."""
    pid = running(plan)
    if pid is None:
        return {"stopped": None}
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.2)
    return {"stopped": pid}


def _alive(pid: int) -> bool:
    try:
        waited, _status = os.waitpid(pid, os.WNOHANG)  # our child: reap it
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()
