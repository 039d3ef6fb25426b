"""The offset map (pure): segments, exact translation both ways, positions outside the source log."""

from __future__ import annotations

import random

import pytest

from cutover.mirror.groups import Translator
from cutover.mirror.offsetmap import (
    Gap,
    NotYetMirrored,
    PartitionMap,
    Segment,
    SourceWentBack,
    out_of_range,
    segments,
)


def test_segments_break_at_every_gap_on_either_side() -> None:
    pairs = [(0, 0), (1, 1), (2, 2), (5, 3), (6, 4), (7, 6), (8, 7)]  # source gap 3-4, target gap at 5
    assert segments(pairs) == [Segment(0, 0, 3), Segment(5, 3, 2), Segment(7, 6, 2)]
    with pytest.raises(ValueError, match="must increase"):
        segments([(3, 3), (2, 4)])


def _mirror(source_offsets: list[int], txn_every: int) -> tuple[PartitionMap, dict[int, int]]:
    """Simulate the copier: each transaction writes its records, then a commit marker on the target."""
    pm, where, tgt = PartitionMap(start_src=source_offsets[0]), {}, 0
    for i in range(0, len(source_offsets), txn_every):
        chunk = source_offsets[i:i + txn_every]
        pairs = [(s, tgt + k) for k, s in enumerate(chunk)]
        where.update(pairs)
        tgt += len(chunk) + 1  # our commit marker
        pm.add(segments(pairs))
        pm.next_src, pm.next_tgt = chunk[-1] + 1, pairs[-1][1] + 1
    return pm, where


@pytest.mark.parametrize("seed", range(20))
def test_translation_is_exact_for_every_position(seed: int) -> None:
    rnd = random.Random(seed)
    present = sorted(rnd.sample(range(3, 400), 150))  # gaps: compaction, markers, aborted records
    pm, where = _mirror(present, rnd.randint(1, 20))
    for pos in range(0, present[-1] + 2):
        nxt = next((s for s in present if s >= pos), None)
        expected = where[nxt] if nxt is not None else pm.next_tgt
        assert pm.translate(pos) == expected, pos
        # and back: the inverse of a target position of a record is its source offset
        if nxt is not None:
            assert pm.invert(where[nxt]) == nxt
    with pytest.raises(NotYetMirrored):
        pm.translate(pm.next_src + 1)


def test_reverse_translation_uses_the_forward_inverse_below_the_reverse_start() -> None:
    # forward: old 0-4 -> new 0-4, old 7-9 -> new 6-8 (markers at new 5 and 9); old ends at 10
    fwd = PartitionMap(0, 10, 9, [Segment(0, 0, 5), Segment(7, 6, 3)])
    # after promote: new 10-13 written by clients, reversed to old 10-13
    rev = PartitionMap(start_src=10, next_src=14, next_tgt=14, segments=[Segment(10, 10, 4)])
    tr = Translator({("t", 0): rev}, {("t", 0): fwd})
    positions_on_new = (0, 4, 5, 6, 8, 9, 10, 13, 14)
    assert [tr.translate(("t", 0), o) for o in positions_on_new] == [0, 4, 7, 7, 9, 10, 10, 13, 14]


def test_a_position_outside_the_source_log_is_a_gap_below_and_an_error_above() -> None:
    assert out_of_range(10, 25, 30) == Gap(10, 25)  # retention deleted 10..24 before they were mirrored
    assert out_of_range(25, 25, 30) is None
    assert out_of_range(30, 0, 30) is None  # at the end: nothing lost
    with pytest.raises(SourceWentBack, match="position 10 is beyond the source's log end 3"):
        out_of_range(10, 0, 3)  # recreated or truncated: never copied again, never called lost


def test_source_of_names_only_records_the_mirror_wrote() -> None:
    # reverse: new 10-13 -> old 10-13, new 16-17 -> old 15-16 (its commit markers at old 14 and 17)
    rev = PartitionMap(start_src=10, next_src=18, next_tgt=17, segments=[Segment(10, 10, 4), Segment(16, 15, 2)])
    assert [rev.source_of(o) for o in range(8, 19)] == [None, None, 10, 11, 12, 13, None, 16, 17, None, None]
    assert PartitionMap(0, 5, 5).source_of(2) is None  # progress only: no segments, no copies


@pytest.mark.parametrize("seed", range(10))
def test_a_forward_map_that_adopts_the_reverse_copies_stays_exact_both_ways(seed: int) -> None:
    """Cycle 2: the old cluster holds the reverse mirror's copies (mapped by the forward mirror to the
    new-cluster records they came from), then the clients' own records again (copied). The combined map
    rises on both sides and translates every old position exactly."""
    rnd = random.Random(seed)
    # Cycle 1: old 0..49 copied to new 0..49; promote; clients write new 50..79; the reverse mirror
    # copies them to old 50.. with a commit marker after each transaction.
    fwd = PartitionMap(0, 50, 50, [Segment(0, 0, 50)])
    rev, old_at, old_end = PartitionMap(start_src=50, next_src=80, next_tgt=50), {}, 50
    for start in range(50, 80, 7):
        chunk = list(range(start, min(start + 7, 80)))
        pairs = [(n, old_end + k) for k, n in enumerate(chunk)]
        rev.add(segments(pairs))
        old_at.update({o: n for n, o in pairs})
        rev.next_tgt = pairs[-1][1] + 1
        old_end = rev.next_tgt + 1  # the marker
    # Rollback; clients write old old_end.. (some aborted: gaps); the forward mirror reads from 50.
    theirs = sorted(rnd.sample(range(old_end, old_end + 60), 40))
    pairs, new_end = [], 80
    for o in [o for o in range(50, old_end) if o in old_at] + theirs:
        origin = rev.source_of(o)
        if origin is not None:
            assert origin == old_at[o]
            pairs.append((o, origin))
        else:
            pairs.append((o, new_end))
            new_end += 1
    fwd.add(segments(pairs))  # raises if the map stopped rising on either side
    fwd.next_src, fwd.next_tgt = theirs[-1] + 1, new_end
    for o, n in pairs:
        assert fwd.translate(o) == n and fwd.invert(n) == o
    assert fwd.translate(old_end - 1) == 80  # the last marker: the next record is the first copied one
