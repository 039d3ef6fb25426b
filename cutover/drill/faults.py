"""Faults a drill injects into its environment, behind one interface.

The local sandbox implements `FaultInjector` (`cutover.local.sandbox.Sandbox`): it stops
and starts its brokers and takes its catalog and storage away. Against any other environment the
drill has `ByHand`: it injects nothing, and the runner turns each such step into a
manual instruction, so one runbook also guides a staging drill. A new environment fault
(one broker of three, a network partition) is one method here,
its implementation in the sandbox, and one drill op calling it.
"""

from __future__ import annotations

from typing import Any, Protocol

from cutover.errors import CutoverError
from cutover.plan import ClusterSide


class FaultInjector(Protocol):
    #: Whether faults act (False: each becomes a manual instruction for a person).
    automatic: bool

    def stop_cluster(self, side: ClusterSide, kill: bool = False) -> dict[str, Any]:
        """Stop a cluster's broker(s) (SIGKILL: a crash), keeping their data."""

    def start_cluster(self, side: ClusterSide) -> dict[str, Any]:
        """Start a stopped cluster again, on the same address, with its data."""

    def take_catalog(self) -> dict[str, Any]:
        """Take the Iceberg catalog away until `give_catalog` (SQLite: commits refused, readers
        still get in; a REST or PostgreSQL catalog: its server stopped)."""

    def give_catalog(self) -> dict[str, Any]:
        """Let the catalog take writes again."""

    def take_storage(self, kill: bool = False) -> dict[str, Any]:
        """Stop the warehouse's object storage (SIGKILL: a crash) until `give_storage`."""

    def give_storage(self) -> dict[str, Any]:
        """Start the storage again, with its data."""

    def release(self) -> None:
        """Undo what a drill that stopped half-way still holds (the catalog, the storage)."""


class ByHand:
    """An environment cutover does not control: every fault is a person's manual step."""

    automatic = False

    def _refuse(self, what: str) -> dict[str, Any]:
        raise CutoverError(f"{what}: this environment is not the local sandbox; do it by hand")

    def stop_cluster(self, side: ClusterSide, kill: bool = False) -> dict[str, Any]:
        return self._refuse(f"{'kill' if kill else 'stop'} the {side} cluster")

    def start_cluster(self, side: ClusterSide) -> dict[str, Any]:
        return self._refuse(f"start the {side} cluster")

    def take_catalog(self) -> dict[str, Any]:
        return self._refuse("take the catalog away")

    def give_catalog(self) -> dict[str, Any]:
        return self._refuse("give the catalog back")

    def take_storage(self, kill: bool = False) -> dict[str, Any]:
        return self._refuse(f"{'kill' if kill else 'stop'} the warehouse's storage")

    def give_storage(self) -> dict[str, Any]:
        return self._refuse("start the warehouse's storage again")

    def release(self) -> None:
        pass
