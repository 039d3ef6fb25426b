"""The reverse mirror promote leaves running: a detached `cutover mirror --reverse` process.

Promote arms it before the freeze: the process starts, fences the reverse direction's
older instances, loads its own state, then waits for a go file, copying nothing and
reading nothing of the forward direction's progress. Inside the freeze window,
start-reverse-mirror only writes the go file. The process then reads the forward map and
the old cluster's ends (the drain's outcome, which nothing changes after the freeze) and
takes its partitions while the clients switch; reverse-mirror-running, after resume,
waits until it has. An armed process whose promote goes away (refused, killed) exits
without copying.

Its pid and log live in the journal folder. It only keeps the old cluster close behind
the new one; nothing depends on it surviving: its progress lives in the old cluster,
and rollback drains the reverse mirror in-process (fencing this one) before it moves
anything. In production run `cutover mirror --reverse` under a supervisor as well.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from cutover import process
from cutover.output import progress
from cutover.plan import Plan
from cutover.switch import journal

READY_TIMEOUT = 120.0


GO_POLL = 0.05
#: The armed process this promote spawned, by plan file: start() hands the go to it.
_armed: dict[str, subprocess.Popen[bytes]] = {}
#: The process start() let go (or spawned) and when, by plan file: confirm() waits until it is ready.
_going: dict[str, tuple[subprocess.Popen[bytes], float]] = {}


def _files(plan: Plan) -> tuple[Path, Path, Path]:
    folder = journal.directory(plan)
    return folder / "reverse-mirror.pid", folder / "reverse-mirror.log", folder / "reverse-mirror.ready"


def _gate_files(plan: Plan) -> tuple[Path, Path]:
    folder = journal.directory(plan)
    return folder / "reverse-mirror.armed", folder / "reverse-mirror.go"


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


def arm(plan: Plan) -> dict[str, Any]:
    """Spawn the reverse mirror armed (before the freeze) and wait until it waits for the go."""
    pid = running(plan)
    if pid is not None:
        return {"pid": pid, "already_running": True}
    pid_file, log_file, ready = _files(plan)
    armed, go = _gate_files(plan)
    for f in (ready, armed, go):
        f.unlink(missing_ok=True)
    proc = process.spawn(["mirror", "--plan", _plan_path(plan), "--reverse", "--started-by", "promote", "--ready-file",
                          str(ready), "--armed-file", str(armed), "--go-file", str(go), "--armed-by", str(os.getpid())],
                         log_file, cwd=plan.base_dir)
    pid_file.write_text(f"{proc.pid}\n")
    process.wait_ready(proc, armed.exists, log_file, READY_TIMEOUT, "the reverse mirror (armed)")
    _armed[_plan_path(plan)] = proc
    progress(f"  reverse mirror armed (pid {proc.pid}, log {log_file}): it copies nothing until the switch")
    return {"pid": proc.pid, "log": str(log_file), "armed": True}


def await_go(armed: Path, go: Path, parent: int, stop: threading.Event) -> bool:
    """In the armed process: True once the go file exists; False if the run is called off first (a signal,
    or the promote that armed it is gone)."""
    armed.touch()
    progress(f"armed: waiting for {go} (from cutover promote, pid {parent})")
    while not go.exists():
        if stop.is_set() or os.getppid() != parent:
            progress("armed reverse mirror called off before the switch: exiting, nothing copied")
            return False
        time.sleep(GO_POLL)
    return True


def start(plan: Plan, wait: bool = True) -> dict[str, Any]:
    """Give the armed process its go (or, when none is armed, spawn one). With `wait`, until it is ready;
    without, `confirm` waits for it later: what it reads first (the drained forward map, the old cluster's
    ends) stays as the freeze left it, so the clients need not wait for it."""
    pid_file, log_file, ready = _files(plan)
    armed, go = _gate_files(plan)
    proc = _armed.pop(_plan_path(plan), None)
    pid = running(plan)
    if proc is not None and pid == proc.pid and not ready.exists():
        go.touch()
        _going[_plan_path(plan)] = (proc, time.monotonic())
        detail = {"pid": proc.pid, "log": str(log_file), "armed_before_freeze": True}
        return {**detail, **confirm(plan)} if wait else detail
    if pid is not None and not ready.exists():  # armed by a promote that is gone: it is exiting or must
        stop(plan)
    elif pid is not None:
        return {"pid": pid, "already_running": True}
    for f in (ready, armed, go):
        f.unlink(missing_ok=True)
    proc = process.spawn(["mirror", "--plan", _plan_path(plan), "--reverse", "--started-by", "promote", "--ready-file",
                          str(ready)], log_file, cwd=plan.base_dir)
    pid_file.write_text(f"{proc.pid}\n")
    _going[_plan_path(plan)] = (proc, time.monotonic())
    detail = {"pid": proc.pid, "log": str(log_file)}
    return {**detail, **confirm(plan)} if wait else detail


def confirm(plan: Plan) -> dict[str, Any]:
    """Wait until the reverse mirror this process started is ready (owns its partitions and copies); in a run
    resumed after that start, start it if it is not running."""
    _pid, log_file, ready = _files(plan)
    going = _going.pop(_plan_path(plan), None)
    if going is None:  # a run resumed after start-reverse-mirror: the process it let go may still be starting
        _armed_file, go = _gate_files(plan)
        deadline = time.monotonic() + READY_TIMEOUT
        while go.exists() and not ready.exists() and running(plan) is not None and time.monotonic() < deadline:
            time.sleep(GO_POLL)
        pid = running(plan)
        if pid is not None and ready.exists():
            return {"pid": pid, "ready": True}
        return start(plan, wait=True)
    proc, since = going
    process.wait_ready(proc, ready.exists, log_file, READY_TIMEOUT, "the reverse mirror", every=GO_POLL)
    took = round(time.monotonic() - since, 3)
    progress(f"  reverse mirror running (pid {proc.pid}, log {log_file}; {took:.1f}s from go to ready)")
    return {"pid": proc.pid, "ready": True, "go_to_ready_seconds": took}


def disarm(plan: Plan) -> None:
    """The promote that armed the reverse mirror stopped before saying go: stop the armed process (it would
    exit anyway once this process is gone, but a process that goes on, a drill's, would keep it)."""
    proc = _armed.pop(_plan_path(plan), None)
    if proc is not None and proc.poll() is None and running(plan) == proc.pid:
        stop(plan)


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
