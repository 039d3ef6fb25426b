"""The exact source-to-target offset map of one mirrored partition (pure logic).

A mirrored record keeps its order but not its offset: the source log has gaps
(compaction, transaction markers, aborted records, retention) and the target log has
its own (the mirror's commit markers). The map is a sorted list of segments
`(src, tgt, length)`: source offsets src..src+length-1 landed at tgt..tgt+length-1.
A segment ends at every gap on either side, so it is exact for every record.

A consumer position is "the next record to read". Position `o` on the source
therefore translates to the target position of the first mirrored record at or
after `o`; when every record below the mirror's progress has been read, to the
target position just after the last mirrored record. Positions the mirror has not
reached yet cannot be translated (yet), and that is said, never guessed.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Segment:
    src: int
    tgt: int
    length: int

    @property
    def src_end(self) -> int:
        return self.src + self.length

    @property
    def tgt_end(self) -> int:
        return self.tgt + self.length


@dataclass(frozen=True)
class Gap:
    """Source offsets lost before they were mirrored (retention deleted them)."""

    start: int
    end: int  # exclusive

    @property
    def records(self) -> int:
        return self.end - self.start


def segments(pairs: Iterable[tuple[int, int]]) -> list[Segment]:
    """Collapse (source offset, target offset) pairs, in write order, into segments."""
    out: list[Segment] = []
    for src, tgt in pairs:
        last = out[-1] if out else None
        if last and src == last.src_end and tgt == last.tgt_end:
            out[-1] = Segment(last.src, last.tgt, last.length + 1)
        else:
            if last and (src < last.src_end or tgt < last.tgt_end):
                raise ValueError(f"offsets must increase: ({src}, {tgt}) after {last}")
            out.append(Segment(src, tgt, 1))
    return out


class SourceWentBack(ValueError):
    """The mirror's position is beyond the source's log end: the log was truncated or recreated."""


def out_of_range(position: int, low: int, high: int) -> Gap | None:
    """What a position outside the source log [low, high) means.

    Below the log start, retention deleted records before they were mirrored: the gap, to
    report exactly (None when nothing in it was unmirrored). Beyond the log end, the log
    went backwards (a topic deleted and recreated, an unclean leader election truncating
    it): nothing to copy again and nothing to call lost, but a state the mirror cannot
    continue from; raises SourceWentBack.
    """
    if position > high:
        raise SourceWentBack(f"the mirror's position {position} is beyond the source's log end {high} "
                             f"(log start {low})")
    gap = Gap(position, low)
    return gap if gap.records > 0 else None


class NotYetMirrored(LookupError):
    """The position is beyond what the mirror has copied: translating it now would guess."""


class PartitionMap:
    """Everything the mirror has committed about one partition.

    The segments are kept as three arrays of 64-bit integers (source start, target start,
    length), not as objects: a day of mirroring is millions of segments, and arrays keep
    that to 24 bytes each and make bulk loading a copy of bytes.
    """

    __slots__ = ("_len", "_src", "_tgt", "gaps", "next_src", "next_tgt", "records", "start_src")

    def __init__(self, start_src: int = 0, next_src: int = 0, next_tgt: int = 0,
                 segments: Iterable[Segment] | None = None, gaps: Iterable[Gap] | None = None,
                 records: int = 0) -> None:
        #: The source offset the mirror started at (the log start when it first ran).
        self.start_src = start_src
        #: Every source record below this offset has been read and, if committed, copied.
        self.next_src = next_src
        #: The target position just after the last record the mirror wrote.
        self.next_tgt = next_tgt
        self.gaps: list[Gap] = list(gaps or [])
        #: Records copied so far (the sum of the segments' lengths, known even when they were not loaded).
        self.records = records
        self._src, self._tgt, self._len = array("q"), array("q"), array("q")
        if segments is not None:
            self.add(segments)
            self.records = records or sum(self._len)

    def __repr__(self) -> str:
        return (f"PartitionMap(start_src={self.start_src}, next_src={self.next_src}, next_tgt={self.next_tgt}, "
                f"segments={self.segment_count}, gaps={self.gaps}, records={self.records})")

    @property
    def segments(self) -> list[Segment]:
        return [Segment(*t) for t in zip(self._src, self._tgt, self._len, strict=True)]

    @property
    def segment_count(self) -> int:
        return len(self._src)

    def arrays(self) -> tuple[array[int], array[int], array[int]]:
        """The segments as (source starts, target starts, lengths): the form the state and verify use."""
        return self._src, self._tgt, self._len

    def progress(self) -> PartitionMap:
        """A copy of the progress (offsets, gaps, record count) without the segments."""
        return PartitionMap(self.start_src, self.next_src, self.next_tgt, None, self.gaps, self.records)

    def replace(self, src: array[int], tgt: array[int], length: array[int]) -> None:
        """Take these segments as the whole map (a checkpoint read back)."""
        self._src, self._tgt, self._len = src, tgt, length

    def add(self, new: Iterable[Segment]) -> None:
        for seg in new:
            if self._src and seg.src < self._src[-1] + self._len[-1]:
                i = bisect.bisect_left(self._src, seg.src)
                if i < len(self._src) and (self._src[i], self._tgt[i], self._len[i]) == (seg.src, seg.tgt, seg.length):
                    continue  # the same committed segment read twice
                self._src.insert(i, seg.src)
                self._tgt.insert(i, seg.tgt)
                self._len.insert(i, seg.length)
            else:
                self._src.append(seg.src)
                self._tgt.append(seg.tgt)
                self._len.append(seg.length)

    def translate(self, offset: int) -> int:
        """Target position of source position `offset` (exact; raises NotYetMirrored)."""
        if offset > self.next_src:
            raise NotYetMirrored(f"source offset {offset} is beyond the mirror's progress {self.next_src}")
        i = bisect.bisect_right(self._src, offset) - 1
        if i >= 0 and offset < self._src[i] + self._len[i]:
            return self._tgt[i] + (offset - self._src[i])
        if i + 1 < len(self._src):
            return self._tgt[i + 1]
        return self.next_tgt

    def source_of(self, offset: int) -> int | None:
        """The source offset of the record this mirror wrote at target offset `offset`, or None when it
        wrote no record there (the other direction's mirror asks: that record is a copy, not news)."""
        if offset >= self.next_tgt or not self._tgt:
            return None
        i = bisect.bisect_right(self._tgt, offset) - 1
        if i >= 0 and offset < self._tgt[i] + self._len[i]:
            return self._src[i] + (offset - self._tgt[i])
        return None

    def invert(self, offset: int) -> int:
        """Source position of target position `offset`: the inverse, used to carry groups back."""
        if offset > self.next_tgt:
            raise NotYetMirrored(f"target offset {offset} is beyond what the mirror wrote ({self.next_tgt})")
        i = bisect.bisect_right(self._tgt, offset) - 1
        if i >= 0 and offset < self._tgt[i] + self._len[i]:
            return self._src[i] + (offset - self._tgt[i])
        if i + 1 < len(self._tgt):
            return self._src[i + 1]
        return self.next_src
