"""The switch's observe-only waits (pure, with a fake clock): quiet, open transactions, the postpone file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.errors import Refused
from cutover.switch import waits
from tests.unit.switch.switch_support import unit_plan


class FakeClock(waits.Clock):
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_quiet_waits_for_a_still_period_and_refuses_when_writes_go_on() -> None:
    ends = iter([{("t", 0): (5, 5)}, {("t", 0): (6, 6)}, {("t", 0): (7, 7)}] + [{("t", 0): (7, 7)}] * 100)
    done = waits.quiet(lambda: next(ends), period=2.0, deadline=30, where="old", clock=FakeClock())
    assert done["moves"] == 2 and done["quiet_seconds"] == pytest.approx(3.0)

    counter = iter(range(10_000))
    with pytest.raises(Refused, match=r"writes keep arriving on old after the freeze: .* t/0 from offset"):
        waits.quiet(lambda: {("t", 0): (n := next(counter), n)}, period=2.0, deadline=5, where="old",
                    clock=FakeClock())


def test_quiet_waits_out_an_open_transaction_then_refuses_naming_it() -> None:
    """High watermarks that stand still are not enough: a transaction left open holds the last stable
    offset below them, and what lies behind it is not readable committed, so it would not be mirrored."""
    resolved = iter([{("t", 0): (20, 12), ("t", 1): (4, 4)}] * 8 + [{("t", 0): (21, 21), ("t", 1): (4, 4)}] * 100)
    done = waits.quiet(lambda: next(resolved), period=2.0, deadline=30, where="old", clock=FakeClock())
    assert done["ends"] == {"t/0": 21, "t/1": 4} and done["open_transactions_seen"] == 1

    with pytest.raises(Refused) as refused:
        waits.quiet(lambda: {("t", 0): (20, 12), ("t", 1): (4, 4)}, period=2.0, deadline=10, where="the old cluster",
                    clock=FakeClock(), bootstrap="127.0.0.1:9092")
    text = refused.value.message + (refused.value.fix or "")
    assert "a transaction is open on the old cluster on t/0: offsets 12..19 are undecided" in text
    assert "kafka-transactions.sh --bootstrap-server 127.0.0.1:9092 describe-producers --topic t --partition 0" in text
    assert "abort --topic t --partition 0 --start-offset 12" in text and "t/1" not in text


def test_hold_waits_while_the_postpone_file_exists(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path, switch={"postpone_file": "hold"})
    (tmp_path / "hold").touch()

    class Removing(FakeClock):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if self.t >= 3:
                (tmp_path / "hold").unlink(missing_ok=True)

    held = waits.hold(plan, Removing())
    assert held["held_seconds"] == pytest.approx(3.0) and held["held"] is True
    # No file: no hold, and so nothing for promote to check again.
    assert waits.hold(plan, FakeClock()) == {"postpone_file": str(tmp_path / "hold"), "held": False,
                                             "held_seconds": 0.0}


def test_the_quiet_period_runs_on_across_the_drain_to_check_drained() -> None:
    """wait-quiet ends after a short floor; check-drained keeps the freeze until the end offsets have stood
    still for the whole quiet period counted from wait-quiet, so the drain's own time is not waited twice."""
    clock = FakeClock()
    ends = {("t", 0): (7, 7), ("t", 1): (3, 3)}
    positions = {("t", 0): 7, ("t", 1): 3}
    quiet = waits.quiet(lambda: ends, period=min(10.0, waits.QUIET_FLOOR), deadline=30, where="old", clock=clock)
    assert quiet["quiet_seconds"] == pytest.approx(waits.QUIET_FLOOR) and quiet["still_seconds"] >= waits.QUIET_FLOOR
    since = (clock.now() - quiet["still_seconds"], {tp: h for tp, (h, _s) in ends.items()})
    clock.t += 4.0  # the drain, the consumers' stop and the groups' sync
    done = waits.still(lambda: ends, lambda: positions, lambda: None, 10.0, since, "old", clock)
    assert done == {"late_offsets": {}, "still_seconds": 10.0} and clock.t == pytest.approx(10.0)

    clock = FakeClock()  # the drain and sync took longer than the period: nothing left to wait
    done = waits.still(lambda: ends, lambda: positions, lambda: None, 2.0, (-5.0, dict(since[1])), "old", clock)
    assert done["still_seconds"] == 5.0 and clock.t == 0.0

    clock = FakeClock()  # a resumed run has no wait-quiet behind it: the whole period, from now
    waits.still(lambda: ends, lambda: positions, lambda: None, 3.0, (clock.now(), None), "old", clock)
    assert clock.t == pytest.approx(3.0)


