"""`cutover status` tells what each mirror's lag means in each phase, and lists only real problems."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cutover.switch import journal, status
from cutover.switch.journal import Journal
from tests.unit.switch.switch_support import journal_run

PHASES = ("ready", "promoting", "promoted", "rolling-back", "rolled-back")


@pytest.mark.parametrize("phase", PHASES)
def test_every_phase_says_what_each_mirror_is_for(phase: str) -> None:
    for direction in ("forward", "reverse"):
        r = status.role(direction, phase)
        assert isinstance(r["expected_to_run"], bool) and r["role"], (direction, phase)


def test_after_a_rollback_neither_mirror_is_expected_and_forward_lag_is_called_expected() -> None:
    fwd, rev = status.role("forward", "rolled-back"), status.role("reverse", "rolled-back")
    assert not fwd["expected_to_run"] and "expected" in fwd["role"] and "loses nothing" in fwd["role"]
    assert "start it again before the next promote" in fwd["role"]
    assert not rev["expected_to_run"]
    assert status.role("forward", "ready")["expected_to_run"] and status.role("reverse", "promoted")["expected_to_run"]


def _report(phase: str, lag: int, gaps: int = 0) -> dict[str, Any]:
    m = {"lag": lag, "partitions": 4, "partitions_behind": 4 if lag else 0, "unmirrored": 0, "gaps": gaps,
         **status.role("forward", phase)}
    return {"plan": "p", "phase": phase, "cycle": 1, "attempts": [], "running": None, "action": "rollback",
            "steps": [], "freeze_window": None,
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


def test_status_tells_every_cycle_and_attempt_and_which_way_each_mirror_copies(tmp_path: Path) -> None:
    """Promote, a rollback that carried records back, a promote refused at the hold then re-run to the end."""
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["hold", "freeze-producers", "switch-clients"], finished=True)
        journal_run(j, "rollback", "b", ["freeze-producers"], crashed_in="wait-quiet")
        journal_run(j, "rollback", "c", ["wait-quiet", "drain-reverse-mirror", "switch-clients"], finished=True,
                    detail={"carried_back": 1234, "freeze_window": {"seconds": 9.0}})
        journal_run(j, "promote", "d", [], failed_in="hold")
        journal_run(j, "promote", "e", ["hold", "switch-clients"], finished=True)
    attempts = journal.read(tmp_path).attempts()
    assert [(a.cycle, a.action, a.outcome, [r.run for r in a.runs]) for a in attempts] == [
        (1, "promote", "done", ["a"]), (1, "rollback", "done", ["b", "c"]), (2, "promote", "done", ["d", "e"])]
    rows = [a.as_dict() for a in attempts]
    assert rows[1]["carried_back"] == 1234 and rows[1]["freeze_window_seconds"] == 9.0 and rows[1]["runs"] == 2
    assert rows[0]["carried_back"] is None and rows[2]["failed_step"] is None

    s = {**_report("promoted", 0), "cycle": attempts[-1].cycle, "attempts": rows}
    s["mirror"]["reverse"] = {"lag": 3, "partitions": 4, "partitions_behind": 1, "unmirrored": 0, "gaps": 0,
                              **status.role("reverse", "promoted")}
    s["problems"] = status.problems(s)
    text = status.render(s)
    assert text.startswith("plan p: phase promoted, cycle 2\nattempts:")
    lines = text.splitlines()
    assert [line.split()[:4] for line in lines[3:6]] == [["1", "promote", rows[0]["started_at"], "done"],
                                                         ["1", "rollback", rows[1]["started_at"], "done"],
                                                         ["2", "promote", rows[2]["started_at"], "done"]]
    assert lines[4].split()[-3:] == ["2", "9.0s", "1,234"]
    assert "mirror forward (old -> new): lag 0 records" in text and "mirror reverse (new -> old): lag 3 records" in text


def test_a_refused_attempt_names_its_step_and_a_fresh_journal_is_cycle_0(tmp_path: Path) -> None:
    assert journal.read(tmp_path).attempts() == []
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", [], failed_in="hold")
    (only,) = journal.read(tmp_path).attempts()
    assert only.cycle == 1 and only.outcome == "failed"
    assert only.as_dict()["failed_step"] == "hold" and only.as_dict()["error"] == "hold failed"
