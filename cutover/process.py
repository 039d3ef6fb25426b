"""Background cutover processes: start one detached, wait until it says it is ready, stop it.

Shared by the switch's reverse mirror and the drills' background mirror, shadow and
switch runs. A process runs in its own session (a signal to its group reaches a Spark
JVM it started), appends its output to a log, and is ready when its condition holds
(a ready file, a first commit); if it exits first, the error quotes the end of its log.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cutover.errors import CutoverError


def spawn(args: list[str], log: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """`cutover ARGS` in the background, in its own session, stdout and stderr appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "cutover", *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=out, start_new_session=True, cwd=str(cwd) if cwd else None)


def wait_ready(proc: subprocess.Popen[bytes], ready: Callable[[], bool], log: Path, timeout: float,
               what: str, every: float = 0.2) -> None:
    """Wait until `ready()`; fail, quoting the log's end, if the process exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise CutoverError(f"{what} exited ({proc.returncode}) before it was ready; its log {log} ends:\n"
                               f"{tail(log)}", fix="fix what the log says, then run the same command again")
        if time.monotonic() > deadline:
            proc.kill()
            raise CutoverError(f"{what} was not ready after {timeout:.0f}s; its log {log} ends:\n{tail(log)}",
                               fix="read the log for what it waits on; on a loaded machine, run the same command "
                                   "again")
        time.sleep(every)


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join("    " + t for t in path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "    (no log)"
