"""Table maintenance beside a running shadow: a commit that lost the REST catalog's sequence-number race
is run again, nothing else is."""

from __future__ import annotations

import pytest

from cutover.lake.maintenance import ATTEMPTS, retry_lost_race


def test_maintenance_runs_a_procedure_again_only_when_its_commit_lost_the_sequence_number_race() -> None:
    calls: list[int] = []

    def lost_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("BadRequestException: Malformed request: Cannot add snapshot with sequence number 14 "
                               "older than last sequence number 14")
        return "done"

    assert retry_lost_race(lost_twice, "rewrite_data_files on t") == "done" and len(calls) == 3

    def other() -> str:
        calls.append(1)
        raise RuntimeError("NoSuchTableException: t")

    calls.clear()
    with pytest.raises(RuntimeError, match="NoSuchTable"):
        retry_lost_race(other, "x")
    assert len(calls) == 1  # any other failure is not retried

    def always_lost() -> str:
        calls.append(1)
        raise RuntimeError("Cannot add snapshot with sequence number 3 older than last sequence number 3")

    calls.clear()
    with pytest.raises(RuntimeError, match="older than last sequence number"):
        retry_lost_race(always_lost, "x")
    assert len(calls) == ATTEMPTS
