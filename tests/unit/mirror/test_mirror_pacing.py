"""A mirror run's periodic work is spaced by its own cost, so its share of the run does not grow with the
partitions (at a fixed interval it grew with their square)."""

from __future__ import annotations

from cutover.mirror.runner import PACE, due


def test_cheap_periodic_work_keeps_its_interval() -> None:
    assert due(100.0, 5.0, 0.01) == 105.0
    assert due(100.0, 5.0, 0.0) == 105.0


def test_costly_periodic_work_waits_pace_times_its_cost() -> None:
    assert due(100.0, 5.0, 1.2) == 100.0 + PACE * 1.2
    # the share of the time it takes stays at most 1/PACE
    cost = 3.0
    assert cost / (due(0.0, 5.0, cost) - 0.0) <= 1 / PACE

