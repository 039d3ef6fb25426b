"""Fixtures of the unit tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something listens on (a port in use)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        yield int(held.getsockname()[1])
