"""Hooks: the user's executables, run at switch events with their context in CUTOVER_* variables.

A hook is a command line from the plan (`hooks.<event>`); its first word is resolved
relative to the plan's folder when it names a path. It inherits the environment plus
CUTOVER_* variables (never a secret: only names, phases and bootstrap servers). Its
output goes to stderr, line by line, prefixed with the event. A non-zero exit, or
running past `switch.hook_timeout`, stops the step with the hook's last lines.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import Any

from cutover.errors import CutoverError, UsageError
from cutover.output import progress
from cutover.plan import Plan


class HookFailed(CutoverError):
    """A hook exited non-zero or ran too long."""


def command(plan: Plan, event: str) -> list[str] | None:
    line = plan.spec.hooks.get(event)
    if not line:
        return None
    argv = shlex.split(line)
    if "/" in argv[0] and not os.path.isabs(argv[0]):
        argv[0] = str((plan.base_dir / argv[0]).resolve())
    return argv


def check(plan: Plan) -> list[str]:
    """Problems with the configured hooks (missing, not executable, not on PATH), for
    preconditions: the same findings `plan check` reports."""
    from cutover.plan import readiness

    return [f"{f.problem} (fix: {f.fix})" for f in readiness.hook_findings(plan)]


def run(plan: Plan, event: str, env: dict[str, str], timeout: float) -> dict[str, Any] | None:
    """Run the hook for `event` if the plan has one. Returns what happened, for the journal."""
    argv = command(plan, event)
    if argv is None:
        return None
    progress(f"  hook {event}: {shlex.join(argv)}")
    tail: deque[str] = deque(maxlen=20)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env={**os.environ, **env}, cwd=str(plan.base_dir))
    except OSError as exc:
        raise UsageError(f"hook {event}: cannot run {argv[0]}: {exc.strerror}",
                         fix=f"fix hooks.{event} in {plan.file}") from None
    reader = threading.Thread(target=_relay, args=(proc, event, tail), daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise HookFailed(f"hook {event} ({argv[0]}) still running after {timeout:.0f}s; it was killed",
                         fix="make the hook finish, or raise switch.hook_timeout") from None
    reader.join(5)
    if code != 0:
        last = "\n".join(f"    {t}" for t in tail)
        raise HookFailed(f"hook {event} ({argv[0]}) exited {code}" + (f"; its last lines:\n{last}" if last else ""),
                         fix="fix what the hook reports, then re-run to continue from this step")
    return {"hook": event, "exit": code}


def _relay(proc: subprocess.Popen[str], event: str, tail: deque[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail.append(line)
        progress(f"    [{event}] {line}")


def environment(plan: Plan, **context: str | None) -> dict[str, str]:
    """CUTOVER_* variables: the plan, the clusters' bootstrap servers, and the given context. CUTOVER_PLAN is the
    plan's file, as the CLI reads it, so a cutover command a hook runs finds the plan without --plan."""
    path = str(Path(plan.file).resolve())
    env = {"CUTOVER_PLAN": path, "CUTOVER_PLAN_FILE": path, "CUTOVER_PLAN_NAME": plan.name,
           "CUTOVER_OLD_BOOTSTRAP": plan.cluster("old").get("bootstrap.servers", ""),
           "CUTOVER_NEW_BOOTSTRAP": plan.cluster("new").get("bootstrap.servers", "")}
    env.update({f"CUTOVER_{k.upper()}": v for k, v in context.items() if v is not None})
    return env
