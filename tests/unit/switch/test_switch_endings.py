"""complete and cancel in the journal (pure): the phases they lead to, what they allow after, the completion
record and the archived journal, and the steps each builds from the plan."""

from __future__ import annotations

import json
from pathlib import Path

from cutover.switch import checks, endings, journal, steps
from cutover.switch.journal import Journal
from tests.unit.switch.switch_support import journal_run, unit_plan


def _phase_and_refusals(folder: Path) -> tuple[str, dict[str, str | None]]:
    h = journal.read(folder)
    return h.phase(), {a: checks.phase(h, a).test() for a in ("promote", "rollback", "complete", "cancel")}


def test_complete_follows_a_promote_and_a_failed_final_verify_leaves_it_promoted(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["hold", "switch-clients", "resume"], finished=True)
    phase, why = _phase_and_refusals(tmp_path)
    assert phase == "promoted" and why["complete"] is None and why["rollback"] is None
    assert why["cancel"] is not None and "roll back first" in why["cancel"]
    with Journal.open(tmp_path, "complete") as j:
        journal_run(j, "complete", "b", [], failed_in=endings.FINAL_VERIFY)
    phase, why = _phase_and_refusals(tmp_path)
    # the final verify changed nothing: still promoted, and rollback (or complete again) may follow
    assert phase == "promoted" and why["rollback"] is None and why["complete"] is None
    h = journal.read(tmp_path)
    assert [r.run for r in h.promote_attempt()] == ["a"] and steps.past_point_of_no_return(h)
    assert [r.run for r in h.latest_attempt("complete")] == ["b"]


def test_a_complete_that_changed_something_must_be_finished_first(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["switch-clients"], finished=True)
        journal_run(j, "complete", "b", [endings.FINAL_VERIFY, "retire-mirrors"], crashed_in="remove-mirror-state")
    phase, why = _phase_and_refusals(tmp_path)
    assert phase == "completing"
    assert why["complete"] is None
    for action in ("promote", "rollback"):
        assert why[action] == "a complete is unfinished: re-run cutover complete --execute to finish it"
    h = journal.read(tmp_path)
    assert set(h.done_steps("complete")) == {endings.FINAL_VERIFY, "retire-mirrors"}


def test_cancel_before_any_promote_or_after_a_rollback_only(tmp_path: Path) -> None:
    assert _phase_and_refusals(tmp_path)[1]["cancel"] is None  # nothing ever promoted
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["hold"], crashed_in="freeze-producers")
    phase, why = _phase_and_refusals(tmp_path)
    assert phase == "promoting" and why["cancel"] is not None and why["complete"] is not None
    with Journal.open(tmp_path, "rollback") as j:
        journal_run(j, "rollback", "b", ["reopen-mirror", "resume"], finished=True)
    phase, why = _phase_and_refusals(tmp_path)
    assert phase == "rolled-back" and why["cancel"] is None
    assert why["complete"] == ("complete follows a finished promote; the phase is rolled-back (before any promote, "
                               "cutover cancel ends the migration instead)")


def test_the_record_replaces_the_journal_and_ends_every_action(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["switch-clients"], finished=True)
        journal_run(j, "complete", "b", [endings.FINAL_VERIFY, "retire-mirrors"], finished=True)
    assert journal.read(tmp_path).phase() == "completed"
    record = {"action": "complete", "at": "2026-11-26T10:00:00.000Z", "record": str(tmp_path / journal.RECORD),
              "journal": "journal-20261126T100000000Z.jsonl", "attempts": []}
    kept = (tmp_path / "journal.jsonl").read_bytes()
    archived = journal.close(tmp_path, record)
    assert archived.read_bytes() == kept and not (tmp_path / "journal.jsonl").exists()
    assert json.loads((tmp_path / journal.RECORD).read_text())["action"] == "complete"
    assert journal.close(tmp_path, record) == archived  # a re-run finds it done
    phase, why = _phase_and_refusals(tmp_path)
    assert phase == "completed"
    assert all(w is not None and "this migration was completed at 2026-11-26T10:00:00.000Z" in w
               for w in why.values())


def test_a_crash_between_the_record_and_the_archive_is_finished_by_the_next_close(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "cancel") as j:
        journal_run(j, "cancel", "a", ["retire-mirrors"], finished=True)
    record = {"action": "cancel", "at": "t", "journal": "journal-t.jsonl"}
    (tmp_path / journal.RECORD).write_text(json.dumps(record))  # written; the journal not moved yet
    h = journal.read(tmp_path)
    assert h.phase() == "cancelled" and h.ended == record and h.runs
    journal.close(tmp_path, record)
    assert (tmp_path / "archive" / "journal-t.jsonl").exists() and not (tmp_path / "journal.jsonl").exists()
    assert journal.read(tmp_path).phase() == "cancelled"


def test_the_steps_follow_the_plan(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path)
    assert [s.name for s in endings.complete(plan)] == [endings.FINAL_VERIFY, "retire-mirrors",
                                                       "remove-shadow-leftovers", "remove-mirror-state"]
    assert [s.name for s in endings.cancel(plan)] == ["retire-mirrors", "remove-groups", "remove-shadow-tables",
                                                     "remove-mirrored-topics", "remove-mirror-state"]
    bare = unit_plan(tmp_path, tables=[])
    assert [s.name for s in endings.complete(bare)] == ["retire-mirrors", "remove-mirror-state"]
