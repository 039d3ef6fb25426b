"""`plan check` and the Spark commands ask the catalog and the storage apart, within the
deadline, and name what is wrong: which component, where (no secret), and the fix.

The storage probe runs on every sandbox (on SQLite it checks the warehouse folder); the
failures need the catalog and storage servers (CUTOVER_TEST_CATALOG=rest|postgres -m lake).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cutover.local.sandbox import Sandbox
from cutover.plan import derive, load_plan
from tests.conftest import Run, cutover, secret_values
from tests.integration.kafka_util import create_topic

pytestmark = pytest.mark.lake

TIMEOUT = 5


def _variant(box: Sandbox, tmp_path: Path, name: str, **catalog: Any) -> Path:
    """The sandbox's plan with some catalog keys changed."""
    cat = load_plan(box.plan_file).spec.catalog
    assert cat is not None
    properties = {**cat.properties, **catalog.pop("properties", {})}
    return derive(box.plan_file, tmp_path / f"{name}.yaml", merge=True,
                  catalog={**catalog, "properties": properties} if properties else catalog).file


def _check(plan: Path, env: dict[str, str] | None = None, timeout: int = TIMEOUT) -> tuple[Run, dict[str, Any]]:
    """plan check; env: secret values changed (the environment wins over the plan's env_file).
    A command that hangs past its --timeout fails here at the subprocess's own deadline."""
    run = cutover("plan", "check", "--plan", str(plan), "-o", "json", "--timeout", str(timeout), env=env,
                  timeout=timeout + 85)
    return run, run.json()


@pytest.mark.lake(only="rest")  # the storage, the same S3 server under every catalog
def test_plan_check_probes_the_storage_apart_and_leaves_nothing_behind(sandbox: Sandbox, ns: str) -> None:
    create_topic(load_plan(sandbox.plan_file).cluster("old"), f"{ns}.t")  # an empty cluster: nothing to mirror
    run, report = _check(sandbox.plan_file, timeout=30)  # every server answers: a busy host's deadline
    assert run.code == 0, run.err or run.out
    assert report["ok"] is True and report["catalog"]["reachable"] is True
    storage = report["storage"]
    assert storage["usable"] is True, storage
    status = sandbox.status()
    if status["catalog"]["kind"] == "sqlite":
        folder = status["catalog"]["warehouse"].removeprefix("file://")
        assert storage["note"] == f"folder {folder} exists and is writable"
        return
    assert storage["location"] == "s3://warehouse/"
    assert storage["note"] == "wrote, read and deleted a probe object under s3://warehouse/"
    left = [p for p in Path(status["storage"]["folder"]).rglob("*") if ".cutover-probe-" in p.name]
    assert left == []
    text = cutover("plan", "check", "--plan", str(sandbox.plan_file))
    assert text.code == 0
    assert "storage s3://warehouse/: usable: wrote, read and deleted a probe object" in text.out


@pytest.mark.lake(only="rest")  # the storage, the same S3 server under every catalog
def test_plan_check_names_what_is_wrong_with_the_storage(servers: Sandbox, tmp_path: Path, silent_port: int,
                                                          closed_port: int) -> None:
    box = servers
    endpoint = box.status()["storage"]["endpoint"]
    secrets = secret_values(box.dir)

    run, report = _check(box.plan_file, env={"CUTOVER_SANDBOX_S3_SECRET_KEY": "not-the-key"})
    assert run.code == 1 and report["ok"] is False
    assert report["catalog"]["reachable"] is True, report["catalog"]  # the storage alone is named
    storage = report["storage"]
    assert storage["usable"] is False
    assert storage["error"].startswith(f"storage {endpoint} bucket warehouse: the storage refused the keys")
    assert "s3.secret-access-key" in storage["fix"]
    for value in [*secrets, "not-the-key"]:
        assert value not in run.out and value not in run.err

    run, report = _check(_variant(box, tmp_path, "bucket", storage="s3://no-such-bucket/",
                                     warehouse="s3://no-such-bucket/"))
    assert report["storage"]["usable"] is False
    assert report["storage"]["error"].startswith(
        f"storage {endpoint} bucket no-such-bucket: the bucket 'no-such-bucket' does not exist")

    refused = f"http://127.0.0.1:{closed_port}"
    run, report = _check(_variant(box, tmp_path, "refused", properties={"s3.endpoint": refused}))
    assert report["storage"]["error"].startswith(f"storage {refused} bucket warehouse cannot be used")
    assert "s3.endpoint" in report["storage"]["fix"]

    silent = f"http://127.0.0.1:{silent_port}"
    run, report = _check(_variant(box, tmp_path, "silent", properties={"s3.endpoint": silent}))
    said = f"storage {silent} bucket warehouse did not answer within "
    # the whole --timeout, or what the command's start left of it on a busy host (both are exact texts)
    shortened = re.escape(said) + rf"\d+(\.\d+)?s \(what was left of the --timeout of {TIMEOUT}s\)"
    error = report["storage"]["error"]
    assert error == f"{said}{TIMEOUT}s" or re.fullmatch(shortened, error), report["storage"]
    assert run.code == 1  # it ended at its deadline (a hang fails at _check's), not at some client's own


