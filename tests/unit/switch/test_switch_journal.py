"""The switch journal and its lock (pure): folded history, torn lines, versions, a lock that dies with its holder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cutover.errors import Refused
from cutover.switch import journal, steps
from cutover.switch.journal import Journal
from tests.unit.switch.switch_support import journal_run


def test_journal_folds_crashed_runs_into_one_attempt(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["hold", "freeze-producers"], crashed_in="wait-quiet")
        journal_run(j, "promote", "b", ["wait-quiet"], crashed_in="drain-mirror")
    h = journal.read(tmp_path)
    assert h.phase() == "promoting"
    assert set(h.done_steps("promote")) == {"hold", "freeze-producers", "wait-quiet"}
    assert h.started_steps("promote") == {"hold", "freeze-producers", "wait-quiet", "drain-mirror"}
    assert [r.run for r in h.promote_attempt()] == ["a", "b"]


def test_a_finished_promote_then_rollback_attempts(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["hold"], crashed_in="freeze-producers")
        journal_run(j, "promote", "b", ["freeze-producers", "switch-clients"], finished=True)
        journal_run(j, "rollback", "c", ["freeze-producers"], crashed_in="wait-quiet")
    h = journal.read(tmp_path)
    assert h.phase() == "rolling-back"
    assert [r.run for r in h.promote_attempt()] == ["a", "b"]
    assert [r.run for r in h.latest_attempt("rollback")] == ["c"]
    assert set(h.done_steps("rollback")) == {"freeze-producers"}
    assert h.done_steps("promote") == {}  # the latest run is a rollback: promote has no open attempt
    assert steps.past_point_of_no_return(h)


def test_a_torn_last_line_is_ignored_but_a_corrupt_middle_line_is_refused(tmp_path: Path) -> None:
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["hold"])
    path = tmp_path / "journal.jsonl"
    with path.open("a") as f:
        f.write('{"v": 1, "event": "step-st')  # the machine died mid-write
    assert set(journal.read(tmp_path).done_steps("promote")) == {"hold"}
    path.write_text("garbage\n" + path.read_text())
    with pytest.raises(journal.JournalError, match=r"journal\.jsonl:1"):
        journal.read(tmp_path)


def test_a_torn_tail_is_cut_back_before_the_next_entry_is_appended(tmp_path: Path) -> None:
    """A crash mid-write leaves a fragment; the next writer must not fuse its entry onto it."""
    with Journal.open(tmp_path, "promote") as j:
        journal_run(j, "promote", "a", ["hold"], crashed_in="freeze-producers")
    path = tmp_path / "journal.jsonl"
    whole = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"v": 1, "event": "step-end", "run": "a", "st')  # the machine died mid-write
    with Journal.open(tmp_path, "promote") as j:  # the re-run opens the journal and goes on
        assert path.read_bytes() == whole, "the torn fragment is cut back on open, before any append"
        journal_run(j, "promote", "b", ["freeze-producers"], finished=True)
    h = journal.read(tmp_path)  # every later reader can read every line
    assert h.phase() == "promoted" and [r.run for r in h.runs] == ["a", "b"]
    assert all(json.loads(line) for line in path.read_bytes().splitlines())


def test_an_unknown_journal_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "journal.jsonl").write_text(json.dumps({"v": 99, "event": "begin"}) + "\n")
    with pytest.raises(journal.JournalError, match="version 99"):
        journal.read(tmp_path)


def test_the_lock_refuses_a_second_operator_and_dies_with_its_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from cutover.switch.journal import acquire\n"
        f"acquire(Path({str(tmp_path)!r}), 'promote'); print('held', flush=True); sys.stdin.read()")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # holds the lock until killed
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(Refused, match=f'"pid": {holder.pid}'):
            journal.acquire(tmp_path, "rollback")
        assert journal.holder(tmp_path) is not None
    finally:
        holder.kill()
        holder.wait()
    assert journal.holder(tmp_path) is None  # SIGKILL released it: no stale lock
    os.close(journal.acquire(tmp_path, "rollback"))


@pytest.mark.parametrize(("line", "said"), [
    ('[1, 2]', "not a journal entry (JSON without event, run, t, v)"),
    ('{"event": "begin", "run": "a", "t": 1}', "not a journal entry (JSON without v)"),
    ('{"v": 1, "event": "begin", "run": "a", "t": 1}', "not a journal entry (a 'begin' entry without the fields "
                                                        "cutover writes with it)"),
])
def test_an_edited_line_is_named_as_not_an_entry_not_as_another_version(tmp_path: Path, line: str,
                                                                        said: str) -> None:
    (tmp_path / "journal.jsonl").write_text(line + "\n")
    with pytest.raises(journal.JournalError) as info:
        journal.read(tmp_path)
    assert info.value.message == f"{tmp_path / 'journal.jsonl'}:1: {said}"
    assert info.value.fix == "restore the journal from a copy; cutover never rewrites it"
