"""The Spark driver's class-data archive: `local up` makes it, and a session's JVM maps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cutover.lake import class_archive
from cutover.lake import spark as spark_mod
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan


def test_local_up_made_the_archive_and_the_sessions_jvm_maps_it(sandbox: Sandbox, plan: Plan, spark: Any) -> None:
    conf = spark_mod.session_conf(plan, "cutover-tests")
    archive = class_archive.path(conf)
    assert archive.is_file(), f"{sandbox.dir}: local up made no class-data archive at {archive}"
    assert f"-XX:SharedArchiveFile={archive}" in conf["spark.driver.extraJavaOptions"]
    assert not list(archive.parent.glob("*.partial"))  # nothing half-made left behind
    # The JVM checks the archive against its Java build and class path, and silently starts without it on
    # any mismatch: mapped into the driver's memory means accepted.
    driver = spark.sparkContext._gateway.proc.pid
    assert str(archive) in Path(f"/proc/{driver}/maps").read_text()
    assert spark.sql("SELECT 41 + 1 AS x").collect()[0]["x"] == 42
