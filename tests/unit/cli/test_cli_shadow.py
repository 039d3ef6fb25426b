"""`cutover shadow --start-offsets` (pure): inline or from a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutover.cli.shadow import parse_start_offsets
from cutover.errors import UsageError


def test_start_offsets_parse_inline_or_from_a_file(tmp_path: Path) -> None:
    assert parse_start_offsets('{"orders": {"0": 12, "1": 3}}') == {"orders": {0: 12, 1: 3}}
    f = tmp_path / "o.json"
    f.write_text('{"t": {"2": 5}}')
    assert parse_start_offsets(str(f)) == {"t": {2: 5}}
    with pytest.raises(UsageError, match="--start-offsets"):
        parse_start_offsets('{"orders": [1, 2]}')
