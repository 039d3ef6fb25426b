"""The shard split (pure): deterministic, stable when topics grow."""

from __future__ import annotations

import pytest

from cutover.errors import UsageError
from cutover.mirror.shard import Shard


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
