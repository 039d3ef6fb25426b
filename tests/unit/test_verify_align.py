"""Verify's offset alignment (pure): the window, and new positions in old offsets."""

from __future__ import annotations

from cutover.mirror.offsetmap import PartitionMap, Segment
from cutover.verify.align import new_position_in_old, window


def test_window_ends_where_the_side_behind_ends() -> None:
    assert window({0: 100, 1: 50, 2: 7}, {0: 80, 1: 60}) == {0: 80, 1: 50, 2: 0}


def test_new_positions_go_back_through_the_map() -> None:
    pm = PartitionMap(start_src=0, next_src=12, next_tgt=14)
    pm.add([Segment(0, 0, 5), Segment(7, 6, 5)])  # source gap 5-6 (aborted), target marker at 5 and 11..13
    # 5 (a marker on new) and 6 both mean "next is source 7": 5..6 hold no committed record on old.
    assert new_position_in_old(pm, 5) == 7 and new_position_in_old(pm, 6) == 7 and new_position_in_old(pm, 9) == 10
    assert new_position_in_old(pm, 14) == 12 and new_position_in_old(pm, 99) == 12
    assert new_position_in_old(None, 42) == 42
