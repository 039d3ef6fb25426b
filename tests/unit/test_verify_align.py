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
