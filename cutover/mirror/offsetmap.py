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
from collections.abc import Iterable
from dataclasses import dataclass, field


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


class NotYetMirrored(LookupError):
    """The position is beyond what the mirror has copied: translating it now would guess."""


@dataclass
class PartitionMap:
    """Everything the mirror has committed about one partition."""

    #: The source offset the mirror started at (the log start when it first ran).
    start_src: int = 0
    #: Every source record below this offset has been read and, if committed, copied.
    next_src: int = 0
    #: The target position just after the last record the mirror wrote.
    next_tgt: int = 0
    segments: list[Segment] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)

    def add(self, new: Iterable[Segment]) -> None:
        for seg in new:
            if self.segments and seg.src < self.segments[-1].src_end:
                if seg in self.segments:
                    continue  # the same committed segment read twice
                self.segments.insert(bisect.bisect(self.segments, seg), seg)
            else:
                self.segments.append(seg)

    def translate(self, offset: int) -> int:
        """Target position of source position `offset` (exact; raises NotYetMirrored)."""
        if offset > self.next_src:
            raise NotYetMirrored(f"source offset {offset} is beyond the mirror's progress {self.next_src}")
        i = bisect.bisect_right(self.segments, offset, key=lambda s: s.src) - 1
        if i >= 0 and offset < self.segments[i].src_end:
            seg = self.segments[i]
            return seg.tgt + (offset - seg.src)
        if i + 1 < len(self.segments):
            return self.segments[i + 1].tgt
        return self.next_tgt

    def invert(self, offset: int) -> int:
        """Source position of target position `offset`: the inverse, used to carry groups back."""
        if offset > self.next_tgt:
            raise NotYetMirrored(f"target offset {offset} is beyond what the mirror wrote ({self.next_tgt})")
        i = bisect.bisect_right(self.segments, offset, key=lambda s: s.tgt) - 1
        if i >= 0 and offset < self.segments[i].tgt_end:
            seg = self.segments[i]
            return seg.src + (offset - seg.tgt)
        if i + 1 < len(self.segments):
            return self.segments[i + 1].src
        return self.next_src
