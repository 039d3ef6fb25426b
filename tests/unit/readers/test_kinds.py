"""A reader kind is its module and its entry. A dummy kind, added as one entry of plan/reader_kinds.py's
READER_KINDS (its module by name), is checked by the plan, planned by the switch, said by its dry run, plan
check, status and `cutover readers move`: nothing else names a kind. Then the behaviour every kind in
the table shares, run for each (as pyiceberg's catalog tests run for each catalog)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from cutover.cli.readers import _render as moved_render
from cutover.errors import UsageError
from cutover.mirror import state as st
from cutover.observe.probe import render_readers
from cutover.plan import ClusterSide, Plan, load_plan, reader_kinds
from cutover.plan.model import Reader
from cutover.readers import translate
from cutover.readers.kind import Mode, Problem, ReaderKind
from cutover.switch import effects, status, steps

PLAN = """\
clusters:
  old: {bootstrap.servers: "127.0.0.1:9092"}
  new: {bootstrap.servers: "127.0.0.1:9093"}
readers:
"""


class Dummy:
    """A kind of reader no module of cutover knows: each answer says it came from here."""

    def position(self, plan: Plan, r: Reader) -> tuple[dict[str, Any], list[Problem]]:
        return {"reader": r.name, "kind": r.kind, "location": "dummy://here", "marker": "at 7"}, []

    def move(self, plan: Plan, r: Reader, direction: st.Direction, mode: Mode,
             timeout: float = 30.0) -> dict[str, Any]:
        return {"reader": r.name, "kind": r.kind, "direction": direction, "mode": mode}

    def started(self, plan: Plan, r: Reader, side: ClusterSide, timeout: float) -> dict[str, Any] | None:
        return {"resumed_on": side}

    def on_server(self, r: Reader) -> bool:
        return False

    def step_text(self, r: Reader, target: ClusterSide) -> str:
        return f"dummy: positions to the {target} cluster"

    def would_move(self, plan: Plan, r: Reader, target: ClusterSide, where: str, now: dict[str, Any] | None) -> str:
        return f"dummy: would move {where} ({now and now['marker']}) to the {target} cluster"

    def started_check(self, r: Reader, side: ClusterSide) -> str | None:
        return f"dummy: check it resumed on the {side} cluster"

    def hook_context(self, plan: Plan, r: Reader) -> dict[str, str | None]:
        return {"dummy_folder": "/d"}

    def position_line(self, e: dict[str, Any]) -> str:
        return f"reader {e['reader']} (dummy): {e['marker']}"

    def status_text(self, e: dict[str, Any]) -> str:
        return f"dummy {e['marker']}"

    def moved_text(self, head: str, m: dict[str, Any]) -> str:
        return f"{head}: dummy moved ({m['mode']})"


@pytest.fixture
def dummy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dummy kind's one entry; its "module" is the object imported under its name."""
    kind: ReaderKind = Dummy()
    monkeypatch.setitem(sys.modules, "tests_dummy_reader_kind", kind)  # type: ignore[arg-type]
    monkeypatch.setitem(reader_kinds.READER_KINDS, "dummy",
                        reader_kinds.KindEntry("tests_dummy_reader_kind", (), ("checkpoint",)))


def _plan(tmp_path: Path, readers: str) -> Plan:
    (tmp_path / "plan.yaml").write_text(PLAN + readers)
    return load_plan(tmp_path / "plan.yaml", environ={})


