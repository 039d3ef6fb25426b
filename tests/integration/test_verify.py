"""cutover verify against real Kafka, Spark, the catalog and great-expectations: a mirrored
topic written into a legacy table (from the old cluster) and a shadow table (from the new
one), with planted differences found exactly."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cutover.lake import tables
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from cutover.verify import report
from cutover.verify import run as verify_run
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic
from tests.integration.mirror_util import scoped_plan, start_mirror
from tests.integration.shadow_util import produce_txn, shadow, shadow_plan

pytestmark = pytest.mark.usefixtures("spark")

SCHEMA = [{"name": "id", "type": "long", "nullable": False}, {"name": "name", "type": "string"},
          {"name": "amount", "type": "decimal(12,2)"}, {"name": "score", "type": "double"}]
OFFSETS = {"partition": "kafka_partition", "offset": "kafka_offset"}


def _records(start: int, n: int) -> list[dict[str, Any]]:
    return [{"value": json.dumps({"id": i, "name": f"n{i}", "amount": f"{i}.25", "score": i / 3}).encode(),
             "key": b"k%d" % i, "partition": i % 2} for i in range(start, start + n)]


def _mirror(sandbox: Sandbox, ns: str, tmp_path: Path) -> None:
    folder = tmp_path / "mirror"  # not beside the test's plans: the same name would replace one
    folder.mkdir(exist_ok=True)
    proc = start_mirror(scoped_plan(sandbox.plan_file, ns, folder), "--until-caught-up")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


def _setup(sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str, aborted: int = 10,
           **pair: Any) -> tuple[Plan, Plan]:
    """old topic -> (mirror) -> new topic; legacy table from old, shadow table from new. `aborted` records
    between ids 0..29 and 30..59 leave a gap on old that the mirror does not copy."""
    topic = f"{ns}.orders"
    create_topic(plan.cluster("old"), topic, 2)
    produce_txn(plan.cluster("old"), topic, f"{ns}-tx", [(_records(0, 30), True), (_records(100, aborted), False),
                                                        (_records(30, 30), True)])
    _mirror(sandbox, ns, tmp_path)
    legacy = shadow_plan(sandbox.plan_file, f"{ns}_legacy", tmp_path, [
        {"topic": topic, "old": f"{ns}.unused", "new": f"{ns}.legacy", "schema": SCHEMA}])
    main = shadow_plan(sandbox.plan_file, ns, tmp_path, [
        {"topic": topic, "old": f"{ns}.legacy", "new": f"{ns}.orders", "schema": SCHEMA,
         "old_offset_columns": OFFSETS, **pair}])
    shadow(legacy, cluster="old")
    shadow(main)
    return legacy, main


def _sql(spark: Any, plan: Plan, statement: str, table: str) -> None:
    spark.sql(statement.format(t=tables.qualified(plan, table)))


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_identical_tables_pass_and_planted_differences_are_each_found(
        sandbox: Sandbox, plan: Plan, spark: Any, tmp_path: Path, ns: str) -> None:
    # 2,100 aborted records: ids 30..59 sit past old offset 1,050 and at new offsets below 40, so the rows of
    # the differences below (all among them) are in other offset buckets on each cluster.
    _legacy, main = _setup(sandbox, plan, tmp_path, ns, aborted=2100)
    clean = verify_run.verify(main, verify_run.Options()).as_dict()
    t = clean["tables"][0]
    assert clean["passed"] and t["mode"] == "offsets"
    assert t["counts"] == {"old_rows": 60, "new_rows": 60, "matched": 60, "missing": 0, "extra": 0,
                           "mismatched": 0, "duplicates_old": 0, "duplicates_new": 0}
    assert t["lag"]["old_ahead"] == t["lag"]["new_ahead"] == 0
    assert verify_run.last_result(main, f"{ns}.orders").passed is True  # type: ignore[union-attr]

    rows = {r["id"]: r for r in spark.table(tables.qualified(main, f"{ns}.legacy")).collect()}
    where = {i: (rows[i]["kafka_partition"], rows[i]["kafka_offset"]) for i in (37, 38, 39, 40, 41, 43)}
    # Two records that traded places (same partition, same bucket): equal content overall, each wrong.
    _sql(spark, main, """MERGE INTO {t} AS a USING (
        SELECT x.kafka_partition AS p, x.kafka_offset AS o, y.id, y.name, y.amount, y.score
        FROM {t} x JOIN {t} y ON (x.id = 41 AND y.id = 43) OR (x.id = 43 AND y.id = 41)) AS b
        ON a.kafka_partition = b.p AND a.kafka_offset = b.o
        WHEN MATCHED THEN UPDATE SET a.id = b.id, a.name = b.name, a.amount = b.amount, a.score = b.score""",
         f"{ns}.orders")
    # the swapped pair is alone in its bucket: no other difference leads verify to it
    t = verify_run.verify(main, verify_run.Options()).as_dict()["tables"][0]
    swapped = {"id": {"old": 41, "new": 43}, "name": {"old": "n41", "new": "n43"},
               "amount": {"old": Decimal("41.25"), "new": Decimal("43.25")}, "score": {"old": 41 / 3, "new": 43 / 3}}
    back = {c: {"old": v["new"], "new": v["old"]} for c, v in swapped.items()}
    assert not t["passed"] and t["counts"]["mismatched"] == 2 and t["counts"]["matched"] == 58
    assert [(x["partition"], x["id"], x["columns"]) for x in t["samples"]["mismatched"]] == [
        (*where[41], swapped), (*where[43], back)]

    # Plant: a dropped row (id 37), a duplicated row (id 38), an altered value (id 39), and an
    # extra row (id 40 removed from the legacy table, so only the new table has it).
    _sql(spark, main, "DELETE FROM {t} WHERE id = 37", f"{ns}.orders")
    _sql(spark, main, "INSERT INTO {t} SELECT * FROM {t} WHERE id = 38", f"{ns}.orders")
    _sql(spark, main, "UPDATE {t} SET name = 'changed' WHERE id = 39", f"{ns}.orders")
    for table in (f"{ns}.orders", f"{ns}.legacy"):  # NaN on both sides is equal, in the counts and the samples
        _sql(spark, main, "UPDATE {t} SET score = CAST('NaN' AS DOUBLE) WHERE id = 39", table)
    _sql(spark, main, "DELETE FROM {t} WHERE id = 40", f"{ns}.legacy")
    run = cutover("verify", "--plan", str(main.file), "-o", "json", "--report", str(tmp_path / "report"))
    assert run.code == 4, run.err
    t = run.json()["tables"][0]
    assert not t["passed"]
    assert {k: t["counts"][k] for k in ("missing", "extra", "mismatched", "duplicates_new", "duplicates_old")} == {
        "missing": 1, "extra": 1, "mismatched": 3, "duplicates_new": 1, "duplicates_old": 0}
    s = t["samples"]
    assert [(x["partition"], x["id"]) for x in s["missing"]] == [where[37]]
    assert [(x["partition"], x["id"]) for x in s["extra"]] == [where[40]]
    swapped["amount"] = {"old": "41.25", "new": "43.25"}  # through the CLI's JSON
    back["amount"] = {"old": "43.25", "new": "41.25"}
    assert sorted((x["partition"], x["id"], x["columns"]) for x in s["mismatched"]) == sorted([
        (*where[39], {"name": {"old": "n39", "new": "changed"}}), (*where[41], swapped),
        (*where[43], back)])
    assert [(x["partition"], x["id"], x["new_copies"]) for x in s["duplicates"]] == [(*where[38], 2)]
    assert {g: v["passed"] for g, v in t["gates"].items()} == {
        "max_missing_rows": False, "max_extra_rows": False, "max_mismatched_rows": False,
        "max_duplicate_rows": False, "max_lag_rows.old_ahead": True, "max_lag_rows.new_ahead": True}
    per = {p["partition"]: p for p in t["partitions"]}
    assert per[where[37][0]]["missing"] == 1 and per[where[40][0]]["extra"] == 1
    page = (tmp_path / "report" / "report.html").read_text()
    assert "FAILED" in page and "Differences per partition" in page and ">changed<" in page
    assert json.loads((tmp_path / "report" / "result.json").read_text())["passed"] is False
    assert verify_run.last_result(main, f"{ns}.orders").passed is False  # type: ignore[union-attr]
    # The cost: differences were found by drilling into few buckets, not by comparing every row; the row pass
    # read both tables through their offsets (the new one's carried through the map, past the aborted records).
    assert t["cost"]["rows_compared"] <= 60 and t["cost"]["differing"]["_b0"] >= 1
    assert t["cost"]["row_pass"] == {"old": "narrowed", "new": "narrowed"}


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_a_lagging_or_empty_new_table_fails_the_lag_gate_unless_the_plan_allows_the_lag(
        sandbox: Sandbox, plan: Plan, spark: Any, tmp_path: Path, ns: str) -> None:
    legacy, main = _setup(sandbox, plan, tmp_path, ns)
    produce_txn(plan.cluster("old"), f"{ns}.orders", f"{ns}-tx", [(_records(60, 14), True)])
    _mirror(sandbox, ns, tmp_path)
    shadow(legacy, cluster="old")  # the old pipeline moved on; the shadow did not yet
    verified = verify_run.verify(main, verify_run.Options())
    result, t = verified.as_dict(), verified.as_dict()["tables"][0]
    assert not result["passed"] and t["counts"]["matched"] == 60 and t["counts"]["missing"] == 0
    assert t["lag"] == {"old_ahead": 14, "new_ahead": 0, "note": None}
    assert t["gates"]["max_lag_rows.old_ahead"] == {"limit": 0, "found": 14, "passed": False}
    assert {p["partition"]: p["window_end"] for p in t["partitions"]} == {0: 38, 1: 38}  # in the report
    assert "over gates.max_lag_rows.old_ahead (0)" in report.render_text(verified)
    assert not verify_run.last_result(main, f"{ns}.orders").passed  # type: ignore[union-attr]

    allowing = derive(main.file, tmp_path / "allowing.yaml", gates={"max_lag_rows": {"old_ahead": 20}})
    assert verify_run.verify(allowing, verify_run.Options()).as_dict()["passed"]

    # A new table that wrote nothing: every old row is lag, and the default gate fails it.
    spark.sql(f"CREATE TABLE {tables.qualified(main, f'{ns}.empty')} USING iceberg AS "
              f"SELECT * FROM {tables.qualified(main, f'{ns}.orders')} WHERE false")
    empty = derive(main.file, tmp_path / "empty.yaml", tables=[
        {"topic": f"{ns}.orders", "old": f"{ns}.legacy", "new": f"{ns}.empty", "schema": SCHEMA,
         "old_offset_columns": OFFSETS}])
    t = verify_run.verify(empty, verify_run.Options()).as_dict()["tables"][0]
    assert not t["passed"] and t["counts"]["new_rows"] == 0 and t["lag"]["old_ahead"] == 74


@pytest.mark.lake(only="rest")
@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_reconcile_by_key_and_value_equal_representations_do_not_differ(
        sandbox: Sandbox, plan: Plan, spark: Any, tmp_path: Path, ns: str) -> None:
    """An old table without offset columns, with other (equal-valued) types: key mode, no false differences."""
    topic = f"{ns}.orders"
    main = shadow_plan(sandbox.plan_file, ns, tmp_path, [
        {"topic": topic, "old": f"{ns}.legacy", "new": f"{ns}.orders", "schema": SCHEMA, "key": ["id"],
         "checks": ["orders_basic"], "allow_narrowing": ["amount"]}])
    create_topic(plan.cluster("new"), topic, 2)
    produce_txn(plan.cluster("new"), topic, f"{ns}-tx", [(_records(0, 20), True)])
    shadow(main)
    new = tables.qualified(main, f"{ns}.orders")
    # The legacy table: float instead of double, -0.0, microsecond timestamps, no Kafka columns.
    spark.sql(f"CREATE TABLE {tables.qualified(main, f'{ns}.legacy')} USING iceberg AS SELECT id, name, "
              "CAST(amount AS DECIMAL(14,4)) AS amount, CAST(score AS FLOAT) AS score, "
              f"kafka_timestamp AS kafka_timestamp FROM {new}")
    spark.sql(f"ALTER TABLE {new} ADD COLUMN zero double")
    spark.sql(f"ALTER TABLE {tables.qualified(main, f'{ns}.legacy')} ADD COLUMN zero double")
    spark.sql(f"UPDATE {new} SET zero = 0.0")
    spark.sql(f"UPDATE {tables.qualified(main, f'{ns}.legacy')} SET zero = -0.0")
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "orders_basic.json").write_text(json.dumps({"name": "orders_basic", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "id", "min_value": 0,
                                                                  "max_value": 19}}]}))
    result = verify_run.verify(main, verify_run.Options()).as_dict()
    t = result["tables"][0]
    assert t["mode"] == "key" and t["counts"]["matched"] == 20 and t["counts"]["mismatched"] == 0, t["samples"]
    assert t["schema"]["passed"] and {c["column"] for c in t["schema"]["type_changed"]} == {"amount", "score"}
    # decimal(14,4) in the old table, decimal(12,2) in the new: narrowing, accepted because the plan allows it
    assert [(c["column"], c["narrowing"], c["allowed"]) for c in t["schema"]["type_changed"]] == [
        ("amount", True, True), ("score", False, True)]
    assert [(s["side"], s["success"]) for s in t["suites"]] == [("old", True), ("new", True)]
    assert result["passed"]

    spark.sql(f"UPDATE {new} SET score = score + 0.001 WHERE id = 3")
    spark.sql(f"DELETE FROM {new} WHERE id = 4")
    t = verify_run.verify(main, verify_run.Options()).as_dict()["tables"][0]
    assert (t["counts"]["mismatched"], t["counts"]["missing"]) == (1, 1)
    assert t["samples"]["mismatched"][0]["id"] == "3" and list(t["samples"]["mismatched"][0]["columns"]) == ["score"]
    assert t["samples"]["missing"][0]["id"] == "4"


def test_a_column_of_another_type_family_fails_the_schema_check(sandbox: Sandbox, plan: Plan, spark: Any,
                                                                tmp_path: Path, ns: str) -> None:
    topic = f"{ns}.orders"
    narrower = {"amount": {"name": "amount", "type": "double"}, "score": {"name": "score", "type": "float"}}
    changed = [narrower.get(c["name"], c) for c in SCHEMA]
    main = shadow_plan(sandbox.plan_file, ns, tmp_path, [
        {"topic": topic, "old": f"{ns}.legacy", "new": f"{ns}.orders", "schema": changed, "key": ["id"]}])
    legacy = shadow_plan(sandbox.plan_file, f"{ns}_l", tmp_path, [
        {"topic": topic, "old": f"{ns}.x", "new": f"{ns}.legacy", "schema": SCHEMA}])
    create_topic(plan.cluster("new"), topic, 2)
    produce_txn(plan.cluster("new"), topic, f"{ns}-tx", [(_records(0, 5), True)])
    shadow(main)
    shadow(legacy)
    t = verify_run.verify(main, verify_run.Options()).as_dict()["tables"][0]
    assert not t["passed"] and not t["schema"]["passed"]
    assert t["schema"]["type_changed"] == [
        {"column": "amount", "old": "decimal(12,2)", "new": "double", "same_family": False, "narrowing": False,
         "allowed": False},
        {"column": "score", "old": "double", "new": "float", "same_family": True, "narrowing": True,
         "allowed": False}]
    assert t["counts"]["mismatched"] == 0  # 1.25 as decimal and as double are the same value


def test_verify_errors_name_the_table(sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    main = shadow_plan(sandbox.plan_file, ns, tmp_path, [
        {"topic": f"{ns}.t", "old": f"{ns}.nope", "new": f"{ns}.nada"}])
    run = cutover("verify", "--plan", str(main.file))
    assert run.code == 2 and f"table {ns}.nope does not exist" in run.err and "Traceback" not in run.err


def test_reconcile_by_content_when_there_is_neither_offset_columns_nor_a_key(
        sandbox: Sandbox, plan: Plan, spark: Any, tmp_path: Path, ns: str) -> None:
    topic = f"{ns}.orders"
    main = shadow_plan(sandbox.plan_file, ns, tmp_path, [
        {"topic": topic, "old": f"{ns}.legacy", "new": f"{ns}.orders", "schema": SCHEMA}])
    create_topic(plan.cluster("new"), topic, 2)
    produce_txn(plan.cluster("new"), topic, f"{ns}-tx", [(_records(0, 12), True)])
    shadow(main)
    new, legacy = tables.qualified(main, f"{ns}.orders"), tables.qualified(main, f"{ns}.legacy")
    spark.sql(f"CREATE TABLE {legacy} USING iceberg AS SELECT id, name, amount, score FROM {new}")
    t = verify_run.verify(main, verify_run.Options()).as_dict()["tables"][0]
    assert t["mode"] == "content" and t["passed"] and t["counts"]["matched"] == 12
    spark.sql(f"UPDATE {new} SET name = 'changed' WHERE id = 5")
    t = verify_run.verify(main, verify_run.Options()).as_dict()["tables"][0]
    assert not t["passed"] and (t["counts"]["missing"], t["counts"]["extra"]) == (1, 1)
    assert [s["values"]["name"] for s in t["samples"]["missing"]] == ["n5"]
    assert [s["values"]["name"] for s in t["samples"]["extra"]] == ["changed"]


def test_many_differences_are_sampled_as_few_are(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to reconcile._FEW_ROWS differing rows one job brings them all and the samples are chosen on the
    driver; past it each kind's sample is its own query. Both give the same counts and samples."""
    from cutover.verify import reconcile as rc

    cols = "_p int, _id bigint, _h bigint, _c0 string"
    old = spark.createDataFrame([(i % 3, i, i, f"v{i}") for i in range(3000)], cols)
    # new: 0..99 missing, 100..199 changed, 200..209 twice, 3000..3049 extra
    kept = [(i % 3, i, i if i >= 200 else -i, f"v{i}" if i >= 200 else "changed") for i in range(100, 3000)]
    new = spark.createDataFrame(kept + [r for r in kept if 200 <= r[1] < 210] +
                                [(i % 3, i, i, f"v{i}") for i in range(3000, 3050)], cols)

    def run(few: int) -> Any:
        monkeypatch.setattr(rc, "_FEW_ROWS", few)
        return rc.reconcile(rc.buckets(old, "offsets"), rc.buckets(new, "offsets"), "offsets", ["v"], 4)

    one, each = run(10_000), run(0)
    assert one.samples == each.samples and one.partitions == each.partitions
    assert sum(pc.missing for pc in one.partitions.values()) == 100
    assert sum(pc.extra for pc in one.partitions.values()) == 50
    assert sum(pc.mismatched for pc in one.partitions.values()) == 100
    assert sum(pc.duplicates_new for pc in one.partitions.values()) == 10
    assert [(s["partition"], s["id"]) for s in one.samples["missing"]] == [(0, 0), (0, 3), (0, 6), (0, 9)]
    assert [(s["partition"], s["id"]) for s in one.samples["extra"]] == [(0, 3000), (0, 3003), (0, 3006), (0, 3009)]
    assert one.samples["mismatched"][0]["columns"] == {"v": {"old": "v102", "new": "changed"}}
    assert [(s["id"], s["new_copies"]) for s in one.samples["duplicates"]] == [(201, 2), (204, 2), (207, 2), (202, 2)]


