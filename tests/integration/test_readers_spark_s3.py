"""A real Spark Structured Streaming query whose checkpoint and file sink are on the plan's S3 storage
(`s3a://`, the sandbox's s3proxy), moved to the new cluster by `cutover readers translate`: the
checkpoint's positions read and the next batch written on the object store, every record in the sink
exactly once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow.dataset as ds
import pytest
from pyarrow.fs import S3FileSystem

from cutover import jvm
from cutover.errors import AccessDenied
from cutover.lake import spark as spark_mod
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic, read_all
from tests.integration.stream_query_util import canary, query, records, translate

pytestmark = pytest.mark.lake(only="rest")  # the storage matters, not which catalog

#: Hadoop's S3A file system for the query's s3a:// checkpoint, without its AWS SDK bundle (half a
#: gigabyte): Spark's class path already has the SDK 2.44.4 in Iceberg's iceberg-aws-bundle; the
#: transfer manager, which that bundle leaves out, is added at the same version.
S3A = jvm.JarSet("spark-s3a", (f"org.apache.hadoop:hadoop-aws:{jvm.HADOOP_VERSION}",
                               "software.amazon.awssdk:s3-transfer-manager:2.44.4"), transitive=False)


def _s3a_conf(plan: Plan) -> dict[str, str]:
    """What a team's Spark sets to checkpoint on S3-compatible storage, from the plan's S3 settings."""
    assert plan.spec.catalog is not None
    props = plan.spec.catalog.properties
    jars = [*spark_mod.extra_jars(), *jvm.resolve(S3A)]
    return {**plan.spec.spark.conf, "spark.jars": ",".join(str(j) for j in jars),
            "spark.hadoop.fs.s3a.endpoint": props["s3.endpoint"],
            "spark.hadoop.fs.s3a.endpoint.region": props.get("s3.region", "us-east-1"),
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": "${CUTOVER_SANDBOX_S3_ACCESS_KEY}",
            "spark.hadoop.fs.s3a.secret.key": "${CUTOVER_SANDBOX_S3_SECRET_KEY}"}


def _store(plan: Plan) -> S3FileSystem:
    assert plan.spec.catalog is not None
    props = plan.spec.catalog.properties
    return S3FileSystem(endpoint_override=props["s3.endpoint"], access_key=props["s3.access-key-id"],
                        secret_key=props["s3.secret-access-key"], region=props.get("s3.region", "us-east-1"))


def _key(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.netloc}{parts.path}"


def _text(fs: S3FileSystem, uri: str) -> str:
    with fs.open_input_stream(_key(uri)) as src:
        return bytes(src.read()).decode()


def _names(fs: S3FileSystem, uri: str) -> list[str]:
    from pyarrow.fs import FileSelector

    return sorted(i.base_name for i in fs.get_file_info(FileSelector(_key(uri), allow_not_found=True)))


def test_a_query_checkpointing_on_s3_moves_to_the_new_cluster_at_exactly_the_next_record(
        servers: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    old, new = plan.cluster("old"), plan.cluster("new")
    assert plan.spec.catalog is not None and plan.spec.catalog.storage is not None
    bucket = urlsplit(plan.spec.catalog.storage).netloc
    checkpoint, out = f"s3a://{bucket}/{ns}/checkpoint", f"s3a://{bucket}/{ns}/out"
    topics = [f"{ns}.orders"]
    create_topic(old, topics[0], 2)
    plan_file = derive(servers.plan_file, tmp_path / f"{ns}.yaml", merge=True, name=ns,
                       topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                       switch={"journal_dir": str(tmp_path / "journal")}, tables=[], spark={"conf": _s3a_conf(plan)},
                       readers=[{"name": "orders-query", "kind": "spark-checkpoint", "checkpoint": checkpoint,
                                 "sink": out}]).file
    fs = _store(plan)

    missing = cutover("plan", "check", "--plan", str(plan_file), "-o", "json")
    assert [f["problem"] for f in missing.json()["findings"] if f["check"] == "readers"] == [
        f"reader orders-query: checkpoint folder {checkpoint} not found"], missing.out
    offline = cutover("plan", "check", "--plan", str(plan_file), "--offline", "-o", "json").json()
    assert offline["readers"] == [{"reader": "orders-query", "kind": "spark-checkpoint", "location": checkpoint,
                                   "not_read": "on a server: --offline connects to nothing"}]

    sent = records(old, topics, "1", 40)
    query(plan_file, "old", topics, checkpoint, out)  # batches of at most 20 records: 0 and 1
    assert [n for n in _names(fs, f"{checkpoint}/commits") if n.isdigit()] == ["0", "1"]
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0  # its transaction's marker
    sent += records(old, topics, "2", 60)  # after the query stopped: read on the new cluster
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0  # shifts phase 2 on new

    # The last batch planned but not committed (the query stopped in the middle of it): refused, nothing written.
    planned = _text(fs, f"{checkpoint}/offsets/1")
    with fs.open_output_stream(_key(f"{checkpoint}/offsets/2")) as dst:
        dst.write(planned.encode())
    refused = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "orders-query", "--execute")
    assert refused.code == 3 and "batch 2 is planned (offsets/2) but not committed" in refused.err, refused.err
    assert "Traceback" not in refused.err
    assert _names(fs, f"{checkpoint}/commits") == ["0", "1"]
    fs.delete_file(_key(f"{checkpoint}/offsets/2"))

    dry = translate(plan_file, "--dry-run")
    assert dry["location"] == checkpoint and dry["last_committed_batch"] == 1 and dry["written"] == []
    assert {(p["topic"], p["partition"]): p["source_offset"] for p in dry["positions"]} == \
        {(topics[0], 0): 20, (topics[0], 1): 20}  # the checkpoint's own, read from the object store
    assert any(p["target_offset"] != p["source_offset"] for p in dry["positions"])  # the map is not the identity
    canary(old, new, dry, source_is_old=True)

    # Keys the storage refuses: named, with its exit code, the secret nowhere in the output, nothing written.
    assert plan.spec.catalog is not None
    wrong = derive(plan_file, tmp_path / "wrong-key.yaml", catalog={
        "name": plan.spec.catalog.name, "type": plan.spec.catalog.type, "uri": plan.spec.catalog.uri,
        "properties": {**plan.spec.catalog.properties, "s3.secret-access-key": "not-the-secret-4c1e"}}).file
    denied = cutover("readers", "translate", "--plan", str(wrong), "--reader", "orders-query", "--dry-run")
    assert denied.code == AccessDenied.exit_code and "the storage refused the keys or the access" in denied.err, \
        denied.err
    assert "not-the-secret-4c1e" not in denied.err + denied.out and "Traceback" not in denied.err

    done = translate(plan_file, "--execute")
    assert done["written"] == [f"{checkpoint}/offsets/2", f"{out}/_spark_metadata/2", f"{checkpoint}/commits/2"]
    lines = _text(fs, f"{checkpoint}/offsets/2").split("\n")
    assert lines[:2] == planned.split("\n")[:2]  # v1 and batch 1's metadata
    assert json.loads(lines[2]) == {topics[0]: {str(p["partition"]): p["target_offset"] for p in dry["positions"]}}
    assert _text(fs, f"{checkpoint}/commits/2") == _text(fs, f"{checkpoint}/commits/1")
    assert _text(fs, f"{out}/_spark_metadata/2") == "v1"
    again = translate(plan_file, "--execute")
    assert again["already_moved"] and again["written"] == []
    moves = [json.loads(line) for line in (tmp_path / "journal" / ns / "readers.jsonl").read_text().splitlines()]
    assert [(m["location"], m["direction"], m["batch"]) for m in moves] == [(checkpoint, "forward", 2)]

    query(plan_file, "new", topics, checkpoint, out)
    got: list[dict[str, Any]] = ds.dataset(_key(out), filesystem=fs, format="parquet").to_table().to_pylist()
    assert Counter(r["value"] for r in got) == Counter(sent)  # every record once: none skipped, none twice
    assert all(r["value"].split("|")[:2] == [r["topic"], str(r["partition"])] for r in got)
    on_new = {(r.partition, r.offset): r.value.decode() for r in read_all(new, topics[0], 2) if r.value}
    assert all(on_new[(r["partition"], r["offset"])] == r["value"] for r in got if r["value"].split("|")[2] == "2")
