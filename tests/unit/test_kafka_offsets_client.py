"""The offset helpers use the admin client they are given, although an idle AdminClient is falsy.

`len(AdminClient)` is the length of its outbound queue, so an idle client is false in a boolean
context: `client or admin(ref)` opened a new client (connections, metadata) on every call. The
switch's offset reads took 1 to 3 s instead of a few milliseconds when a new client met an
unknown leader. Pure logic: the given client is a stand-in that is falsy like an idle one.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from cutover.kafka import offsets
from cutover.kafka.clients import ClusterRef


class IdleClient:
    """Falsy, as an idle AdminClient is; answers list_offsets from a table."""

    def __init__(self) -> None:
        self.calls = 0

    def __len__(self) -> int:
        return 0

    def list_offsets(self, request: dict[TopicPartition, Any], **_kw: Any) -> dict[TopicPartition, Any]:
        self.calls += 1
        out = {}
        for tp in request:
            f: concurrent.futures.Future[Any] = concurrent.futures.Future()
            f.set_result(type("Info", (), {"offset": 40 + tp.partition})())
            out[tp] = f
        return out

    def poll(self, _timeout: float) -> int:
        return 0


def test_log_offsets_uses_the_client_it_is_given_even_an_idle_falsy_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_new_client(_ref: ClusterRef) -> None:
        raise AssertionError("a new admin client was opened although one was given")

    monkeypatch.setattr(offsets, "admin", no_new_client)
    client = IdleClient()
    assert not client
    got = offsets.log_offsets(ClusterRef("old", {"bootstrap.servers": "127.0.0.1:1"}), [("t", 0), ("t", 2)], "high",
                              5, client)  # type: ignore[arg-type]
    assert got == {("t", 0): 40, ("t", 2): 42} and client.calls == 1
