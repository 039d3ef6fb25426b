"""A Kafka Streams application's local state: its stores' positions, read and moved to the other cluster.

Kafka Streams keeps its input positions in its group (application.id), which the mirror's group
sync moves. Its local stores keep their own, in `<state.dir>/<application.id>/`:
- `<subtopology>_<partition>/.checkpoint` (also under `__<topology>__/` for named topologies): for
  each store's changelog partition, the offset of the LAST record applied to the store; restoring
  seeks to that + 1. -4 means "not known: restore from the start" and stays as it is.
- `<task>/<store>.position`: the same format, the input records that last updated the store (for
  interactive queries' consistency bounds); also last-applied offsets.
- `global/.checkpoint`: the global stores' positions, the NEXT offset to read (no + 1).
- `.lock`: held (a POSIX file lock) while an instance runs.

The file format is `0`, the number of entries, then one `topic partition offset` line each. A
last-applied offset X moves to translate(X + 1) - 1: restoring then starts at the record that follows
the same record on the other cluster. Under exactly-once, a running task's positions are not on disk
(its `.checkpoint` is deleted when the task starts, or holds -4 in Kafka Streams 4.x, until a clean
close writes them): a task folder with store data and no checkpoint was not closed cleanly, and its
store would be wiped and restored anyway, so a rewrite refuses it (the -4 case needs the changelog's
end, so streams.py refuses that one).

Pure file logic: the translation comes in as a function.
"""

from __future__ import annotations

import fcntl
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cutover.errors import Refused

#: translate(topic, partition, offset): the offset on the other cluster of the next record to read.
Translate = Callable[[str, int, int], int]
CHECKPOINT = ".checkpoint"
POSITION = ".position"
UNKNOWN = -4  # Kafka Streams' OFFSET_UNKNOWN
_TASK = re.compile(r"\d+_\d+")
_NAMED = re.compile(r"__.+__")


class StateError(Refused):
    """The state cannot be moved as it is (refused; nothing was written)."""


@dataclass(frozen=True)
class PositionsFile:
    """One file of positions: a task's checkpoint or a store's position, or the global checkpoint."""

    path: Path
    #: True for the global checkpoint (next offset to read); False for last-applied offsets.
    next_offsets: bool
    entries: tuple[tuple[str, int, int], ...]

    def text(self) -> str:
        return render(self.entries)


def parse(text: str, where: Path) -> tuple[tuple[str, int, int], ...]:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or lines[0].strip() != "0":
        raise StateError(f"{where} is not a Kafka Streams checkpoint of version 0 (it starts {lines[:1]})",
                         fix="check the reader's state_dir and application_id; nothing was written")
    try:
        count = int(lines[1])
        out = []
        for line in lines[2:]:
            topic, partition, offset = line.split(" ")
            out.append((topic, int(partition), int(offset)))
    except ValueError:
        raise StateError(f"{where} has a line that is not 'topic partition offset'",
                         fix="check the reader's state_dir and application_id; nothing was written") from None
    if count != len(out):
        raise StateError(f"{where} says {count} entries and holds {len(out)}: it was cut short",
                         fix="start the application once and stop it cleanly, or use state: wipe; nothing was "
                             "written")
    return tuple(out)


def render(entries: tuple[tuple[str, int, int], ...]) -> str:
    return "".join(["0\n", f"{len(entries)}\n", *(f"{t} {p} {o}\n" for t, p, o in entries)])


class StateDir:
    """`<state.dir>/<application.id>/`."""

    def __init__(self, state_dir: Path, application_id: str) -> None:
        self.root = state_dir / application_id

    def tasks(self) -> list[Path]:
        """Every task folder, named topologies' too, in a stable order."""
        if not self.root.is_dir():
            return []
        out = [d for d in self.root.iterdir() if d.is_dir() and _TASK.fullmatch(d.name)]
        for named in (d for d in self.root.iterdir() if d.is_dir() and _NAMED.fullmatch(d.name)):
            out += [d for d in named.iterdir() if d.is_dir() and _TASK.fullmatch(d.name)]
        return sorted(out)

    def global_dir(self) -> Path:
        return self.root / "global"

    def running(self) -> bool:
        """Whether an instance holds the application folder's lock (Java's FileChannel.tryLock: a POSIX lock)."""
        lock = self.root / ".lock"
        if not lock.exists():
            return False
        with lock.open("r+b") as f:
            try:
                fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.lockf(f, fcntl.LOCK_UN)
        return False

    def files(self) -> list[PositionsFile]:
        """Every positions file; refused when a task with store data has no checkpoint (an unclean close)."""
        out: list[PositionsFile] = []
        for task in self.tasks():
            checkpoint = task / CHECKPOINT
            if checkpoint.is_file():
                out.append(PositionsFile(checkpoint, False, parse(checkpoint.read_text(), checkpoint)))
            elif _has_store_data(task):
                raise StateError(
                    f"task {task.name} in {self.root} has store data and no {CHECKPOINT}: the application was not "
                    "closed cleanly (under exactly-once a running task has no checkpoint), so Kafka Streams would "
                    "wipe this store and restore it from its changelog anyway",
                    fix="start the application on the cluster it ran on and close it cleanly (KafkaStreams.close()), "
                        "or set the reader's state: wipe; nothing was written")
            for position in sorted(task.glob(f"*{POSITION}")):
                out.append(PositionsFile(position, False, parse(position.read_text(), position)))
        checkpoint = self.global_dir() / CHECKPOINT
        if checkpoint.is_file():
            out.append(PositionsFile(checkpoint, True, parse(checkpoint.read_text(), checkpoint)))
        return out

    def set_aside(self) -> list[Path]:
        """What state: wipe moves away: every task folder and the global folder."""
        return [*self.tasks(), *([self.global_dir()] if self.global_dir().is_dir() else [])]


def _has_store_data(task: Path) -> bool:
    return any(p.name not in (CHECKPOINT, ".lock") for p in task.iterdir())


def moved(f: PositionsFile, translate: Translate) -> PositionsFile:
    """The file with each offset on the other cluster (unknown offsets stay unknown)."""
    out = []
    for topic, partition, offset in f.entries:
        if offset < 0:
            out.append((topic, partition, offset))
        elif f.next_offsets:
            out.append((topic, partition, translate(topic, partition, offset)))
        else:
            out.append((topic, partition, translate(topic, partition, offset + 1) - 1))
    return PositionsFile(f.path, f.next_offsets, tuple(out))


def topics(files: list[PositionsFile]) -> Iterator[str]:
    return iter(sorted({t for f in files for t, _p, _o in f.entries}))


