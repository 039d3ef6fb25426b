"""Client quotas (user, client-id and ip entities, defaults included), read and set through
Kafka's Java Admin API: librdkafka has no DescribeClientQuotas or AlterClientQuotas. The
small program beside this module (ClientQuotas.java) runs through kafka/java_admin.py.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from cutover import jvm
from cutover.kafka import java_admin
from cutover.kafka.clients import ClusterRef

#: One quota entity: (entity type, name) pairs sorted by type; a name of None is the type's default.
Entity = tuple[tuple[str, str | None], ...]
Quotas = dict[Entity, dict[str, float]]

_PROGRAM = jvm.JAVA_SOURCES / "ClientQuotas.java"


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
    return java_admin.run(_PROGRAM, ref, args, doing, timeout,
                          denied_fix="grant it DESCRIBE_CONFIGS (to read quotas) and ALTER_CONFIGS (to set them) "
                                     "on the CLUSTER resource")
