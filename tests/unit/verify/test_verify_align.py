"""Verify's offset alignment (pure): the window, and new positions in old offsets."""

from __future__ import annotations

from cutover.mirror.offsetmap import PartitionMap, Segment
from cutover.verify.align import combined, new_position_in_old, window


def test_window_ends_where_the_side_behind_ends() -> None:
    assert window({0: 100, 1: 50, 2: 7}, {0: 80, 1: 60}) == {0: 80, 1: 50, 2: 0}


def test_new_positions_go_back_through_the_map() -> None:
    pm = PartitionMap(start_src=0, next_src=12, next_tgt=14)
    pm.add([Segment(0, 0, 5), Segment(7, 6, 5)])  # source gap 5-6 (aborted), target marker at 5 and 11..13
    # 5 (a marker on new) and 6 both mean "next is source 7": 5..6 hold no committed record on old.
    pm = combined(pm, None)
    assert new_position_in_old(pm, 5) == 7 and new_position_in_old(pm, 6) == 7 and new_position_in_old(pm, 9) == 10
    assert new_position_in_old(pm, 14) == 12 and new_position_in_old(pm, 99) == 12
    assert new_position_in_old(None, 42) == 42


def _records(pm: PartitionMap) -> dict[int, int]:
    """new offset -> old offset of every record the map pairs."""
    return {n + i: o + i for n, o, length in zip(*pm.arrays(), strict=True) for i in range(length)}


def test_both_mirrors_maps_make_one_map_from_new_offsets_to_old() -> None:
    """One cycle: the forward mirror copied old 0..9 to new 0..9 and 11..15 (a marker at 10), the app
    wrote new 17..21 after promote, the reverse mirror carried them back to old 16..20; after the
    rollback the forward mirror adopted those five (old 16..20 are new 17..21) and copied old 22..23."""
    forward = PartitionMap(0, 24, 25, [Segment(0, 0, 10), Segment(10, 11, 5), Segment(16, 17, 2),
                                       Segment(18, 19, 3), Segment(22, 23, 2)])
    reverse = PartitionMap(16, 22, 21, [Segment(17, 16, 5)])
    pm = combined(forward, reverse)
    expected = {**{i: i for i in range(10)}, **{11 + i: 10 + i for i in range(5)},
                **{17 + i: 16 + i for i in range(5)}, 23: 22, 24: 23}
    assert _records(pm) == expected  # overlapping pairs kept once
    assert [tuple(a) for a in pm.arrays()] == [(0, 11, 17, 19, 23), (0, 10, 16, 18, 22), (10, 5, 2, 3, 2)]
    assert (pm.next_src, pm.next_tgt) == (25, 24)
    # before the forward mirror resumed: the reverse map alone pairs the records written on new
    early = combined(PartitionMap(0, 15, 16, [Segment(0, 0, 10), Segment(10, 11, 5)]), reverse)
    assert _records(early) == {k: v for k, v in expected.items() if k < 22}
    assert new_position_in_old(early, 17) == 16 and new_position_in_old(early, 22) == 21
    assert new_position_in_old(early, 16) == 16  # new 16 (the hand-over position): nothing between


def test_the_new_offsets_of_an_old_offset_range_hold_every_row_translated_into_it() -> None:
    """The row pass reads the new table through these ranges: a row they miss would be reported missing."""
    from cutover.verify.align import merged, new_ranges

    forward = PartitionMap(0, 30, 31, [Segment(0, 0, 5), Segment(7, 6, 5), Segment(14, 12, 10)])
    pm = combined(forward, None)  # new 0..4 -> old 0..4, new 6..10 -> old 7..11, new 12..21 -> old 14..23
    paired = _records(pm)
    # what translate_column gives each new offset: its old offset, or -(offset + 1) when no map pairs it
    ident = {o: paired.get(o, -(o + 1)) for o in range(40)}
    for width in (1, 3, 4, 8):
        for lo in range(-48, 32, width):
            hi = lo + width
            ranges = new_ranges(pm, lo, hi)
            read = {o for a, b in ranges for o in range(a, b)}
            assert {o for o, i in ident.items() if lo <= i < hi} <= read, (lo, hi, ranges)
            if lo >= 0:  # a range of old offsets reads only the records paired with them
                assert all(lo <= ident[o] < hi for o in read if o in ident), (lo, hi, ranges)
    assert new_ranges(pm, 3, 9) == [(3, 5), (6, 8)]
    assert new_ranges(None, 0, 10) == [] and new_ranges(None, -4, 0) == [(0, 4)]  # a partition no map pairs
    assert merged({0: [(10, 20), (2000, 2100), (20, 30)], 1: [(5, 5)]}) == {0: [(10, 30), (2000, 2100)]}
    assert merged({0: [(0, 10), (900, 1000)]}) == {0: [(0, 1000)]}  # 890 apart: one read
    assert merged({p: [(i * 4096, i * 4096 + 1) for i in range(10)] for p in range(60)}) == {
        p: [(0, 9 * 4096 + 1)] for p in range(60)}  # 600 ranges: one span per partition
