"""The mirror producer's codec (pure logic): the one most copied topics name, else lz4, unless the plan says."""

from __future__ import annotations

import pytest

from cutover.mirror.topics import codec


@pytest.mark.parametrize(("setting", "topics", "expected"), [
    ("auto", ["zstd", "zstd", "lz4", "producer"], "zstd"),
    ("auto", ["producer", "producer"], "lz4"),  # none named: the source's producers' codec is unknown
    ("auto", [], "lz4"),
    ("auto", ["gzip", "snappy"], "gzip"),            # a tie: the first by name, the same on every start
    ("auto", ["uncompressed", "uncompressed", "snappy", "producer"], "none"),
    ("none", ["zstd"], "none"),
    ("zstd", ["lz4", "lz4"], "zstd"),
])
def test_the_producer_codec_is_the_one_most_topics_name(setting: str, topics: list[str], expected: str) -> None:
    assert codec(setting, topics) == expected
