"""A Kafka Streams state folder's positions: read, translated with each file's own meaning, and moved
once (pure file logic; the translation is a function here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cutover.readers import streams_state as ss

PLAN = ("name: p\nclusters:\n  old: {bootstrap.servers: '127.0.0.1:1'}\n  new: {bootstrap.servers: '127.0.0.1:2'}\n"
        "groups: {include: ['wc']}\ntopics: {include: ['.*']}\n"
        "readers:\n  - {name: counts, kind: kafka-streams, application_id: wc, state_dir: state}\n")


def _state(root: Path) -> Path:
    app = root / "state" / "wc"
    (app / "0_0" / "rocksdb" / "counts").mkdir(parents=True)
    (app / "0_0" / ".checkpoint").write_text("0\n2\nwc-counts-changelog 0 41\nwc-other-changelog 0 -4\n")
    (app / "0_0" / "counts.position").write_text("0\n1\nwords 0 99\n")
    (app / "1_0").mkdir()
    (app / "1_0" / ".checkpoint").write_text("0\n1\nwc-counts-changelog 1 7\n")
    (app / "global").mkdir()
    (app / "global" / ".checkpoint").write_text("0\n1\nwc-lookup 0 12\n")
    (app / ".lock").touch()
    return app


def test_each_file_moves_with_its_own_meaning_and_an_unknown_offset_stays_unknown(tmp_path: Path) -> None:
    app = _state(tmp_path)
    asked: list[tuple[str, int, int]] = []

    def translate(topic: str, partition: int, offset: int) -> int:
        asked.append((topic, partition, offset))
        return offset + 1000

    files = {f.path.relative_to(app).as_posix(): f for f in ss.StateDir(tmp_path / "state", "wc").files()}
    assert sorted(files) == ["0_0/.checkpoint", "0_0/counts.position", "1_0/.checkpoint", "global/.checkpoint"]
    moved = {name: ss.moved(f, translate).text() for name, f in files.items()}
    # a task checkpoint holds the last record applied (41): the record after it (42) is translated, less one
    assert moved["0_0/.checkpoint"] == "0\n2\nwc-counts-changelog 0 1041\nwc-other-changelog 0 -4\n"
    assert moved["0_0/counts.position"] == "0\n1\nwords 0 1099\n"
    assert moved["global/.checkpoint"] == "0\n1\nwc-lookup 0 1012\n"  # the next offset to read, as is
    assert ("wc-counts-changelog", 0, 42) in asked and ("wc-lookup", 0, 12) in asked
    assert not any(t == "wc-other-changelog" for t, _p, _o in asked)
    assert files["1_0/.checkpoint"].text() == (app / "1_0" / ".checkpoint").read_text()  # read as written


def test_a_task_with_store_data_and_no_checkpoint_was_not_closed_cleanly_and_is_refused(tmp_path: Path) -> None:
    app = _state(tmp_path)
    (app / "0_0" / ".checkpoint").unlink()  # what exactly-once leaves after a crash
    with pytest.raises(ss.StateError, match="not closed cleanly") as refused:
        ss.StateDir(tmp_path / "state", "wc").files()
    assert "state: wipe" in (refused.value.fix or "")
    (app / "0_0" / ".checkpoint").write_text("0\n3\nwc-counts-changelog 0 41\n")
    with pytest.raises(ss.StateError, match="says 3 entries and holds 1"):
        ss.StateDir(tmp_path / "state", "wc").files()


def test_a_running_instance_is_seen_by_its_lock(tmp_path: Path) -> None:
    app = _state(tmp_path)
    state = ss.StateDir(tmp_path / "state", "wc")
    assert not state.running()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'r+b'); "
                               "fcntl.lockf(f, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
                               str(app / ".lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert state.running()
    finally:
        holder.communicate("", timeout=30)
    assert not state.running()


def test_a_move_cut_short_is_finished_and_a_move_done_is_not_done_again(tmp_path: Path) -> None:
    from cutover.errors import Refused
    from cutover.plan import load_plan
    from cutover.readers import translate

    app = _state(tmp_path)
    (tmp_path / "plan.yaml").write_text(PLAN)
    plan = load_plan(tmp_path / "plan.yaml")
    journal = tmp_path / ".cutover" / "p" / "readers.jsonl"
    journal.parent.mkdir(parents=True)
    first, second = app / "0_0" / ".checkpoint", app / "1_0" / ".checkpoint"
    files = {str(first): {"before": first.read_text(), "after": "0\n1\nwc-counts-changelog 0 1041\n"},
             str(second): {"before": second.read_text(), "after": "0\n1\nwc-counts-changelog 1 1007\n"}}
    first.write_text(files[str(first)]["after"])  # the first file was written, then the move was killed
    planned = {"location": str(app), "direction": "forward", "phase": "planned", "positions": [], "files": files}
    journal.write_text(json.dumps(planned) + "\n")
    reader = plan.spec.readers[0]
    # no cluster is asked (none listens on those ports): the planned texts finish the move
    got = translate.move(plan, reader, "forward", "execute", timeout=1)
    assert got["resumed"] and got["written"] == [str(second)]
    assert first.read_text() == files[str(first)]["after"] and second.read_text() == files[str(second)]["after"]
    assert [json.loads(line)["phase"] for line in journal.read_text().splitlines()] == ["planned", "done"]
    again = translate.move(plan, reader, "forward", "execute", timeout=1)
    assert again["already_moved"] and again["written"] == []

    # a file the application changed since the plan was made is refused, not overwritten
    second.write_text("0\n1\nwc-counts-changelog 1 8\n")
    journal.write_text(json.dumps(planned) + "\n")
    with pytest.raises(Refused, match="changed since this move was planned"):
        translate.move(plan, reader, "forward", "execute", timeout=1)
    assert second.read_text() == "0\n1\nwc-counts-changelog 1 8\n"


def test_plan_check_shows_the_state_and_names_what_a_move_would_refuse(tmp_path: Path) -> None:
    from cutover.plan import load_plan
    from cutover.readers import translate

    app = _state(tmp_path)
    (tmp_path / "plan.yaml").write_text(PLAN.replace("include: ['wc']", "include: ['other']"))
    entries, problems = translate.positions(load_plan(tmp_path / "plan.yaml"))
    assert entries[0]["tasks"] == 2 and entries[0]["running"] is False
    assert entries[0]["positions"]["wc-counts-changelog"] == {"0": {"offset": 41, "file": "changelog"},
                                                             "1": {"offset": 7, "file": "changelog"}}
    assert entries[0]["positions"]["wc-lookup"] == {"0": {"offset": 12, "file": "global"}}
    assert [p for _r, p, _f in problems] == [
        "reader counts: its group wc (the application.id) is not in the plan's group selection: its input "
        "positions would not move"]
    (app / "0_0" / ".checkpoint").unlink()
    problems = translate.positions(load_plan(tmp_path / "plan.yaml"))[1]
    assert any("not closed cleanly" in p for _r, p, _f in problems)
