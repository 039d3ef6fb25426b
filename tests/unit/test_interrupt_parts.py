"""interrupt.side_by_side: the parts of a one-shot command, asked at once, each answer kept, a part that has not
answered by the deadline named as late (not waited for), an unexpected exception raised in the caller."""

from __future__ import annotations

import threading
import time

import pytest

from cutover import interrupt


def test_parts_answer_side_by_side_and_a_hung_one_is_late_without_being_waited_for() -> None:
    hung = threading.Event()
    started = time.monotonic()
    got = interrupt.side_by_side({"quick": lambda: 1, "slow": lambda: threading.Event().wait(0.3) or 2,
                                  "hung": lambda: hung.wait(60)}, 0.5)
    took = time.monotonic() - started
    assert got["quick"] == 1 and got["slow"] == 2
    assert got["hung"] == interrupt.Late(0.5) and got["hung"].message == "did not answer within the --timeout of 0.5s"
    # the deadline is the timeout and most of SAY_WHY (a part's own wait of the timeout ends in its explanation)
    assert 0.5 + interrupt.SAY_WHY - 1.0 <= took < 0.5 + interrupt.SAY_WHY, took
    hung.set()


def test_an_unexpected_exception_in_a_part_is_raised_in_the_caller() -> None:
    def broken() -> int:
        raise ZeroDivisionError("a bug")

    with pytest.raises(ZeroDivisionError, match="a bug"):
        interrupt.side_by_side({"ok": lambda: 1, "broken": broken}, 1.0)


def test_a_part_left_running_is_not_started_again_by_the_same_scope_until_it_ends() -> None:
    """A process that asks again and again (the exporter's scrapes) keeps one thread per hung part, not one per ask."""
    release = threading.Event()
    calls: list[str] = []

    def hung() -> str:
        calls.append("hung")
        release.wait(60)
        return "late answer"

    first = interrupt.side_by_side({"catalog": hung, "cluster": lambda: "ok"}, 0.1, scope="test scope")
    started = time.monotonic()
    again = interrupt.side_by_side({"catalog": hung, "cluster": lambda: "ok"}, 0.1, scope="test scope")
    assert time.monotonic() - started < 1.0  # Late at once: nothing waited for
    assert first == again == {"catalog": interrupt.Late(0.1), "cluster": "ok"} and calls == ["hung"]
    elsewhere = interrupt.side_by_side({"catalog": lambda: "answered"}, 0.1, scope="another plan")
    assert elsewhere == {"catalog": "answered"}
    release.set()
    for thread in [t for t in threading.enumerate() if t.name == "cutover-part-catalog"]:
        thread.join(10)  # the hung part's thread ends once released
    assert interrupt.side_by_side({"catalog": hung}, 0.1, scope="test scope") == {"catalog": "late answer"}
    assert calls == ["hung", "hung"]


def test_a_command_whose_start_took_part_of_its_timeout_answers_before_its_backstop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The backstop counts from the --timeout's parsing; the imports and the plan's read come after it: the parts
    and the steps after them stop in time for the report (was: the backstop ended a loaded status first)."""
    now = time.monotonic()
    monkeypatch.setattr(interrupt, "_backstop_at", now + 5.0)  # armed 10 + 4 s ago, less 9 s of start
    assert interrupt.report_by(10) == pytest.approx(now + 5.0 - interrupt.GRACE - interrupt.SAY_WHY, abs=0.1)
    hung = threading.Event()
    started = time.monotonic()
    got = interrupt.side_by_side({"catalog": lambda: hung.wait(60)}, 10, scope="backstop test")
    took = time.monotonic() - started
    assert got == {"catalog": interrupt.Late(10)} and took < 5.0 - interrupt.GRACE, took
    hung.set()
    monkeypatch.setattr(interrupt, "_backstop_at", None)
    assert interrupt.report_by(10) == pytest.approx(time.monotonic() + 10, abs=0.1)
