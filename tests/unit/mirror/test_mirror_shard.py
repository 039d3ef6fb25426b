"""The shard split (pure): deterministic, stable when topics grow."""

from __future__ import annotations

import pytest

from cutover.errors import UsageError
from cutover.mirror.shard import Shard, owner


def test_shards_split_deterministically_and_survive_growth() -> None:
    shards = [Shard(i, 3) for i in range(3)]
    parts = [("orders", p) for p in range(24)] + [("payments", p) for p in range(5)]
    owners = {tp: [s for s in shards if s.owns(*tp)] for tp in parts}
    assert all(len(o) == 1 for o in owners.values())
    assert all(len([tp for tp in parts if s.owns(*tp)]) > 3 for s in shards)
    assert Shard.parse("2/3") == Shard(2, 3) and str(Shard(2, 3)) == "2/3"
    for bad in ("3/3", "1", "a/b", "-1/2"):
        with pytest.raises(UsageError, match="i/N"):
            Shard.parse(bad)


@pytest.mark.parametrize("shards", [8, 32, 128])
def test_a_layout_of_100000_partitions_on_paper_is_even_complete_and_stable(shards: int) -> None:
    """docs/scale.md's layouts computed, not run: 1,000 topics of 100 partitions over N shards. No shard holds
    more than 1.5 % over the mean, and when every topic doubles its partitions no partition that existed changes
    owner (the new ones spread as evenly). Each shard's own answer agrees with the layout's."""
    tps = [(f"topic-{t:04d}", p) for t in range(1000) for p in range(100)]
    owners = [owner(t, p, shards) for t, p in tps]
    mean = len(tps) / shards
    loads = [owners.count(i) for i in range(shards)]
    assert max(loads) <= mean * 1.015 and min(loads) >= mean * 0.985, (min(loads), max(loads), mean)
    layout = [Shard(i, shards) for i in range(shards)]
    assert all([s.index for s in layout if s.owns(*tps[n])] == [owners[n]] for n in range(0, len(tps), 97))
    assert [owner(t, p, shards) for t, p in tps] == owners  # the same on any host, at any time
    grown = [owner(f"topic-{t:04d}", p, shards) for t in range(1000) for p in range(100, 200)]
    assert max(grown.count(i) for i in range(shards)) <= mean * 1.015
