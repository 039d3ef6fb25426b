"""Integration fixtures: one real sandbox (two KRaft clusters + SQLite catalog) and one
SparkSession per test session; each test gets its own topic/table namespace.

Set CUTOVER_TEST_SANDBOX=DIR to reuse a sandbox that is already up (faster local
iteration); it is then left running.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, load_plan


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    reuse = os.environ.get("CUTOVER_TEST_SANDBOX")
    box = Sandbox(Path(reuse) if reuse else tmp_path_factory.mktemp("sandbox"))
    box.up()
    yield box
    if not reuse:
        box.down()


@contextmanager
def shaped_sandbox(factory: pytest.TempPathFactory, name: str, *up_args: str, reuse_env: str | None = None,
                   timeout: float = 600) -> Iterator[Sandbox]:
    """A sandbox of another shape for one test module: `cutover local up UP_ARGS`, brought down
    at the end even when `up` failed half-way. With `reuse_env` set to a folder in the
    environment, that sandbox is used (and left running), for faster local iteration."""
    from tests.conftest import cutover

    reuse = os.environ.get(reuse_env) if reuse_env else None
    box = Sandbox(Path(reuse) if reuse else factory.mktemp(name))
    try:
        run = cutover("local", "up", *up_args, "--dir", str(box.dir), timeout=timeout)
        assert run.code == 0, run.err
        yield box
    finally:
        if not reuse:
            box.down()


@pytest.fixture(scope="session")
def sandbox_status(sandbox: Sandbox) -> dict[str, Any]:
    return sandbox.status()


@pytest.fixture(scope="session")
def plan(sandbox: Sandbox) -> Plan:
    return load_plan(sandbox.plan_file)


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> str:
    """A name unique to this test, for its topics, groups and Iceberg namespace."""
    base = "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:30]
    return f"t_{base}_{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def spark(plan: Plan) -> Iterator[Any]:
    from cutover.lake import spark as spark_mod

    session = spark_mod.session(plan, "cutover-tests")
    yield session
    session.stop()
