"""`cutover status` tells what each mirror's lag means in each phase, and lists only real problems."""

from __future__ import annotations

from typing import Any

import pytest

from cutover.switch import status

PHASES = ("ready", "promoting", "promoted", "rolling-back", "rolled-back")


@pytest.mark.parametrize("phase", PHASES)
def test_every_phase_says_what_each_mirror_is_for(phase: str) -> None:
    for direction in ("forward", "reverse"):
        r = status.role(direction, phase)
        assert isinstance(r["expected_to_run"], bool) and r["role"], (direction, phase)


def test_after_a_rollback_neither_mirror_is_expected_and_forward_lag_is_called_expected() -> None:
    fwd, rev = status.role("forward", "rolled-back"), status.role("reverse", "rolled-back")
    assert not fwd["expected_to_run"] and "expected" in fwd["role"] and "loses nothing" in fwd["role"]
    assert not rev["expected_to_run"]
    assert status.role("forward", "ready")["expected_to_run"] and status.role("reverse", "promoted")["expected_to_run"]


def _report(phase: str, lag: int, gaps: int = 0) -> dict[str, Any]:
    m = {"lag": lag, "partitions": 4, "partitions_behind": 4 if lag else 0, "unmirrored": 0, "gaps": gaps,
         **status.role("forward", phase)}
    return {"plan": "p", "phase": phase, "running": None, "action": "rollback", "steps": [], "freeze_window": None,
            "carried_back": 340, "mirror": {"forward": m, "reverse": None, "reverse_process": None},
            "verify": {}, "routing": {"active": "old"}}


def test_forward_lag_after_a_rollback_is_no_problem_but_a_gap_still_is() -> None:
    s = _report("rolled-back", 586)
    s["problems"] = status.problems(s)
    assert s["problems"] == []
    text = status.render(s)
    assert "lag 586 records, 4 of 4 partitions behind (not running, as expected)" in text and "NOT OK" not in text
    gap = _report("rolled-back", 586, gaps=1)
    assert status.problems(gap) == ["mirror forward: 1 DATA LOSS gap(s) (see cutover mirror status)"]
    running = status.render({**_report("ready", 12), "problems": []})
    assert "as expected" not in running and "copies old -> new until promote" in running
