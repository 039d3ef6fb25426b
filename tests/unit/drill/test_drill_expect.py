"""Two expectations' own logic: a background mirror that stopped (its error read from its log, a real process),
and a lag reading that timed out once, asked again within the window (the mirror's status stood in for)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from cutover.drill.context import Drill
from cutover.drill.ops import OPS
from cutover.drill.ops.base import ExpectationFailed
from cutover.drill.ops.expect import LagArgs, StoppedArgs
from cutover.errors import CutoverError, UnreachableError
from cutover.plan.schema import Duration

REFUSED = ("error: the new cluster (127.0.0.1:9) failed writing the record of t partition 2 offset 44 (run the mirror "
           "again to go on) with an error it did not name (UNKNOWN_SERVER_ERROR): it was reached and answered")


def _drill(tmp_path: Path, script: str | None) -> Drill:
    d = Drill(plan=None, folder=tmp_path, sandbox=None, auto=True)  # type: ignore[arg-type]  # not read here
    if script is not None:
        log = (tmp_path / "mirror.log").open("wb")
        d.procs["mirror"] = subprocess.Popen(["sh", "-c", script], stdout=log, stderr=log)
    return d


def _stopped(d: Drill, saying: str, within: float = 10) -> Any:
    return OPS[("expect", "mirror-stopped")].run(d, StoppedArgs(saying, Duration(within)))


def test_a_mirror_that_stopped_saying_the_words_passes_with_its_error_and_fix(tmp_path: Path) -> None:
    d = _drill(tmp_path, f"echo 'copying'; echo \"{REFUSED}\"; echo '  fix: its log says why'; exit 1")
    got = _stopped(d, "UNKNOWN_SERVER_ERROR")
    assert got == {"exit": 1, "error": REFUSED.removeprefix("error: "), "fix": "fix: its log says why"}


def test_a_mirror_that_stopped_for_another_reason_or_still_runs_fails_saying_what_it_saw(tmp_path: Path) -> None:
    d = _drill(tmp_path, "echo 'error: could not reach the new cluster'; exit 1")
    with pytest.raises(ExpectationFailed, match="saying 'error: could not reach the new cluster', not "
                                                "'UNKNOWN_SERVER_ERROR'"):
        _stopped(d, "UNKNOWN_SERVER_ERROR")
    running = _drill(tmp_path, "sleep 30")
    try:
        with pytest.raises(ExpectationFailed, match="the mirror still runs after 1s"):
            _stopped(running, "UNKNOWN_SERVER_ERROR", within=1)
    finally:
        running.procs["mirror"].kill()
    with pytest.raises(CutoverError, match="no background mirror ran"):
        _stopped(_drill(tmp_path, None), "x")


class _Status:
    def __init__(self, answers: list[int | CutoverError]) -> None:
        self.answers = answers

    def __call__(self, *_a: Any) -> Any:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, CutoverError):
            raise answer

        class Lag:
            lag = answer
        return Lag()


def _lag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answers: list[int | CutoverError], within: float) -> Any:
    from cutover.mirror import status

    monkeypatch.setattr(status, "status", _Status(answers))
    return OPS[("expect", "lag-below")].run(_drill(tmp_path, None), LagArgs(0, Duration(within)))


def test_a_lag_reading_that_timed_out_is_asked_again_within_the_window(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    slow = UnreachableError("could not reach the new cluster: Timed out")
    assert _lag(monkeypatch, tmp_path, [slow, slow, 0], 10) == {"lag": 0, "readings_failed": 2}
    with pytest.raises(ExpectationFailed, match=r"stayed above 0 for 2s \(last 5; \d+ reading\(s\) failed, the "
                                                "last: could not reach"):
        _lag(monkeypatch, tmp_path, [5, slow], 2)
    with pytest.raises(UnreachableError, match="Timed out"):  # never read: the cluster's own failure
        _lag(monkeypatch, tmp_path, [slow], 1)
    with pytest.raises(CutoverError, match="a plan problem"):  # not a timeout: at once
        _lag(monkeypatch, tmp_path, [CutoverError("a plan problem")], 60)
