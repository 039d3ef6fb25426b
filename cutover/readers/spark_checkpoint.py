"""A Spark Structured Streaming checkpoint's Kafka positions: read, and moved to the other cluster.

Spark keeps a query's progress in its checkpoint folder, not in a consumer group:
- `offsets/<N>`: `v1`, a metadata JSON line, then one line per source of the query, in the
  query's source order: a Kafka source's end positions of batch N as `{"topic":{"0":123}}`
  (the next offset to read), `-` for a source with nothing yet;
- `commits/<N>`: `v1` and `{"nextBatchWatermarkMs":0}`: batch N was written by the sink.

A query restarts from its newest offsets file; when that batch has no commit, it runs that
batch again with the same positions. Moving a stopped query to the other cluster therefore
adds batch N+1 after the last committed batch N: its offsets are N's, with each Kafka
position translated exactly through the mirror's map, and its commit says it is done. The
query's next batch then reads from the exact next record on the other cluster. Other
sources' lines stay as they are. Files are created, never overwritten: a query that runs
after all (and writes N+1 itself) makes one of the two writers fail, never both succeed.

Pure file logic on a folder (local, or on object storage: readers/store.py): the translation
comes in as a function.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cutover.errors import Refused
from cutover.readers.store import Folder

#: translate(topic, partition, offset): the same record's offset on the other cluster.
Translate = Callable[[str, int, int], int]
VERSION = "v1"
COMMIT = '{"nextBatchWatermarkMs":0}'


class CheckpointError(Refused):
    """The checkpoint cannot be moved as it is (refused; nothing was written)."""


class InFlight(CheckpointError):
    """The newest batch is planned but not committed: the query runs, or stopped in the middle of it."""


@dataclass(frozen=True)
class Batch:
    """One entry of the offset log."""

    batch: int
    metadata: str
    #: Each source's line as written: a Kafka source's JSON, another source's own text, or "-".
    sources: tuple[str, ...]
    #: Its commit log entry as written (the watermark the next batch starts from).
    commit: str = f"{VERSION}\n{COMMIT}"

    def kafka(self) -> dict[int, dict[str, dict[int, int]]]:
        """The Kafka sources' positions by source index: {index: {topic: {partition: offset}}}."""
        out = {}
        for i, line in enumerate(self.sources):
            positions = kafka_positions(line)
            if positions is not None:
                out[i] = positions
        return out


def kafka_positions(line: str) -> dict[str, dict[int, int]] | None:
    """A Kafka source's offset line as {topic: {partition: offset}}; None for any other source."""
    if not line.startswith("{"):
        return None
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not doc:
        return None
    out: dict[str, dict[int, int]] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict) or not parts:
            return None
        try:
            out[topic] = {int(p): int(o) for p, o in parts.items() if not isinstance(o, (dict, list, bool))}
        except (TypeError, ValueError):
            return None
        if len(out[topic]) != len(parts):
            return None
    return out


def kafka_line(positions: dict[str, dict[int, int]]) -> str:
    """Spark's spelling of a Kafka source's offsets (JsonUtils.partitionOffsets): topics and partitions sorted."""
    return json.dumps({t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(positions.items())},
                      separators=(",", ":"))