def test_plan_check_names_what_is_wrong_with_the_catalog(servers: Sandbox, tmp_path: Path, silent_port: int,
                                                          closed_port: int) -> None:
    box = servers
    status = box.status()
    kind = status["catalog"]["kind"]
    secrets = secret_values(box.dir)
    uri = load_plan(box.plan_file).spec.catalog.uri  # type: ignore[union-attr]

    if kind == "postgres":
        run, report = _check(box.plan_file, env={"CUTOVER_SANDBOX_CATALOG_PASSWORD": "not-the-password"})
        cat = report["catalog"]
        assert cat["reachable"] is False
        assert cat["error"].startswith(f"catalog cutover at {cat['uri']}: the database refused the login of user ")
        assert "*****" in cat["uri"] and "password" in cat["fix"]
        for value in [*secrets, "not-the-password"]:
            assert value not in run.out and value not in run.err
        refused_uri = uri.replace(f":{status['catalog']['port']}/", f":{closed_port}/")
        silent_uri = uri.replace(f":{status['catalog']['port']}/", f":{silent_port}/")
    else:
        # A server that refuses: the storage's S3 endpoint answers the REST calls with 403.
        run, report = _check(_variant(box, tmp_path, "forbidden", uri=status["storage"]["endpoint"]))
        cat = report["catalog"]
        assert cat["error"].startswith(f"catalog cutover at {status['storage']['endpoint']} refused access (403)")
        refused_uri, silent_uri = f"http://127.0.0.1:{closed_port}", f"http://127.0.0.1:{silent_port}"

    run, report = _check(_variant(box, tmp_path, "refused", uri=refused_uri))
    assert run.code == 1 and report["catalog"]["reachable"] is False
    assert " cannot be used: " in report["catalog"]["error"] and "catalog.uri" in report["catalog"]["fix"]
    assert report["old"]["reachable"] is True and report["new"]["reachable"] is True

    run, report = _check(_variant(box, tmp_path, "silent", uri=silent_uri))
    error = report["catalog"]["error"]  # the whole --timeout, or what the command's start left of it (a busy host)
    assert error.endswith((f" did not answer within {TIMEOUT}s", f"(what was left of the --timeout of {TIMEOUT}s)")), \
        report["catalog"]
    assert report["catalog"]["error"].startswith("catalog cutover at ")
    assert run.code == 1


@pytest.mark.lake(only="rest")  # the storage, the same S3 server under every catalog
def test_a_spark_command_with_wrong_storage_keys_stops_with_the_storage_named_before_spark_starts(
        servers: Sandbox, tmp_path: Path, ns: str) -> None:
    box = servers
    pair = {"topic": f"{ns}.t", "old": f"{ns}.old", "new": f"{ns}.new", "format": "raw"}
    plan = derive(box.plan_file, tmp_path / "keys.yaml", name=ns, tables=[pair]).file
    create_topic(load_plan(plan).cluster("new"), f"{ns}.t")
    run = cutover("shadow", "--plan", str(plan), env={"CUTOVER_SANDBOX_S3_SECRET_KEY": "not-the-key"})
    assert run.code == 1, run.err
    endpoint = box.status()["storage"]["endpoint"]
    assert f"error: storage {endpoint} bucket warehouse: the storage refused the keys" in run.err
    assert "Traceback" not in run.err and "org.apache" not in run.err and "SparkContext" not in run.err
