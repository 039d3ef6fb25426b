"""The switch's preconditions judged on in-memory inputs: each names every failing item, never only the first
(gathering from the clusters, the catalog and the registries is tested on the sandbox:
tests/integration/test_switch_refusals.py)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable

from cutover.mirror.status import GapStatus, MirrorStatus, PartitionStatus
from cutover.plan.model import LagGate
from cutover.registry.audit import MAX_FAILURES, AuditResult, Failure
from cutover.rights import run as rights_run
from cutover.rights.audit import Finding
from cutover.switch import checks, schemas
from cutover.verify.results import Counts, Lag, LastVerify

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def _mirror(*parts: PartitionStatus) -> MirrorStatus:
    return MirrorStatus("forward", "old", "new", "C1", parts, ())


def _p(topic: str, partition: int, position: int | None, lag: int, *gaps: GapStatus) -> PartitionStatus:
    return PartitionStatus(topic, partition, (position or 0) + lag, position, lag, gaps, None)


def test_mirror_lag_names_every_unstarted_partition_every_gap_and_every_partition_over_the_gate() -> None:
    status = _mirror(_p("a", 0, None, 7), _p("a", 1, None, 3), _p("b", 0, 100, 50, GapStatus(10, 25)),
                     _p("b", 1, 90, 5, GapStatus(1, 2), GapStatus(40, 44)), _p("c", 0, 10, 11), _p("c", 1, 10, 10))
    assert checks.mirror_refusal(status, 10) == (
        "the mirror has not started on 2 partition(s): a/0, a/1 (run cutover mirror); "
        "the mirror reports data deleted before it was copied on 2 partition(s): b/0 offsets 10..24, "
        "b/1 offsets 1..1, b/1 offsets 40..43; "
        "mirror lag > gate 10 on 2 partition(s): b/0 (50), c/0 (11)")
    assert checks.mirror_refusal(_mirror(_p("c", 0, 10, 10)), 10) is None
    assert checks.mirror_refusal(_mirror(), 10) == "no selected topic exists on the old cluster"


def _verify(at: dt.datetime, passed: bool = True, old_ahead: int = 0) -> LastVerify:
    return LastVerify(at.isoformat(timespec="seconds"), passed, Counts(), Lag(old_ahead, 0))


def test_verify_names_every_table_and_everything_wrong_with_each() -> None:
    results = {"ns.orders": _verify(NOW - dt.timedelta(hours=2), passed=False, old_ahead=250),
               "ns.payments": None, "ns.refunds": _verify(NOW - dt.timedelta(minutes=5)),
               "ns.audit": _verify(NOW - dt.timedelta(minutes=90))}
    assert checks.verify_refusal(results, NOW, 3600, LagGate(old_ahead=200)) == (
        "the last verify of ns.orders (2026-11-23T10:00:00+00:00) did not pass; the last verify of ns.orders "
        "(2026-11-23T10:00:00+00:00): the old table held 250 rows beyond the new table's position "
        "(gates.max_lag_rows.old_ahead is 200): the new write path was behind, and those rows were never compared; "
        "the last verify of ns.orders is 120 min old; gates.verify_max_age is 60 min; "
        "ns.payments has never been verified; "
        "the last verify of ns.audit is 90 min old; gates.verify_max_age is 60 min "
        "(run cutover verify, or promote --verify)")
    assert checks.verify_refusal({"ns.refunds": results["ns.refunds"]}, NOW, 3600, LagGate()) is None


def test_verify_since_promote_names_a_stale_verify_that_also_failed_twice_over() -> None:
    promoted = NOW - dt.timedelta(minutes=30)
    results = {"ns.orders": _verify(NOW - dt.timedelta(hours=1), passed=False), "ns.payments": None,
               "ns.refunds": _verify(NOW)}
    assert checks.since_promote_refusal(results, promoted) == (
        "the last verify of ns.orders (2026-11-23T11:00:00+00:00) is stale: it is older than the promote "
        "(2026-11-23T11:30:00+00:00); the last verify of ns.orders (2026-11-23T11:00:00+00:00) did not pass; "
        "ns.payments has never been verified (run cutover verify)")
    assert checks.since_promote_refusal({"ns.refunds": results["ns.refunds"]}, promoted) is None


def test_groups_idle_names_every_group_with_members() -> None:
    assert checks.busy_refusal({"billing": 2, "audit": 0, "alerts": 1}, "new") == \
        "consumer groups have active members on the new cluster: alerts (1), billing (2)"
    assert checks.busy_refusal({"audit": 0}, "new") is None


def test_the_registry_check_names_every_clash_and_every_audit_failure_not_only_the_first() -> None:
    audited = AuditResult("new", "sample", failures=[
        Failure("missing-on-new", "id 9 is not on the new registry", "t", 0, 4, schema_id=9),  # the sync copies it
        Failure("unknown-id", "id 77 is on neither registry", "t", 1, 12, schema_id=77),
        Failure("not-framed", "the value does not start with the magic byte 0", "u", 0, 0)],
        more_failures=Counter({"unknown-id": 3, "missing-on-new": 40}))
    clash = "subject t-value version 1 is id 5 on new but id 7 on old"
    assert schemas.judge([clash], {9}, audited) == (
        f"{clash}; registry audit of the new cluster: unknown-id at t/1 offset 12: id 77 is on neither registry; "
        "registry audit of the new cluster: not-framed at u/0 offset 0: the value does not start with the magic byte "
        f"0; and 3 more unknown-id failure(s) beyond the {MAX_FAILURES} the audit keeps per kind (cutover registry "
        "audit lists them)")
    assert schemas.judge([], {9}, AuditResult("new", "sample", failures=audited.failures[:1])) is None
    assert schemas.judge(["a clash"], set(), None) == "a clash"  # reverse: no audit


def test_rights_match_names_every_blocking_finding() -> None:
    findings = [Finding("missing", f"User:app{i}", f"User:app{i}", "TOPIC", "orders", "READ", "allow", "no acl")
                for i in range(5)]
    found = rights_run.judge(findings)
    assert found is not None and found.startswith("5 rights finding(s): User:app0 may no longer READ TOPIC 'orders'")
    assert all(f"User:app{i} may no longer READ" in found for i in range(5)) and "more" not in found
    assert rights_run.judge([]) is None


def test_the_preconditions_are_evaluated_side_by_side_in_their_order() -> None:
    """A dry run with a cluster out of reach waits about one timeout, not one per check: each check here passes only
    when all of them run at once (a barrier), and the outcomes keep the list's order."""
    import threading

    from cutover.errors import UnreachableError
    from cutover.switch.checks import Check, evaluate

    together = threading.Barrier(4, timeout=30)

    def waits(reason: str | None) -> Callable[[], str | None]:
        def test() -> str | None:
            together.wait()
            return reason
        return test

    def unreachable() -> str | None:
        together.wait()
        raise UnreachableError("could not reach the old cluster", fix="start it")

    checks = [Check("a", "a holds", waits(None)), Check("b", "b holds", waits("b is wrong")),
              Check("c", "c holds", unreachable), Check("d", "d holds", waits(None))]
    outcomes = evaluate(checks)
    assert [(o.name, o.refusal) for o in outcomes] == [
        ("a", None), ("b", "b is wrong"), ("c", "could not check: could not reach the old cluster"), ("d", None)]

