"""Apicurio Registry 2.x as a target: its Confluent API has no IMPORT mode (`/mode` answers 'Operation not
supported') and ignores `id` in a registration, so ids are kept through its own admin import instead.

The import takes a zip of the form its export writes: a manifest, each schema's content under
its content id (the id its Confluent API serves by default), and each subject version under a
global id of its own. Content is shared across subjects (the same schema under two subjects is
one id, as in Confluent's registry) while global ids are per version, so a version's global id
is derived from its subject and version, far above any the registry allocates itself; its
`registry.ccompat.legacy-id-mode` (global ids as Confluent ids) is therefore not supported.
The registry skips, silently, what collides with what it holds; the sync refuses collisions
before, and reads every id back after.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence

from cutover.errors import CutoverError
from cutover.output import progress
from cutover.registry.client import RegistryClient, Version
from cutover.registry.keeping import Copy, Readiness, confirm

CCOMPAT_ROOT = "/apis/ccompat/"


def native_root(client: RegistryClient) -> str | None:
    """The registry's native API root, when its Confluent API is Apicurio's (…/apis/ccompat/vN)."""
    at = client.base.find(CCOMPAT_ROOT)
    return None if at < 0 else client.base[:at] + "/apis/registry/v2"


def is_apicurio(client: RegistryClient) -> bool:
    root = native_root(client)
    if root is None:
        return False
    try:
        answer = client.session.get(root + "/system/info", timeout=client.timeout)
    except Exception:
        return False
    return answer.ok and "apicurio" in answer.text.lower()


def global_id(subject: str, version: int) -> int:
    """A version's global id: one per (subject, version), above 2**41, where no registry's own sequence is."""
    digest = hashlib.sha256(f"{subject}\0{version}".encode()).hexdigest()
    return (1 << 41) + int(digest[:10], 16)


def import_zip(versions: Iterable[Version], compatibility: dict[str, str]) -> bytes:
    """The admin-import zip that holds `versions` under their own ids, and subjects' compatibility."""
    now = int(time.time() * 1000)
    versions = list(versions)
    latest: dict[str, int] = {}
    for v in versions:
        latest[v.subject] = max(latest.get(v.subject, 0), v.version)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.Manifest.json", json.dumps({
            "systemVersion": "2.4.2.Final", "systemName": "apicurio-registry", "systemDescription": "cutover",
            "exportVersion": "1.0", "exportedOn": now, "exportedBy": "cutover"}))
        contents: set[int] = set()
        for v in versions:
            if v.id in contents:
                continue
            contents.add(v.id)
            data = v.schema.text.encode()
            digest = hashlib.sha256(data).hexdigest()
            refs = [{"groupId": None, "artifactId": s, "version": str(n), "name": name}
                    for name, s, n in v.schema.references]
            z.writestr(f"content/{digest}.Content.json", json.dumps({
                "contentId": v.id, "canonicalHash": digest, "contentHash": digest, "artifactType": None,
                "serializedReferences": json.dumps(refs) if refs else None}))
            z.writestr(f"content/{digest}.Content.data", data)
        for v in versions:
            z.writestr(f"groups/default/artifacts/{v.subject}/versions/{v.version}.ArtifactVersion.json", json.dumps({
                "globalId": global_id(v.subject, v.version), "groupId": None, "artifactId": v.subject,
                "version": str(v.version),
                "versionId": v.version, "artifactType": v.schema.type, "state": "DISABLED" if v.deleted else "ENABLED",
                "name": None, "description": None, "createdBy": "cutover", "createdOn": now, "labels": None,
                "properties": None, "isLatest": v.version == latest[v.subject], "contentId": v.id}))
        for subject, level in compatibility.items():
            z.writestr(f"groups/default/artifacts/{subject}/rules/COMPATIBILITY.ArtifactRule.json", json.dumps({
                "groupId": None, "artifactId": subject, "type": "COMPATIBILITY", "configuration": level}))
    return buf.getvalue()


def import_versions(client: RegistryClient, versions: list[Version], compatibility: dict[str, str]) -> None:
    root = native_root(client)
    assert root is not None
    try:
        answer = client.session.post(root + "/admin/import", data=import_zip(versions, compatibility),
                                     headers={"Content-Type": "application/zip"}, timeout=max(client.timeout, 60))
    except Exception as exc:
        raise CutoverError(f"{client.describe()}: the admin import failed: {exc}",
                           fix="run the same command again: it plans from what the registry holds") from None
    if answer.status_code >= 300:
        raise CutoverError(f"{client.describe()}: the admin import answered {answer.status_code}: {answer.text[:300]}",
                           fix="the registry's principal needs the admin role for /apis/registry/v2/admin/import")


class ApicurioImport:
    """The IdKeeping of Apicurio Registry 2.x (no IMPORT mode): its admin import, into ids it does not hold."""

    name = "apicurio-import"

    def applies(self, target: RegistryClient) -> bool:
        return target.mode() is None and is_apicurio(target)

    def readiness(self, target: RegistryClient, timeout: float) -> Readiness:
        """Whether cutover's principal may use the admin API the import goes through."""
        root = native_root(target)
        assert root is not None
        answer = target.session.get(f"{root}/admin/config/properties", timeout=timeout)
        problem = None if answer.ok else (f"{target.describe()}: cutover's principal may not use Apicurio's admin "
                                          f"API ({answer.status_code}): the sync imports through it")
        return Readiness({"admin": answer.ok}, problem)

    def write(self, target: RegistryClient, copies: Sequence[Copy], compatibility: Mapping[str, str]) -> list[Version]:
        versions = [c.version for c in copies]
        if not versions:
            return []
        import_versions(target, versions, dict(compatibility))
        for v in versions:
            confirm(target, v, None)
        progress(f"registry: {len(versions)} version(s) imported into {target.describe()} under their ids "
                 "(Apicurio's admin import)")
        return versions

    def release(self, source: RegistryClient, target: RegistryClient, subjects: Iterable[str]) -> list[str]:
        return []  # the import changes no mode: producers register as before
