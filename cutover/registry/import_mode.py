"""Ids kept through the Confluent API's IMPORT mode (Confluent, Karapace, Redpanda, Apicurio 3): each copied
subject is put in IMPORT mode and every version is posted with its id and version; each write is read back
(`GET /schemas/ids/{id}`), so a re-post that a registry answers with an error but holds (redpanda#26331) is
a success, and one that it took under another id is an error, named. After the switch the subjects leave
IMPORT mode for the mode each has on the source."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from cutover.errors import CutoverError, Refused
from cutover.output import progress
from cutover.registry.client import RegistryClient, Version
from cutover.registry.keeping import Copy, Readiness, confirm

log = logging.getLogger("cutover.registry")
IMPORT = "IMPORT"


class ImportMode:
    """The IdKeeping of a registry with the Confluent API's /mode."""

    name = "import-mode"

    def applies(self, target: RegistryClient) -> bool:
        return target.mode() is not None

    def readiness(self, target: RegistryClient, timeout: float) -> Readiness:
        return Readiness()

    def write(self, target: RegistryClient, copies: Sequence[Copy], compatibility: Mapping[str, str]) -> list[Version]:
        for subject in sorted({c.version.subject for c in copies}):
            _import_mode(target, subject)
        written = []
        for c in copies:
            _write(target, c.version)
            written.append(c.version)
            progress(f"registry: {c.version.subject} version {c.version.version} -> id {c.version.id} on "
                     f"{target.name}" + (f" ({c.note})" if c.note else ""))
        return written

    def release(self, source: RegistryClient, target: RegistryClient, subjects: Iterable[str]) -> list[str]:
        """Take the moved subjects out of IMPORT mode on `target`, into the mode each has on the source
        (READWRITE unless the source says otherwise), so that its producers can register."""
        changed = []
        for s in subjects:
            if target.mode(s) == IMPORT:
                target.set_mode(_writable(source.mode(s)), s)
                changed.append(s)
        if target.mode() == IMPORT:
            target.set_mode(_writable(source.mode()))
            changed.append("(global)")
        return changed


def _import_mode(target: RegistryClient, subject: str) -> None:
    """IMPORT mode for one subject (registries that take it per subject), else for the whole registry."""
    if target.mode(subject) == IMPORT or target.mode() == IMPORT:
        return
    try:
        target.set_mode(IMPORT, subject)
        return
    except CutoverError as exc:
        log.info("%s: IMPORT mode for subject %s refused (%s); asking for it registry-wide", target.base, subject,
                 exc.message)
    try:
        target.set_mode(IMPORT)
    except CutoverError as exc:
        raise Refused(f"{target.describe()} does not take IMPORT mode ({exc.message}), so it cannot keep schema ids",
                      fix="enable modes on the target (Confluent: mode.mutability=true; Apicurio 3: "
                          "apicurio.ccompat.use-canonical-hash and IMPORT mode), or move to an empty registry "
                          "that takes IMPORT mode") from None


def _write(target: RegistryClient, v: Version) -> None:
    """Post one version with its id and version; success is the target holding it, read back."""
    failure: CutoverError | None = None
    try:
        target.register(v.subject, v.schema, v.id, v.version)
    except CutoverError as exc:
        if exc.exit_code != 1 and not exc.retryable:
            raise
        failure = exc  # re-posting what the target already holds is an error on some registries
    confirm(target, v, failure)
    if v.deleted:
        target.delete_version(v.subject, v.version)


def _writable(mode: str | None) -> str:
    """The mode a target takes after its import: the source's own, but never IMPORT (a source that was
    itself the target of an earlier move may still say so)."""
    return mode if mode and mode != IMPORT else "READWRITE"
