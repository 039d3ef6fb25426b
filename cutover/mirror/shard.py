"""Which mirror process owns which partition: `--shard i/N`, deterministic and stable.

Ownership hashes (topic, partition), so a partition keeps its owner when a topic
grows and any host computes the same split without talking to the others.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from cutover.errors import UsageError


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
        if not m or not 0 <= int(m[1]) < int(m[2]):
            raise UsageError(f"--shard {text!r} is not of the form i/N with 0 <= i < N",
                             fix="for example --shard 0/3, --shard 1/3 and --shard 2/3 on three processes")
        return cls(int(m[1]), int(m[2]))

    def owns(self, topic: str, partition: int) -> bool:
        return owner(topic, partition, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def owner(topic: str, partition: int, count: int) -> int:
    """The index of the shard of a layout of `count` that owns the partition."""
    return zlib.crc32(f"{topic}/{partition}".encode()) % count
