"""The drill's sample consumer joins again when librdkafka left a subscribed topic unassigned (pure)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from cutover.drill.traffic import _unassigned


class _Member:
    """What `_unassigned` asks of a confluent_kafka Consumer: its assignment and the cluster's topics."""

    def __init__(self, assigned: list[str], existing: dict[str, Any]) -> None:
        self.assigned, self.existing = assigned, existing

    def assignment(self) -> list[Any]:
        return [SimpleNamespace(topic=t, partition=0) for t in self.assigned]

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(topics={t: SimpleNamespace(error=e, partitions={0: object()})
                                       for t, e in self.existing.items()})


def test_a_subscribed_topic_left_out_of_a_held_assignment_is_named() -> None:
    topics = ["orders", "payments", "refunds"]
    # payments exists but the member was only given orders (librdkafka#3008); refunds does not exist
    assert _unassigned(_Member(["orders"], {"orders": None, "payments": None}), topics) == {"payments"}  # type: ignore[arg-type]
    assert _unassigned(_Member(["orders", "payments"], {"orders": None, "payments": None}), topics) == set()  # type: ignore[arg-type]
    # still joining (nothing assigned), or the topic's metadata is in error: not judged
    assert _unassigned(_Member([], {"orders": None, "payments": None}), topics) == set()  # type: ignore[arg-type]
    assert _unassigned(_Member(["orders"], {"orders": None, "payments": "LEADER_NOT_AVAILABLE"}), topics) == set()  # type: ignore[arg-type]
