"""The plan `cutover local up` writes for the sandbox: every section but the registries', as data."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cutover import jvm
from cutover.local.connect import INTERNAL_TOPICS
from cutover.plan.model import Catalog


def document(catalog: Catalog, clusters: Mapping[str, dict[str, str]], env_file: str,
             replication_factor: int, mirror: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The sandbox plan, ready for YAML: its clusters' client properties, its catalog, everything selected;
    `mirror`: more mirror keys (its mode and state's cluster on a Tansu sandbox)."""
    cat: dict[str, Any] = {"name": catalog.name, "type": catalog.type, "uri": catalog.uri}
    if catalog.warehouse:
        cat["warehouse"] = catalog.warehouse
    if catalog.storage:
        cat["storage"] = catalog.storage
    if catalog.properties:
        cat["properties"] = dict(catalog.properties)
    return {
        "version": 1,
        "name": "sandbox",
        "env_file": env_file,
        "clusters": dict(clusters),
        # not the Kafka Connect worker's own topics: its connectors and their positions move with
        # the worker (the sink's hand-over), never as mirrored copies
        "topics": {"include": [".*"], "exclude": [r"__.*", r"_.*", *(re.escape(t) for t in INTERNAL_TOPICS)]},
        "groups": {"include": [".*"]},
        "catalog": cat,
        "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "4",
                                                 "spark.driver.extraJavaOptions": " ".join(jvm.LEAN)}},
        "mirror": {"replication_factor": replication_factor, "group_sync_interval": "5s", **(mirror or {})},
        "routing": {"file": "routing.json"},
        "tables": [],
    }
