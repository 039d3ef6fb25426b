"""common.settled: a read-back waits, within its deadline, for what the cluster just accepted."""

from __future__ import annotations

import time

from cutover.common import settled


def test_a_read_back_is_read_again_until_it_holds_what_was_set() -> None:
    reads = iter([{}, {}, {"alice": ("SCRAM-SHA-256", 8192)}])
    calls: list[dict[str, object]] = []

    def read() -> dict[str, object]:
        calls.append(got := next(reads))
        return got

    got, lacking = settled(read, lambda g: [u for u in ("alice",) if u not in g], timeout=10, step=0.01)
    assert got == {"alice": ("SCRAM-SHA-256", 8192)} and lacking == [] and len(calls) == 3


def test_a_read_back_that_never_settles_names_what_is_missing_after_its_deadline() -> None:
    started = time.monotonic()
    got, lacking = settled(dict, lambda g: ["alice"], timeout=0.3, step=0.05)
    assert got == {} and lacking == ["alice"]
    assert 0.3 <= time.monotonic() - started < 5
