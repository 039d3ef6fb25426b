"""Id-keeping strategies (cutover/registry/strategies.py) against the sandbox's real registries (Apicurio 2.4.2):
the behaviour every strategy in the table must show on a registry it applies to, and a new strategy added to
the table alone, taken up by `registry sync` and `plan check` with nothing else changed."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from cutover.local.sandbox import Sandbox
from cutover.observe import probe
from cutover.plan import load_plan
from cutover.registry import strategies, sync
from cutover.registry.apicurio import ApicurioImport
from cutover.registry.client import RegistryClient, Schema, Version
from cutover.registry.keeping import Copy, IdKeeping, Readiness
from tests.integration.kafka_util import create_topic
from tests.integration.mirror_util import scoped_plan


def _schema(name: str) -> Schema:
    return Schema(json.dumps({"type": "record", "name": name, "namespace": "strategies",
                              "fields": [{"name": "id", "type": "long"}]}), "AVRO")


def _on_old(url: str, subject: str, name: str) -> Version:
    """A version registered on the old registry, as the source holds it."""
    old = RegistryClient("old", {"url": url})
    old.register(subject, _schema(name))
    got = old.version(subject, old.versions(subject)[-1])
    assert got is not None
    return got


@pytest.mark.parametrize("strategy", strategies.STRATEGIES, ids=lambda s: s.name)
def test_every_strategy_keeps_ids_on_a_registry_it_applies_to_and_reads_each_back(
        registries: dict[str, str], strategy: IdKeeping, ns: str) -> None:
    """The shared behaviour: `applies` only reads; a strategy that applies says it is ready, writes every
    version under its source id and version (read back), writes the same again as a no-op, and releases."""
    target = RegistryClient("new", {"url": registries["new"]})
    before = target.subjects()
    applies = strategy.applies(target)
    assert target.subjects() == before  # asked, not written
    if not applies:
        pytest.skip(f"no registry of the sandbox keeps ids by {strategy.name} (Apicurio 2.4.2 has no /mode)")
    ready = strategy.readiness(target, 10)
    assert ready.problem is None, ready
    subject = f"{ns}.orders-value"
    versions = [_on_old(registries["old"], subject, name) for name in ("A", "B")]
    written = strategy.write(target, [Copy(v) for v in versions], {})
    assert written == versions
    for v in versions:
        held = target.version(subject, v.version)
        assert held is not None and held.id == v.id and held.schema.canonical() == v.schema.canonical()
    assert strategy.write(target, [Copy(v) for v in versions], {}) == versions  # again: nothing changes
    assert [target.version(subject, v.version) for v in versions] == [target.version(subject, v.version)
                                                                    for v in versions]
    source = RegistryClient("old", {"url": registries["old"]})
    assert isinstance(strategy.release(source, target, [subject]), list)


class Dummy:
    """A new strategy, known only by its entry in the table: it keeps ids as Apicurio's import does, and
    records what the sync and plan check asked of it."""

    name = "dummy"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def applies(self, target: RegistryClient) -> bool:
        self.calls.append(f"applies {target.name}")
        return True

    def readiness(self, target: RegistryClient, timeout: float) -> Readiness:
        self.calls.append(f"readiness {target.name}")
        return Readiness({"dummy": "ready"})

    def write(self, target: RegistryClient, copies: Sequence[Copy], compatibility: Mapping[str, str]) -> list[Version]:
        self.calls.append(f"write {[(c.version.subject, c.version.version) for c in copies]}")
        return ApicurioImport().write(target, copies, compatibility)

    def release(self, source: RegistryClient, target: RegistryClient, subjects: Iterable[str]) -> list[str]:
        self.calls.append(f"release {sorted(subjects)}")
        return ["dummy released"]


def test_a_strategy_added_to_the_table_alone_is_used_by_sync_release_and_plan_check(
        sandbox: Sandbox, registries: dict[str, str], ns: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    dummy = Dummy()
    monkeypatch.setattr(strategies, "STRATEGIES", [dummy, *strategies.STRATEGIES])
    plan = load_plan(scoped_plan(sandbox.plan_file, ns, tmp_path))
    create_topic(plan.cluster("old"), f"{ns}.events")
    version = _on_old(registries["old"], f"{ns}.events-value", "Event")

    report = probe._registry_report(plan, 10)
    assert report is not None and report["new"]["ids_kept_by"] == "dummy" and report["new"]["dummy"] == "ready"
    assert "problem" not in report["new"], report["new"]

    done = sync.run(plan, execute_it=True, timeout=30)
    assert done.method == "dummy" and done.executed and list(done.copied) == [version]
    assert f"write {[(version.subject, version.version)]}" in dummy.calls
    held = RegistryClient("new", {"url": registries["new"]}).version(version.subject, version.version)
    assert held is not None and held.id == version.id

    source, target = sync.clients(plan, 10)
    assert sync.release(source, target, [version.subject]) == ["dummy released"]
