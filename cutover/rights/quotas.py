"""Client quotas (user, client-id and ip entities, defaults included), read and set through
Kafka's Java Admin API: librdkafka has no DescribeClientQuotas or AlterClientQuotas. The
small program beside this module (ClientQuotas.java) runs in Java's single-file source mode
with Kafka's client jars on the class path; its client properties (secrets among them) go in
a private file that is removed at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

from cutover import jvm
from cutover.errors import RightsDenied, UnreachableError
from cutover.kafka.clients import ClusterRef
from cutover.secrets import scrub

#: One quota entity: (entity type, name) pairs sorted by type; a name of None is the type's default.
Entity = tuple[tuple[str, str | None], ...]
Quotas = dict[Entity, dict[str, float]]

_PROGRAM = Path(__file__).with_name("ClientQuotas.java")
_DENIED = ("ClusterAuthorizationException", "AuthorizationException", "SaslAuthenticationException",
           "SslAuthenticationException")


def entity_text(entity: Entity) -> str:
    """`user 'alice'`, `user (default), client-id 'app'`."""
    return ", ".join(f"{t} (default)" if n is None else f"{t} '{n}'" for t, n in entity)


def describe(ref: ClusterRef, timeout: float) -> Quotas:
    """Every client quota the cluster holds."""
    out: Quotas = {}
    for line in _run(ref, ["describe"], "reading the client quotas", timeout).splitlines():
        row = json.loads(line)
        entity = tuple(sorted((str(t), None if n is None else str(n)) for t, n in row["entity"].items()))
        out[entity] = {str(k): float(v) for k, v in row["quotas"].items()}
    return out


def alter(ref: ClusterRef, changes: dict[Entity, dict[str, float | None]], timeout: float) -> None:
    """Set (a value) or remove (None) quotas, all in one request."""
    ops = []
    for entity, quotas in changes.items():
        name = "&".join(t if n is None else f"{t}={quote(n, safe='')}" for t, n in entity)
        ops += [f"{name};{key}={'' if value is None else repr(float(value))}" for key, value in sorted(quotas.items())]
    if ops:
        _run(ref, ["alter", *ops], "setting client quotas", timeout)


def _run(ref: ClusterRef, args: list[str], doing: str, timeout: float) -> str:
    from cutover.shadow.source import java_properties

    props = java_properties(ref.name, ref.properties)
    props.setdefault("request.timeout.ms", str(int(timeout * 1000)))
    props.setdefault("default.api.timeout.ms", str(int(timeout * 1000)))
    with tempfile.TemporaryDirectory(prefix="cutover-quotas-") as folder:  # 0700: the file holds secrets
        config = Path(folder) / "client.properties"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.writelines(f"{k}={_escape(v)}\n" for k, v in props.items())
        cmd = [jvm.java(), "-Xmx256m", *jvm.LEAN, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
               os.pathsep.join(str(j) for j in jvm.resolve(jvm.KAFKA_BROKER)), str(_PROGRAM), str(config), *args]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60, check=False)
        except subprocess.TimeoutExpired:
            raise UnreachableError(f"{ref.describe()} did not answer within {timeout:.0f}s while {doing}",
                                   fix="check that the cluster is up and reachable") from None
    if done.returncode != 0:
        last = scrub((done.stderr.strip().splitlines() or ["(no output)"])[-1])
        if any(d in last for d in _DENIED):
            raise RightsDenied(f"{ref.describe()} refused cutover's principal while {doing}: {last}",
                               fix="grant it DESCRIBE_CONFIGS (to read quotas) and ALTER_CONFIGS (to set them) "
                                   "on the CLUSTER resource")
        raise UnreachableError(f"{ref.describe()}: {doing} failed: {last}",
                               fix="check that the cluster is up and reachable, and its client properties")
    return done.stdout


def _escape(value: str) -> str:
    """A value as java.util.Properties reads it back (PEM text spans lines)."""
    return (value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            .replace("=", "\\=").replace(":", "\\:"))
