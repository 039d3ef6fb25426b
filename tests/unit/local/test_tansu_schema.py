"""The schema file the sandbox writes for a topic Tansu turns into an Iceberg table (cutover/local/tansu.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cutover.errors import UsageError
from cutover.local import tansu


def test_the_schema_gives_the_key_and_each_value_column_a_json_type(tmp_path: Path) -> None:
    columns = [{"name": "seq", "type": "long"}, {"name": "amount", "type": "double"}, {"name": "who", "type": "string"}]
    path = tansu.write_schema(tmp_path, "orders", columns)
    assert path == tmp_path / "schemas" / "orders.json"
    # the key too: Tansu writes every record's key into its table and refuses a record whose key has no field id
    assert json.loads(path.read_text()) == {"type": "object", "properties": {
        "key": {"type": "string"},
        "value": {"type": "object", "properties": {"seq": {"type": "integer"}, "amount": {"type": "number"},
                                                   "who": {"type": "string"}}}}}


def test_a_column_type_without_a_json_type_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        tansu.write_schema(tmp_path, "orders", [{"name": "at", "type": "timestamp"}])
    assert "column type(s) timestamp have no JSON Schema type" in refused.value.message
    assert not (tmp_path / "schemas").exists()
