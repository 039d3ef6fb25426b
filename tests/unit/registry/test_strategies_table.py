"""The id-keeping strategies' table: each strategy is found by the name reports give it (no registry asked)."""

from __future__ import annotations

from cutover.registry import strategies


def test_each_strategy_has_its_own_name_and_is_found_by_it() -> None:
    names = [s.name for s in strategies.STRATEGIES]
    assert len(set(names)) == len(names) and names[0] == "import-mode"
    assert [strategies.named(n) for n in names] == strategies.STRATEGIES
