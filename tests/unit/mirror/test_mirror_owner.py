"""The owner record of a mirror's shard (mirror/owner.py): how it reads in the status pages, and whether a
process that takes a shard over names the one before it."""

from __future__ import annotations

import os
import socket
import time

from cutover.mirror import owner


def _record(**extra: object) -> dict[str, object]:
    return {"host": "elsewhere", "pid": 42, "started_at": 1795410010.0, "started_by": "hand", "drain": False,
            "took_over": None, "ended_at": None, "ended": None, **extra}


def test_each_state_of_an_owner_reads_as_what_is_known() -> None:
    here = owner.mine("promote", False, None)
    gone = {**here, "pid": 2 ** 22 + 1}  # above pid_max's default: no such process
    lines = owner.render([owner.as_status("0/1", r) for r in (
        here, gone, _record(), _record(ended="stopped", ended_at=1795410070.0),
        _record(started_by="rollback", drain=True), _record(took_over=_record(pid=7, started_by="promote")))])
    assert [line.split(", ", 2)[-1] for line in lines] == [
        "running", "no longer running", "running, as recorded (on another host)",
        "ended 2026-11-23T05:01:10+00:00 (stopped)", "ended with its switch step",
        "running, as recorded (on another host); it took the shard over from pid 7 on host elsewhere (started by "
        "cutover promote)"]
    assert lines[0].startswith(f"shard 0/1: pid {os.getpid()} on host {socket.gethostname()}, started by cutover "
                               "promote at ")
    assert "started by cutover rollback's drain at 2026-11-23T05:00:10+00:00" in lines[4]


def test_only_a_process_that_may_still_run_is_named_as_taken_over() -> None:
    assert owner.running(owner.mine("hand", False, None))
    assert owner.running(_record())  # another host: as recorded
    assert not owner.running(_record(ended="caught up", ended_at=time.time()))
    assert not owner.running({**owner.mine("hand", False, None), "pid": 2 ** 22 + 1})
    assert not owner.running(_record(drain=True, started_by="promote"))  # a drain records no end: seen, or done
    assert owner.running(owner.mine("promote", True, None))
    mine = owner.mine("hand", False, _record(started_by="promote"))
    assert mine["took_over"] == {"host": "elsewhere", "pid": 42, "started_at": 1795410010.0,
                                 "started_by": "promote", "drain": False}
    assert owner.same(mine, owner.ended(mine, "stopped")) and not owner.same(mine, _record())
