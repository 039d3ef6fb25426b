"""The pilot demo's summary, from a drill result: what each step said, and the text of a pilot that failed
part-way (steps that did not run read as NO, never as an error)."""

from __future__ import annotations

from pathlib import Path

from cutover.drill import demo

STOPPED = "the new cluster failed writing the record of t partition 0 offset 4 (UNKNOWN_SERVER_ERROR)"


def _step(name: str, outcome: str = "passed", **detail: object) -> dict[str, object]:
    return {"name": name, "outcome": outcome, "detail": detail}


def test_the_pilots_summary_says_the_outage_and_the_replay_and_renders_a_failed_run(tmp_path: Path) -> None:
    steps = [_step(demo.OUTAGE_STOP, error=STOPPED), _step("the mirror goes on from where it stopped"),
             _step("the mirror keeps up"), _step("the tables agree"),
             _step("the replay agrees with the platform's table", "failed")]
    s = demo.pilot_summary({"passed": False, "steps": steps, "failed_step": {
        "number": 16, "name": "the replay agrees with the platform's table", "error": "verify did not pass"}}, tmp_path)
    assert s["catalog_outage"] == {"mirror_stopped_saying": STOPPED, "resumed": True}
    assert s["verify_passed"] is True and s["replay_passed"] is False and s["carried_back"] is None
    text = demo._render_pilot({**s, "catalog": "rest", "old_pipeline": "stand-in", "platform": "tansu"})
    lines = text.splitlines()
    assert lines[0].startswith("demo FAILED")
    assert "  failed at step 16 (the replay agrees with the platform's table): verify did not pass" in lines
    assert "  a replay of the old log agrees with it:      NO" in lines
    assert "  catalog outage: the mirror stopped, named:   yes" in lines
    assert "  catalog outage: the mirror resumed:          yes" in lines
    assert "  freeze window at promote:                    -" in lines
    assert "  tables agree after the round trip:           NO" in lines