def test_the_row_pass_filters_keep_exactly_the_chosen_offsets_and_buckets(spark: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`align.within` (the narrowed reread) and `reconcile._only` (the differing buckets) are SQL text (`_only`
    a broadcast join past `_KEYS_AS_TEXT` keys, with the same rows): a column name with a backtick stays one
    name, each range's ends are half-open, and nothing chosen keeps no row."""
    from cutover.verify import align
    from cutover.verify import reconcile as rc

    df = spark.createDataFrame([(p, o) for p in range(3) for o in range(6)], "`part``x` string, off long")
    kept = df.where(align.within("part`x", "off", {0: [(2, 4)], 2: [(0, 1), (5, 9)]})).collect()
    assert sorted((int(r[0]), r[1]) for r in kept) == [(0, 2), (0, 3), (2, 0), (2, 5)]
    assert df.where(align.within("part`x", "off", {})).count() == 0

    frame = spark.createDataFrame([(p, i, i // 4) for p in range(2) for i in range(12)], "_p int, _id long, _b1 long")
    for as_text in (10_000, 1):  # an SQL expression, then (past that many keys) a broadcast join
        monkeypatch.setattr(rc, "_KEYS_AS_TEXT", as_text)
        chosen = rc._only(frame, "_b1", [(0, 1), (1, 0), (1, 2)]).collect()
        assert sorted((r["_p"], r["_id"]) for r in chosen) == [
            (0, 4), (0, 5), (0, 6), (0, 7), (1, 0), (1, 1), (1, 2), (1, 3), (1, 8), (1, 9), (1, 10), (1, 11)]
    assert rc._only(frame, "_b1", []).count() == 0


#: The layout of Tansu 0.6.0's Iceberg sink for a topic with a JSON schema (cutover/lake/platforms.py; found on
#: Tansu itself by tests/integration/test_tansu_lake.py): Kafka metadata in `meta`, the key and the value as JSON.
TANSU_LAYOUT = """CREATE TABLE {t} USING iceberg AS SELECT
    named_struct('partition', kafka_partition,
                 'timestamp', date_format(kafka_timestamp, "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"),
                 'year', year(kafka_timestamp), 'month', month(kafka_timestamp), 'day', day(kafka_timestamp)) AS meta,
    concat('"k', id, '"') AS key, named_struct('id', id, 'name', name, 'amount', amount, 'score', score) AS value
    FROM {old}"""


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_a_table_the_platform_writes_is_compared_by_key_partition_and_timestamp_and_its_freshness_measured(
        sandbox: Sandbox, plan: Plan, spark: Any, tmp_path: Path, ns: str) -> None:
    topic = f"{ns}.orders"
    create_topic(plan.cluster("old"), topic, 2)
    produce_txn(plan.cluster("old"), topic, f"{ns}-tx", [(_records(0, 20), True)])
    legacy = shadow_plan(sandbox.plan_file, f"{ns}_legacy", tmp_path, [
        {"topic": topic, "old": f"{ns}.unused", "new": f"{ns}.legacy", "schema": SCHEMA}])
    shadow(legacy, cluster="old")
    main = shadow_plan(sandbox.plan_file, ns, tmp_path, [
        {"topic": topic, "old": f"{ns}.legacy", "new": f"{ns}.tansu", "new_writer": "tansu", "key": ["id"],
         "old_offset_columns": {**OFFSETS, "timestamp": "kafka_timestamp"}}])
    spark.sql(TANSU_LAYOUT.format(t=tables.qualified(main, f"{ns}.tansu"), old=tables.qualified(main, f"{ns}.legacy")))
    t = verify_run.verify(main, verify_run.Options()).as_dict()["tables"][0]
    assert (t["mode"], t["passed"], t["counts"]["matched"], t["counts"]["new_rows"]) == ("key", True, 20, 20), t
    fresh = t["freshness"]
    assert fresh["old"]["rows"] == fresh["new"]["rows"] == 20
    for side in ("old", "new"):  # record timestamp to the commit that made the row visible
        assert 0 < fresh[side]["p50_ms"] <= fresh[side]["p95_ms"] < 600_000, fresh
    assert fresh["cannot_prove"].startswith("offsets")
    shadow_run = cutover("shadow", "--plan", str(main.file), "--until-caught-up")
    assert shadow_run.code == 2 and "is written by the new cluster's platform" in shadow_run.err, shadow_run.err
    # A row gone, a row in the other partition, a row with another timestamp: each found by key.
    tansu = tables.qualified(main, f"{ns}.tansu")
    spark.sql(f"DELETE FROM {tansu} WHERE value.id = 3")
    spark.sql(f"UPDATE {tansu} SET meta = named_struct('partition', 1 - meta.partition, 'timestamp', meta.timestamp, "
              "'year', meta.year, 'month', meta.month, 'day', meta.day) WHERE value.id = 4")
    spark.sql(f"UPDATE {tansu} SET meta = named_struct('partition', meta.partition, 'timestamp', "
              "'2001-01-01T00:00:00.000Z', 'year', meta.year, 'month', meta.month, 'day', meta.day) "
              "WHERE value.id = 6")
    run = cutover("verify", "--plan", str(main.file), "-o", "json")
    assert run.code == 4, run.err
    t = run.json()["tables"][0]
    assert (t["counts"]["missing"], t["counts"]["mismatched"], t["counts"]["extra"]) == (1, 2, 0), t["counts"]
    assert sorted((s["id"], sorted(s["columns"])) for s in t["samples"]["mismatched"]) == [
        ("4", ["kafka_partition"]), ("6", ["kafka_timestamp"])], t["samples"]
    text = cutover("verify", "--plan", str(main.file))
    assert "freshness, new table: p50" in text.out and "not provable from the platform's table: offsets" in text.out
