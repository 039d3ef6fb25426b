"""Where the shipped runbooks and quality suites are: the repository's runbooks/ and checks/ in a
checkout (or an editable install), the copies inside the package in an installed wheel
(pyproject maps them to cutover.runbooks and cutover.checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

_HERE = Path(__file__).resolve().parent


def folder(kind: Literal["runbooks", "checks"]) -> Path:
    checkout = _HERE.parent / kind
    return checkout if checkout.is_dir() else _HERE / kind
