"""The shadow's one pass: a batch's stamp from the aggregates observed while it was written."""

from __future__ import annotations

from typing import Any

from cutover.shadow.writer import BatchStats


def _seen(partitions: int, **values: Any) -> dict[str, Any]:
    empty = {f"{k}{p}": None for p in range(partitions) for k in "abcd"}
    return {"n": 0, "good": 0, "pmax": None, "newest": None, "unknown": "[]", **empty, **values}


def test_spans_cover_every_fresh_record_and_added_only_the_good_ones() -> None:
    # partition 0: offsets 5..9, 5 and 9 bad; partition 1: nothing; partition 2: 40..41, all bad
    seen = _seen(3, n=7, good=3, pmax=2, newest=1_700_000_000.5,
                 a0=5, b0=9, c0=6, d0=8, a2=40, b2=41)
    stats = BatchStats.of_observed(seen, 3)
    assert stats == BatchStats(spans={0: (5, 9), 2: (40, 41)}, added={0: (6, 8)}, rows=3, bad=4, unknown=[],
                               newest=1_700_000_000.5)


def test_new_fields_come_back_sorted_from_their_json_text() -> None:
    stats = BatchStats.of_observed(_seen(1, n=2, good=2, pmax=0, a0=0, b0=1, c0=0, d0=1,
                                         unknown='["score","coupon"]'), 1)
    assert stats is not None and stats.unknown == ["coupon", "score"]


def test_a_record_from_a_partition_the_run_did_not_know_means_two_passes() -> None:
    assert BatchStats.of_observed(_seen(2, n=3, good=3, pmax=2, a0=0, b0=2, c0=0, d0=2), 2) is None


def test_an_empty_batch_has_no_spans() -> None:
    stats = BatchStats.of_observed(_seen(2), 2)
    assert stats is not None and stats.spans == {} and stats.rows == 0 and stats.bad == 0
