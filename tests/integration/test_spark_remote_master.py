"""The Spark wiring on a real standalone cluster (not local[*]): the Kafka source and
Iceberg jars reach the executors, and the table lands in the shared catalog."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
import yaml

from cutover import jvm
from cutover.lake import catalog
from cutover.local.sandbox import Sandbox, free_port
from cutover.plan import Plan, load_plan
from tests.conftest import wait_for
from tests.integration.kafka_util import create_topic, produce

SPARK_HOME = Path(pyspark.__file__).parent


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Spark standalone master and one worker, from pyspark's own jars."""
    logs = tmp_path_factory.mktemp("spark-standalone")
    port = free_port()
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "JAVA_HOME": str(Path(jvm.java()).resolve().parents[1]),
           "SPARK_WORKER_DIR": str(logs / "work"), "SPARK_LOCAL_IP": "127.0.0.1"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    url = f"spark://127.0.0.1:{port}"
    with open(logs / "master.log", "wb") as mlog, open(logs / "worker.log", "wb") as wlog:
        master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(free_port())],
                                  stdout=mlog, stderr=subprocess.STDOUT, env=env)
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--cores", "1",
                                   "--memory", "1g", "--webui-port", str(free_port())],
                                  stdout=wlog, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: "Registering worker" in (logs / "master.log").read_text(errors="replace"), 90,
                 "the Spark worker to register with the master")
        yield url, logs
    finally:
        for proc in (worker, master):
            proc.terminate()
            proc.wait(30)


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_kafka_to_iceberg_on_a_standalone_master(standalone: tuple[str, Path], sandbox: Sandbox, plan: Plan, ns: str,
                                                 tmp_path: Path) -> None:
    master_url, logs = standalone
    topic = f"{ns}.events"
    create_topic(plan.cluster("old"), topic, partitions=2)
    produce(plan.cluster("old"), topic, [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2} for i in range(10)])

    data = yaml.safe_load(sandbox.plan_file.read_text())
    data["spark"]["master"] = master_url
    data["env_file"] = str(sandbox.secrets_file)
    remote_plan = tmp_path / "remote.yaml"
    remote_plan.write_text(yaml.safe_dump(data))
    assert load_plan(remote_plan).spec.spark.master == master_url

    table = f"cutover.{ns}.events"
    done = subprocess.run([sys.executable, "-m", "tests.integration.spark_job", str(remote_plan), topic, table],
                          capture_output=True, text=True, timeout=300, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Asked to launch executor" in (logs / "worker.log").read_text(errors="replace")

    rows = catalog.load(plan.spec.catalog).load_table(f"{ns}.events").scan().to_arrow().to_pylist()  # type: ignore[arg-type]
    assert sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in rows) == sorted(
        (i % 2, i // 2, f"k{i}", f"v{i}") for i in range(10))