def test_check_drained_restarts_the_quiet_period_when_the_ends_moved_or_a_late_record_came() -> None:
    clock = FakeClock()
    moved = {("t", 0): (9, 9)}  # moved after wait-quiet saw 7, before the drain copied it
    done = waits.still(lambda: moved, lambda: {("t", 0): 9}, lambda: None, 2.0, (-8.0, {("t", 0): 7}), "old",
                       clock)
    assert done == {"late_offsets": {}, "still_seconds": 2.0} and clock.t == pytest.approx(2.0)

    clock, drained = FakeClock(), {("t", 0): 7}
    reads = iter([{("t", 0): (7, 7)}, {("t", 0): (8, 8)}] + [{("t", 0): (8, 8)}] * 100)

    def redrain() -> None:
        clock.t += 1.5
        drained[("t", 0)] = 8

    done = waits.still(lambda: next(reads), lambda: dict(drained), redrain, 2.0, (-0.5, {("t", 0): 7}), "old", clock)
    assert done["late_offsets"] == {"t/0": 1} and done["still_seconds"] == pytest.approx(2.0)

    counter = iter(range(100, 10_000))
    with pytest.raises(Refused, match=r"writes keep arriving on old after the freeze and the drain: t/0 \(\+"):
        waits.still(lambda: {("t", 0): (n := next(counter), n)}, lambda: {("t", 0): 0}, lambda: None, 2.0,
                    (0.0, None), "old", FakeClock())


def test_with_the_freeze_hooks_evidence_one_reading_starts_the_drain_and_check_drained_confirms() -> None:
    """The freeze_producers hook returned: wait-quiet needs one reading with no open transaction (not the
    floor), and check-drained holds only the confirmation window, not the whole quiet period."""
    clock = FakeClock()
    ends = {("t", 0): (7, 7), ("t", 1): (3, 3)}
    reads: list[int] = []

    def read() -> waits.Ends:
        reads.append(1)
        return ends

    quiet = waits.quiet(read, period=0.0, deadline=30, where="old", clock=clock)
    assert len(reads) == 1 and clock.t == 0.0 and quiet["moves"] == 0
    since = (clock.now() - quiet["still_seconds"], {tp: h for tp, (h, _s) in ends.items()})
    clock.t += 0.4  # a drain and a sync shorter than the confirmation window: the rest is held
    done = waits.still(lambda: ends, lambda: {("t", 0): 7, ("t", 1): 3}, lambda: None, 1.0, since, "old", clock)
    assert done == {"late_offsets": {}, "still_seconds": 1.0} and clock.t == pytest.approx(1.0)

    # an open transaction is still waited out, evidence or not
    resolved = iter([{("t", 0): (20, 12)}] * 4 + [{("t", 0): (21, 21)}] * 10)
    done = waits.quiet(lambda: next(resolved), period=0.0, deadline=30, where="old", clock=FakeClock())
    assert done["open_transactions_seen"] == 1 and done["ends"] == {"t/0": 21}


def test_the_held_period_is_the_quiet_period_without_evidence_and_the_confirmation_window_with_it(
        tmp_path: Path) -> None:
    plan = unit_plan(tmp_path, gates={"quiet_period": "10s", "quiet_confirm": "1s"})
    assert waits.quiet_period(plan, evidence=False) == 10.0 and waits.quiet_period(plan, evidence=True) == 1.0
    longer = unit_plan(tmp_path, gates={"quiet_period": "2s", "quiet_confirm": "5s"})  # never above the period
    assert waits.quiet_period(longer, evidence=True) == 2.0
