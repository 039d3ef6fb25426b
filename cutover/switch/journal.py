"""The switch journal: an append-only, fsynced record of every promote and rollback step.

One directory per plan (`switch.journal_dir/<plan name>/`) holds `journal.jsonl` and
`lock`. Every entry is one JSON line, written and fsynced before the switch moves on,
so a re-run after a crash knows exactly which steps finished. A torn last line (the
machine died mid-write) is ignored by readers and cut back (durably) by the next
writer before it appends, so it never fuses with a new entry; any other unreadable
line is refused, never guessed at. The lock is an advisory `flock` held for the whole run: the kernel drops
it when the process dies, so a SIGKILLed run never leaves a stale lock, and a second
operator is refused with the holder's host, pid and start time.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cutover.common import fsync_dir, iso_z
from cutover.errors import CutoverError, Refused
from cutover.output import progress
from cutover.plan import Plan
from cutover.secrets import scrub

JOURNAL_VERSION = 1
Action = Literal["promote", "rollback", "complete", "cancel"]
#: The actions that end a migration: after one finishes, its record replaces the journal (archived).
ENDINGS: tuple[Action, ...] = ("complete", "cancel")
#: Steps of an ending that change nothing: an attempt that stopped in or after them alone left the
#: migration where it was (complete's final verify), so promote and rollback may still follow it.
HARMLESS = frozenset({"final-verify"})
RECORD = "completion.json"


class JournalError(CutoverError):
    """The journal cannot be read or written."""


def directory(plan: Plan) -> Path:
    return plan.journal_dir


@dataclass
class StepRecord:
    name: str
    started: float
    ended: float | None = None
    #: "done", "failed", or None while running (or when the run died in it)
    outcome: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def seconds(self) -> float | None:
        return round(self.ended - self.started, 3) if self.ended is not None else None


@dataclass
class RunRecord:
    """One invocation of promote or rollback (a re-run after a crash is a new run of the same attempt)."""

    action: Action
    run: str
    started: float
    mode: str = ""
    steps: list[StepRecord] = field(default_factory=list)
    ended: float | None = None
    outcome: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Attempt:
    """One promote or rollback from its first run to its last (re-runs after a crash or a failure included)."""

    action: Action
    #: The promote/rollback cycle it belongs to: each promote attempt begins one, its rollback ends it.
    cycle: int
    runs: list[RunRecord]

    @property
    def outcome(self) -> str:
        """done, failed, or unfinished (a run died in it, or one is running now)."""
        last = self.runs[-1].outcome
        return last if last in ("done", "failed") else "unfinished"

    def as_dict(self) -> dict[str, Any]:
        first, last = self.runs[0], self.runs[-1]
        window = last.detail.get("freeze_window") or {}
        failed = [s for s in last.steps if s.outcome == "failed"]
        return {"cycle": self.cycle, "action": self.action, "started_at": iso_z(first.started),
                "ended_at": iso_z(last.ended) if last.ended else None, "outcome": self.outcome,
                "runs": len(self.runs), "freeze_window_seconds": window.get("seconds"),
                "carried_back": last.detail.get("carried_back") if self.action == "rollback" else None,
                "past_point_of_no_return": last.detail.get("past_point_of_no_return"),
                "failed_step": failed[-1].name if failed else None, "error": failed[-1].error if failed else None}


@dataclass
class History:
    """Everything the journal says, folded."""

    runs: list[RunRecord] = field(default_factory=list)
    #: The completion record a finished complete or cancel left (the journal is archived then).
    ended: dict[str, Any] | None = None

    def attempt(self, action: Action) -> list[RunRecord]:
        """The runs of the latest attempt of `action`: since the last finished run of any action."""
        out: list[RunRecord] = []
        for r in reversed(self.runs):
            if r.outcome == "done" or r.action != action:
                break
            out.append(r)
        return list(reversed(out))

    def done_steps(self, action: Action) -> dict[str, StepRecord]:
        """Steps finished in the latest unfinished attempt of `action` (what a re-run skips)."""
        return {s.name: s for r in self.attempt(action) for s in r.steps if s.outcome == "done"}

    def started_steps(self, action: Action) -> set[str]:
        return {s.name for r in self.attempt(action) for s in r.steps}

    def promote_attempt(self) -> list[RunRecord]:
        """The runs of the promote that a rollback would undo (since the last finished rollback)."""
        out: list[RunRecord] = []
        for r in reversed(self.runs):
            if r.action in ENDINGS:
                continue
            if r.action == "rollback":
                if r.outcome == "done":
                    break
                continue
            if r.outcome == "done" and out:
                break
            out.append(r)
        return list(reversed(out))

    def latest_attempt(self, action: Action) -> list[RunRecord]:
        """The runs of the latest attempt of `action` (finished or not; a rollback's or an ending's)."""
        out: list[RunRecord] = []
        for r in reversed(self.runs):
            if out and (r.action != action or r.outcome == "done"):
                break
            if r.action == action:
                out.append(r)
            elif r.action not in ENDINGS or any(s.name not in HARMLESS for s in r.steps if s.outcome == "done"):
                break  # another action since, one that changed something
        return list(reversed(out))

    def runs_of(self, action: Action) -> list[RunRecord]:
        return self.promote_attempt() if action == "promote" else self.latest_attempt(action)

    def _switching(self) -> list[RunRecord]:
        """The runs without the trailing endings that changed nothing (a complete stopped at its final verify)."""
        runs = list(self.runs)
        while runs and runs[-1].action in ENDINGS and runs[-1].outcome != "done" and not any(
                s.name not in HARMLESS for r in self.latest_attempt(runs[-1].action) for s in r.steps
                if s.outcome == "done"):
            if runs[-1].outcome is None:  # running now, or died: unfinished either way
                break
            runs.pop()
        return runs

    @property
    def last(self) -> RunRecord | None:
        return self.runs[-1] if self.runs else None

    def last_finished(self, action: Action | None = None) -> RunRecord | None:
        for r in reversed(self.runs):
            if r.outcome == "done" and (action is None or r.action == action):
                return r
        return None

    def attempts(self) -> list[Attempt]:
        """Every promote and rollback, oldest first: a run joins the attempt before it unless that one
        finished or was of the other action."""
        out: list[Attempt] = []
        cycle = 0
        for r in self.runs:
            if out and out[-1].action == r.action and out[-1].runs[-1].outcome != "done":
                out[-1].runs.append(r)
                continue
            cycle += r.action == "promote"
            out.append(Attempt(r.action, max(cycle, 1), [r]))
        return out

    def phase(self) -> str:
        """ready, promoting, promoted, rolling-back, rolled-back, completing, completed, cancelling or cancelled."""
        if self.ended is not None and not self.runs:
            return "completed" if self.ended.get("action") == "complete" else "cancelled"
        runs = self._switching()
        last = runs[-1] if runs else None
        if last is None:
            return "ready"
        done = {"promote": "promoted", "rollback": "rolled-back", "complete": "completed", "cancel": "cancelled"}
        doing = {"promote": "promoting", "rollback": "rolling-back", "complete": "completing", "cancel": "cancelling"}
        return (done if last.outcome == "done" else doing)[last.action]


#: Every entry has these; each event adds its own.
_FIELDS = frozenset({"v", "event", "run", "t"})


def read(folder: Path) -> History:
    path = folder / "journal.jsonl"
    history = History(ended=read_record(folder))
    if not path.exists():
        return history
    data = path.read_bytes()
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # the last line, not newline-terminated: torn by a crash mid-write
                break
            raise JournalError(f"{path}:{i + 1}: not a journal entry (not JSON)",
                               fix="restore the journal from a copy; cutover never rewrites it") from None
        if isinstance(entry, dict) and "v" in entry and entry["v"] != JOURNAL_VERSION:
            raise JournalError(f"{path}:{i + 1}: journal entry version {entry['v']}; this cutover reads "
                               f"version {JOURNAL_VERSION}", fix="use the cutover version that wrote it")
        missing = _FIELDS - set(entry) if isinstance(entry, dict) else _FIELDS
        if missing:  # JSON, but not as cutover writes an entry: edited or written by something else
            raise JournalError(f"{path}:{i + 1}: not a journal entry (JSON without "
                               f"{', '.join(sorted(missing))})",
                               fix="restore the journal from a copy; cutover never rewrites it") from None
        try:
            _fold(history, entry)
        except (KeyError, TypeError, ValueError):
            raise JournalError(f"{path}:{i + 1}: not a journal entry (a {entry['event']!r} entry without the "
                               "fields cutover writes with it)",
                               fix="restore the journal from a copy; cutover never rewrites it") from None
    return history


def read_record(folder: Path) -> dict[str, Any] | None:
    """The completion record of a finished complete or cancel (None when there is none)."""
    path = folder / RECORD
    try:
        record: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise JournalError(f"{path}: not a completion record ({exc})",
                           fix="restore it from a copy; cutover writes it once, atomically") from None
    return record


def close(folder: Path, record: dict[str, Any]) -> Path:
    """Write the completion record (atomically, fsynced), then archive the journal beside it: from then on
    the record says where the migration ended. Idempotent: a re-run after a crash between the two finishes
    the move. Returns the archived journal's path."""
    archive = folder / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    target = archive / str(record["journal"])
    if not (folder / RECORD).exists():
        tmp = folder / (RECORD + ".tmp")
        with open(tmp, "w") as f:
            f.write(scrub(json.dumps(record, indent=2, sort_keys=True, default=str)) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / RECORD)
        fsync_dir(folder)
    if (folder / "journal.jsonl").exists():
        os.replace(folder / "journal.jsonl", target)
        fsync_dir(archive)
        fsync_dir(folder)
    return target


