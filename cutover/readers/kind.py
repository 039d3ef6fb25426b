"""What every reader kind offers the rest of cutover: one module per kind (spark, streams, flink, connect),
each checked against this protocol by mypy where readers.translate lists it."""

from __future__ import annotations

from typing import Any, Protocol

from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import state as st
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import Reader
from cutover.readers.spark import Mode, Problem


class ReaderKind(Protocol):
    def position(self, plan: Plan, r: Reader) -> tuple[dict[str, Any], list[Problem]]:
        """The reader's current position (plan check, status, the dry run) and what a move would refuse."""
        ...

    def move(self, plan: Plan, r: Reader, direction: st.Direction, mode: Mode,
             timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Its positions moved through the mirror's exact map (written only when `mode` is execute)."""
        ...

    def started(self, plan: Plan, r: Reader, side: ClusterSide, timeout: float) -> dict[str, Any] | None:
        """After its start hook: whether it resumed where it was moved to; None where its files are the proof."""
        ...
