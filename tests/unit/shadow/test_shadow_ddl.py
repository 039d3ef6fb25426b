"""The shadow's table DDL (pure): partition transforms."""

from __future__ import annotations

import pytest

from cutover.errors import UsageError
from cutover.shadow.ddl import partition_sql


def test_partition_transforms_render_as_iceberg_ddl_and_unknown_ones_are_named() -> None:
    cols = ["id", "kafka_timestamp", "name"]
    assert partition_sql(["day(kafka_timestamp)", "bucket(16, id)", "name"], cols, "p") == (
        "days(`kafka_timestamp`), bucket(16, `id`), `name`")
    with pytest.raises(UsageError, match=r"p: partition_by 'weekly\(x\)'"):
        partition_sql(["weekly(x)"], cols, "p")
    with pytest.raises(UsageError, match="names column 'timestamp'"):
        partition_sql(["day(timestamp)"], cols, "p")
