"""How a target registry keeps schema ids: the protocol each strategy implements, one module per strategy
(import_mode.py: the Confluent API's IMPORT mode; apicurio.py: Apicurio 2.x's admin import), and what they
share. strategies.py holds the table that `registry sync`, the switch and `plan check` choose from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cutover.errors import CutoverError
from cutover.registry.client import RegistryClient, Version


@dataclass(frozen=True)
class Readiness:
    """What `plan check` says of a target for its strategy: facts for the report, and what stands in the way."""

    facts: Mapping[str, Any] = field(default_factory=dict)
    problem: str | None = None


@dataclass(frozen=True)
class Copy:
    """One version the sync copies, and why (a note for the progress line: a soft-deleted or referenced one)."""

    version: Version
    note: str = ""


class IdKeeping(Protocol):
    """A way a target registry takes schemas under their ids."""

    #: How reports name it (the sync's `method`, plan check's `ids_kept_by`).
    name: str

    def applies(self, target: RegistryClient) -> bool:
        """Whether `target` keeps ids this way (asked of it, read-only)."""

    def readiness(self, target: RegistryClient, timeout: float) -> Readiness:
        """What `plan check` reports: whether cutover's principal can do what the sync needs (read-only)."""

    def write(self, target: RegistryClient, copies: Sequence[Copy], compatibility: Mapping[str, str]) -> list[Version]:
        """Put every version on `target` under its id and version, each read back (confirm); those written.
        `compatibility` is the subjects' levels on the source where they differ (set after, by the sync)."""

    def release(self, source: RegistryClient, target: RegistryClient, subjects: Iterable[str]) -> list[str]:
        """After the switch: let the target's producers register again (what it changed, for the report)."""


def confirm(target: RegistryClient, v: Version, failure: CutoverError | None) -> None:
    """The target holds `v` under its id and version, read back."""
    held = target.schema(v.id)
    at = target.version(v.subject, v.version, deleted=True)
    if held is None or held.canonical() != v.schema.canonical() or at is None or at.id != v.id:
        found = "nothing" if at is None else f"id {at.id}"
        raise CutoverError(f"{target.describe()} did not keep {v.subject} version {v.version} under id {v.id} "
                           f"(found {found})" + (f": {failure.message}" if failure else ""),
                           fix="the target must take explicit ids in IMPORT mode (or, for Apicurio, be empty under "
                               "the ids moved: its import skips what collides); see the registry's log")
