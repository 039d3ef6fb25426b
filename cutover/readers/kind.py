"""What every reader kind offers the rest of cutover: one module per kind (spark, streams, flink, connect), each
checked against this protocol by mypy at its own end. A new kind is its module and its entry in
plan/reader_kinds.py's READER_KINDS (its module's name and its plan fields): the switch, plan check, status and
`cutover readers` ask the kind (readers.translate.kind), never its name."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import state as st
from cutover.plan import ClusterSide, Plan
from cutover.plan.model import Reader

#: How a move runs: a dry run, written, or (Spark) as the starting offsets of a new query.
Mode = Literal["dry-run", "execute", "starting-offsets"]
#: What a move would refuse whatever the reader does: (reader, problem, fix).
Problem = tuple[str, str, str]


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

    def on_server(self, r: Reader) -> bool:
        """Whether its position is read from a server (`plan check --offline` lists it as not read)."""
        ...

    def step_text(self, r: Reader, target: ClusterSide) -> str:
        """What the switch's move step does with it, after its stop hook (the plan of steps)."""
        ...

    def would_move(self, plan: Plan, r: Reader, target: ClusterSide, where: str, now: dict[str, Any] | None) -> str:
        """What the move would do, for a dry run: `where` its location, `now` its position if read."""
        ...

    def started_check(self, r: Reader, side: ClusterSide) -> str | None:
        """What `started` checks after its start hook, in words; None when it checks nothing."""
        ...

    def hook_context(self, plan: Plan, r: Reader) -> dict[str, str | None]:
        """What its stop and start hooks need beyond its name (the hooks' environment)."""
        ...

    def position_line(self, e: dict[str, Any]) -> str:
        """Its position (a `position` entry) in one line: plan check's text."""
        ...

    def status_text(self, e: dict[str, Any]) -> str:
        """Its position and last move for `cutover status` (after "on the <side> cluster, ")."""
        ...

    def moved_text(self, head: str, m: dict[str, Any]) -> str:
        """A `move` result in words (`cutover readers move`), after `head`."""
        ...