def test_a_new_reader_kind_is_its_module_and_its_two_table_entries(dummy: None, tmp_path: Path) -> None:
    plan = _plan(tmp_path, "  - {name: d, kind: dummy}\n")
    (r,) = plan.spec.readers
    planned = {s.name: s.does for s in steps.promote(plan)}
    assert planned["move-reader:d"] == "stop reader d (hook stop_reader); dummy: positions to the new cluster"
    assert planned["start-reader:d"] == ("start reader d on the new cluster (hook start_reader); dummy: check it "
                                         "resumed on the new cluster")
    dry = effects.DryRun(plan)
    assert dry.move_reader(r, "forward") == {"would": "reader d: dummy: would move dummy://here (at 7) to the new "
                                                      "cluster"}
    assert dry.reader_started(r, "old") == {"would": "reader d: dummy: check it resumed on the old cluster"}
    assert effects._reader_context(plan, "d") == {"dummy_folder": "/d"}
    found, problems = translate.positions(plan)
    assert problems == [] and render_readers(found) == ["reader d (dummy): at 7"]
    assert status.reader_lines([{**found[0], "on": "old", "last_move": None}]) == \
        ["reader d: on the old cluster, dummy at 7"]
    moved = translate.move(plan, r, "forward", "dry-run")
    assert moved_render(moved) == "reader d (dummy, forward): dummy moved (dry-run)"
    assert translate.started(plan, r, "new") == {"resumed_on": "new"}


def test_a_new_kinds_fields_are_checked_from_its_entry(dummy: None, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        _plan(tmp_path, "  - {name: e, kind: dumy}\n")
    assert "readers[0].kind: expected one of" in str(refused.value) and "did you mean 'dummy'?" in str(refused.value)
    with pytest.raises(UsageError) as refused:
        _plan(tmp_path, "  - {name: d, kind: dummy, state_dir: st}\n")
    assert "readers[0].state_dir: state_dir does not apply to a dummy reader" in str(refused.value)
    assert _plan(tmp_path, "  - {name: d, kind: dummy, checkpoint: ck}\n").spec.readers[0].checkpoint == "ck"


# The shared behaviour suite: every kind in the table.

SAMPLES = {
    "spark-checkpoint": "{name: q, kind: spark-checkpoint, checkpoint: absent/ck}",
    "kafka-streams": "{name: q, kind: kafka-streams, application_id: wc, state_dir: absent/state}",
    "flink": "{name: q, kind: flink, source_uid: src, savepoints: absent/sp}",
    "connect": "{name: q, kind: connect, old_url: 'http://127.0.0.1:1', new_url: 'http://127.0.0.1:2', "
               "connectors: [files]}",
}


def test_every_kind_in_the_table_is_a_module_with_the_whole_protocol() -> None:
    assert sorted(reader_kinds.READER_KINDS) == sorted(SAMPLES)
    members = [n for n in vars(ReaderKind) if not n.startswith("_")]
    assert len(members) >= 11
    for name, entry in reader_kinds.READER_KINDS.items():
        module = translate.kind(name)
        assert module.__name__ == entry.module  # type: ignore[attr-defined]
        assert [m for m in members if not callable(getattr(module, m, None))] == [], name


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_kind_says_its_move_toward_the_cluster_it_moves_to(name: str, tmp_path: Path) -> None:
    plan = _plan(tmp_path, f"  - {SAMPLES[name]}\n")
    (r,) = plan.spec.readers
    kind = translate.kind(name)
    for target in ("new", "old"):
        assert f"the {target} cluster" in kind.would_move(plan, r, target, "WHERE", None)
    said = kind.started_check(r, "new")
    assert said is None or "the new" in said
    assert all(isinstance(v, str | None) for v in kind.hook_context(plan, r).values())
    assert kind.step_text(r, "new") and not kind.step_text(r, "new").endswith(".")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_kind_read_without_its_files_names_the_reader_and_the_fix(name: str, tmp_path: Path) -> None:
    """A reader whose folder is not there (or whose worker is on a server, offline) is an entry and a finding
    naming it, never an exception: plan check lists every reader."""
    plan = _plan(tmp_path, f"  - {SAMPLES[name]}\n")
    (r,) = plan.spec.readers
    found, problems = translate.positions(plan, reach=False)
    assert [(e["reader"], e["kind"]) for e in found] == [("q", name)]
    if translate.kind(name).on_server(r):
        assert found[0]["not_read"] and problems == []
        return
    assert problems and all(p[0] == "q" and p[1] and p[2] for p in problems), problems
    assert render_readers(found)[0].startswith(f"reader q ({name}")
