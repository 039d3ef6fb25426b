"""The mirror's progress line names the topics furthest behind, not every topic of a large selection."""

from __future__ import annotations

import pytest

from cutover.mirror.runner import LAG_TOPICS, say_progress


def test_a_few_topics_are_each_named_with_their_lag(capsys: pytest.CaptureFixture[str]) -> None:
    say_progress("forward", 1500, 3_000_000, (500, 1_000_000), 2.0, {"b": 0, "a": 12})
    assert capsys.readouterr().err.strip() == "mirror forward: 1,500 records, 500 rec/s, 1.0 MB/s; lag a=12 b=0"


def test_thousands_of_topics_name_the_ones_furthest_behind_and_count_the_rest(
        capsys: pytest.CaptureFixture[str]) -> None:
    lag = {f"t{i:04d}": 0 for i in range(3400)} | {"t0007": 5, "t3000": 40, "t0100": 1}
    say_progress("forward", 0, 0, (0, 0), 1.0, lag)
    line = capsys.readouterr().err.strip()
    named = line.split("; lag ")[1].split(" and ")[0].split()
    assert len(named) == LAG_TOPICS
    assert {"t3000=40", "t0007=5", "t0100=1"} <= set(named)
    assert line.endswith(" and 3,390 more topics=0")