def _fold(h: History, e: dict[str, Any]) -> None:
    kind = e["event"]
    if kind == "begin":
        h.runs.append(RunRecord(e["action"], e["run"], e["t"], e.get("mode", "")))
        return
    run = next((r for r in reversed(h.runs) if r.run == e["run"]), None)
    if run is None:
        return
    if kind == "step-start":
        run.steps.append(StepRecord(e["step"], e["t"]))
    elif kind == "step-end":
        step = next((s for s in reversed(run.steps) if s.name == e["step"]), None)
        if step is not None:
            step.ended, step.outcome = e["t"], e["outcome"]
            step.detail, step.error = e.get("detail", {}), e.get("error")
    elif kind == "end":
        run.ended, run.outcome, run.detail = e["t"], e["outcome"], e.get("detail", {})


class Journal:
    """The writer: holds the lock, appends fsynced entries. Use `Journal.open` as a context manager."""

    def __init__(self, folder: Path, lock_fd: int) -> None:
        self.folder, self._lock_fd = folder, lock_fd
        self.path = folder / "journal.jsonl"
        #: Everything the journal says, kept folded as entries are appended (read once, under the lock).
        self.history = History()

    @classmethod
    @contextmanager
    def open(cls, folder: Path, what: str) -> Iterator[Journal]:
        fd = acquire(folder, what)
        try:
            j = cls(folder, fd)
            j._cut_torn_tail()
            j.history = read(folder)
            yield j
        finally:
            os.close(fd)

    def _cut_torn_tail(self) -> None:
        """Truncate a last line that a crash left without its newline (under the lock, fsynced)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if not data or data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        try:
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, keep)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise JournalError(f"cannot cut the torn last line of the switch journal {self.path}: {exc.strerror}",
                               fix="fix permissions, then re-run to continue") from None
        progress(f"switch journal {self.path}: cut a torn last line ({len(data) - keep} bytes) left by a crash")

    def append(self, event: str, **body: Any) -> None:
        entry = {"v": JOURNAL_VERSION, "t": round(time.time(), 3), "event": event, **body}
        line = (scrub(json.dumps(entry, sort_keys=True, default=str)) + "\n").encode()
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        except OSError as exc:
            raise JournalError(f"cannot write the switch journal {self.path}: {exc.strerror}",
                               fix="free space or fix permissions, then re-run to continue") from None
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.folder)
        _fold(self.history, json.loads(line))


class Locked(Refused):
    """Another promote, rollback, complete or cancel of this plan holds the lock (the not-running check)."""


def acquire(folder: Path, what: str) -> int:
    """Take the plan's switch lock (non-blocking); refuse with who holds it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise JournalError(f"cannot open the switch lock in {folder}: {exc.strerror}",
                           fix="make switch.journal_dir writable") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            raise Locked(f"another promote or rollback is running for this plan: {holder}",
                          fix="wait for it to finish (cutover status shows it), or stop it") from None
        raise
    owner = json.dumps({"what": what, "host": socket.gethostname(), "pid": os.getpid(),
                        "since": iso_z()})
    os.ftruncate(fd, 0)
    os.pwrite(fd, owner.encode(), 0)
    return fd


def holder(folder: Path) -> str | None:
    """Who holds the lock now (None when nobody does). Never blocks, never takes it for long."""
    path = folder / "lock"
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