@dataclass(frozen=True)
class Checkpoint:
    folder: Folder

    def _ids(self, log: str) -> list[int]:
        return sorted(int(name) for name in self.folder.names(log) if name.isdigit())

    def offsets(self) -> list[int]:
        return self._ids("offsets")

    def commits(self) -> list[int]:
        return self._ids("commits")

    def read(self, batch: int) -> Batch:
        path = self.folder.where(f"offsets/{batch}")
        lines = self.folder.read(f"offsets/{batch}").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2 or lines[0] != VERSION:
            raise CheckpointError(f"{path}: not a Spark offset log entry of version {VERSION} "
                                  f"(first line {lines[0]!r})" if lines else f"{path}: empty",
                                  fix="point the reader's checkpoint at the query's checkpoint folder (the one "
                                      "holding offsets/ and commits/), written by Spark 3.x or 4.x")
        return Batch(batch, lines[1], tuple(lines[2:]))

    def last_committed(self, stateful_ok: bool = False) -> Batch:
        """The newest batch, refused unless it is committed (a cleanly stopped query), and unless the
        query keeps no state (`stateful_ok`: only read, for a new checkpoint's startingOffsets)."""
        offsets, commits = self.offsets(), self.commits()
        if not offsets:
            raise CheckpointError(f"checkpoint {self.folder} has no offsets/ entries: the query has not run a "
                                  "batch yet", fix="nothing to move: start the query on the new cluster with "
                                  "startingOffsets, or run it once on the old cluster first")
        if self.stateful() and not stateful_ok:
            raise CheckpointError(
                f"checkpoint {self.folder} holds state (state/): a stateful query's state store versions follow "
                "its batch ids, and a batch added without its state would fail the next one",
                fix="use `cutover readers translate --starting-offsets` and start the query on a new checkpoint "
                    "with that startingOffsets")
        last = offsets[-1]
        if not commits or commits[-1] < last:
            raise InFlight(
                f"checkpoint {self.folder}: batch {last} is planned (offsets/{last}) but not committed "
                f"(last commit: {commits[-1] if commits else 'none'}): the query stopped in the middle of a batch",
                fix="start the query again on the old cluster, let it finish that batch, and stop it cleanly "
                    "(query.stop()); then translate")
        return self.committed(last)

    def committed(self, n: int) -> Batch:
        """Batch n with its commit log entry."""
        batch = self.read(n)
        return Batch(n, batch.metadata, batch.sources, self.folder.read(f"commits/{n}"))

    def stateful(self) -> bool:
        return bool(self.folder.names("state"))


def moved(last: Batch, translate: Translate) -> Batch:
    """Batch last+1: `last` with every Kafka position translated (translate(topic, partition, offset))."""
    sources = list(last.sources)
    for i, positions in last.kafka().items():
        sources[i] = kafka_line({t: {p: translate(t, p, o) for p, o in parts.items()}
                                 for t, parts in positions.items()})
    return Batch(last.batch + 1, last.metadata, tuple(sources), last.commit)


def _create(folder: Folder, rel: str, text: str) -> bool:
    """Write a new file whole, refusing to replace one (as Spark's own log writes). False when the
    file is there already with exactly this text (an interrupted translation, finished now)."""
    try:
        if folder.read(rel) == text:
            return False
    except FileNotFoundError:
        pass
    try:
        folder.create(rel, text)
    except FileExistsError:
        raise CheckpointError(f"{folder.where(rel)} appeared while cutover was writing it: the query is running",
                              fix="stop the query, then translate again") from None
    return True


def write(ck: Checkpoint, batch: Batch, sink_log: Folder | None = None) -> list[str]:
    """Add `batch` to the checkpoint; the files written.

    The offsets first: once offsets/N+1 is ours, a query that still runs fails at its next batch
    (Spark's "Concurrent update to the log") instead of reading the wrong range. Then, for a file
    sink, `sink_log` (its `_spark_metadata` folder): that log must hold every batch id (its
    compaction reads them all), so the added batch gets an entry with no files, as a batch that read
    nothing writes. The commit last: until it is there, the batch is not done, and translating again
    finishes it."""
    if sink_log is not None and not sink_log.exists():
        raise CheckpointError(f"{sink_log}: no file sink log here",
                              fix="point the reader's sink at the file sink's output folder (it holds "
                                  "_spark_metadata/), or remove sink for a sink that is not files")
    files: list[tuple[Folder, str, str]] = [
        (ck.folder, f"offsets/{batch.batch}", "\n".join([VERSION, batch.metadata, *batch.sources]))]
    if sink_log is not None:
        files.append((sink_log, str(batch.batch), VERSION))
    files.append((ck.folder, f"commits/{batch.batch}", batch.commit))
    return [folder.where(rel) for folder, rel, text in files if _create(folder, rel, text)]


def starting_offsets(batch: Batch) -> dict[str, Any]:
    """The Kafka sources' positions as Spark's `startingOffsets` option (one JSON per source)."""
    return {str(i): kafka_line(p) for i, p in batch.kafka().items()}

