"""Keeping secrets out of logs, errors and reports.

Values of secret-looking client properties are registered when a plan loads; every
line the CLI writes to stderr passes through `scrub`, and configs shown to people
pass through `redact`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_SECRET_KEY = re.compile(r"(password|secret|token|credential|private|\.key$|key\.pem|jaas|user\.info)", re.IGNORECASE)
_MASK = "*****"
_known: set[str] = set()


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def register(value: str) -> None:
    """Remember a secret value so that `scrub` hides it wherever it appears."""
    if value and len(value) >= 3:
        _known.add(value)


def register_config(config: Mapping[str, str]) -> None:
    for key, value in config.items():
        if is_secret_key(key):
            register(value)


def redact(config: Mapping[str, str]) -> dict[str, str]:
    """A copy fit to show: secret-looking values masked."""
    return {k: (_MASK if is_secret_key(k) else v) for k, v in config.items()}


def scrub(text: str) -> str:
    """Mask every registered secret value in a text, longest first."""
    for value in sorted(_known, key=len, reverse=True):
        text = text.replace(value, _MASK)
    return text
