"""The plan: validation messages name file, line, key path and fix; ${ENV} interpolation."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from cutover.errors import ExitCode, PlanError
from cutover.plan import Plan, load_plan

REPO = Path(__file__).resolve().parents[3]

MINIMAL = """\
clusters:
  old: {bootstrap.servers: "o:9092"}
  new: {bootstrap.servers: "n:9092"}
"""
CATALOG = "catalog: {uri: 'sqlite:////tmp/c.db'}\n"


def write(tmp_path: Path, text: str, name: str = "plan.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(PlanError) as info:
        load_plan(write(tmp_path, text), environ=env or {})
    assert info.value.exit_code == ExitCode.USAGE
    return info.value.problems


def test_minimal_plan_gets_defaults(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, MINIMAL), environ={})
    assert plan.cluster("old") == {"bootstrap.servers": "o:9092"}
    assert plan.spec.topics.include == [".*"]
    assert plan.spec.mirror.group_sync_interval == 10.0
    assert plan.spec.gates.verify_max_age == 3600.0
    assert plan.spec.tables == []


def test_sample_plan_is_valid(tmp_path: Path) -> None:
    env = {"OLD_KAFKA_PASSWORD": "p1", "NEW_KAFKA_PASSWORD": "p2", "CATALOG_PASSWORD": "p3", "S3_ACCESS_KEY": "ak",
           "S3_SECRET_KEY": "sk", "OLD_REGISTRY_USER_INFO": "reader:p4"}
    sample = (REPO / "samples" / "plan.yaml").read_text().replace("env_file: secrets.env", "")
    plan = load_plan(write(tmp_path, sample), environ=env)
    assert [t.topic for t in plan.spec.tables] == ["orders", "payments.card"]
    assert plan.spec.tables[0].old_offset_columns is not None
    assert plan.spec.tables[0].old_offset_columns.offset == "kafka_offset"
    assert plan.spec.topics.matches("payments.card") and not plan.spec.topics.matches("payments.debug")
    assert plan.cluster("old")["sasl.password"] == "p1"
    assert plan.spec.catalog is not None and plan.spec.catalog.properties["s3.secret-access-key"] == "sk"
    assert plan.spec.registry is not None and plan.spec.registry.old["basic.auth.user.info"] == "reader:p4"
    assert plan.spec.rights is not None and plan.spec.rights.principals == {
        "User:CN=orders-app,OU=apps": "User:orders-app"}
    assert plan.spec.rights.super_users_of("new") == ["User:admin"]


def test_rights_refuse_a_password_in_place_of_its_variable_and_a_merging_principal_map(tmp_path: Path) -> None:
    text = MINIMAL + ("rights:\n  scram_passwords: {billing: 'hunter2!'}\n"
                      "  principals: {'User:a': 'User:c', 'User:b': 'User:c'}\n")
    found = problems(tmp_path, text)
    assert any("is not a variable name (not shown: it may be the password)" in p for p in found), found
    assert not any("hunter2" in p for p in found), found
    assert any("two old principals map to one new principal" in p for p in found), found


def test_missing_required_key_names_file_line_path_and_fix(tmp_path: Path) -> None:
    text = MINIMAL + "tables:\n  - topic: orders\n    old: legacy.orders\n"
    (msg,) = problems(tmp_path, text)
    assert msg.startswith(f"{tmp_path / 'plan.yaml'}:5: tables[0].new: required")
    assert "fix:" in msg


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, MINIMAL + "topcis:\n  include: [a]\n")
    assert ":4: topcis: unknown key (fix: did you mean 'topics'?)" in msg


def test_unknown_nested_key_without_a_close_match_lists_known_keys(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, MINIMAL + "mirror:\n  zzz: 1\n")
    assert "mirror.zzz: unknown key" in msg and "replication_factor" in msg


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = MINIMAL + "gates:\n  max_mirror_lag: lots\n  quiet_period: soon\nspark:\n  mastr: x\n"
    found = problems(tmp_path, text)
    assert len(found) == 3
    assert any("gates.max_mirror_lag: expected a whole number, found str 'lots'" in p for p in found)
    assert any("gates.quiet_period: expected a duration" in p for p in found)
    assert any("spark.mastr: unknown key (fix: did you mean 'master'?)" in p for p in found)


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, "clusters:\n  old: [unclosed\n  new: x\n")
    assert msg.startswith(f"{tmp_path / 'plan.yaml'}:3:")
    assert "YAML syntax error" in msg


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, MINIMAL + "name: a\nname: b\n")
    assert ":5: name: duplicate key" in msg


def test_missing_bootstrap_servers(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, "clusters:\n  old: {acks: all}\n  new: {bootstrap.servers: n:9092}\n")
    assert ":2: clusters.old: 'bootstrap.servers' is required" in msg


def test_bad_regex_and_bad_table_name(tmp_path: Path) -> None:
    text = MINIMAL + "topics:\n  include: ['(']\ntables:\n  - {topic: t, old: orders, new: ns.orders}\n"
    found = problems(tmp_path, text)
    assert any("topics.include[0]: '(' is not a valid regular expression" in p for p in found)
    assert any("tables[0].old: 'orders' is not a table name cutover can use: namespace.table, each part letters, "
               "digits and _ (fix: e.g. NAMESPACE.orders)" in p for p in found)


def test_a_table_used_twice_is_refused(tmp_path: Path) -> None:
    text = MINIMAL + CATALOG + "tables:\n  - {topic: a, old: x.a, new: y.a}\n  - {topic: b, old: x.b, new: y.a}\n"
    (msg,) = problems(tmp_path, text)
    assert "tables[1].new: table y.a is already used at tables[0].new" in msg


def test_literal_choices_and_hook_events(tmp_path: Path) -> None:
    text = MINIMAL + "tables:\n  - {topic: a, old: x.a, new: y.a, format: orc}\nhooks:\n  freez: ./f.sh\n"
    found = problems(tmp_path, text)
    assert any("tables[0].format: expected one of 'json', 'raw', 'text', 'avro', 'protobuf', 'json-schema', "
               "found str 'orc'" in p for p in found)
    assert any("hooks: unknown hook event(s) freez" in p for p in found)


def test_env_interpolation_and_escape(tmp_path: Path) -> None:
    text = MINIMAL.replace('"n:9092"', '"${NEW_HOST}:9092"') + "topics: {include: ['cost-$$5']}\n"
    plan = load_plan(write(tmp_path, text), environ={"NEW_HOST": "kafka-new"})
    assert plan.cluster("new")["bootstrap.servers"] == "kafka-new:9092"
    assert plan.spec.topics.include == ["cost-$5"]


def test_unset_env_var_names_the_key_and_the_variable(tmp_path: Path) -> None:
    text = ("clusters:\n  old: {bootstrap.servers: o:9092}\n  new:\n    bootstrap.servers: n:9092\n"
            "    sasl.password: ${NEW_PW}\n")
    (msg,) = problems(tmp_path, text)
    assert "clusters.new['sasl.password']: environment variable NEW_PW is not set" in msg


def test_env_file_fills_variables_and_environment_wins(tmp_path: Path) -> None:
    write(tmp_path, "# comment\nA=from-file\nexport B='quoted'\n", "secrets.env")
    text = "env_file: secrets.env\nname: ${A}-${B}\n" + MINIMAL
    assert load_plan(write(tmp_path, text), environ={}).name == "from-file-quoted"
    assert load_plan(write(tmp_path, text), environ={"A": "env"}).name == "env-quoted"


def test_missing_env_file_is_an_error(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, "env_file: nope.env\n" + MINIMAL)
    assert ":1: env_file: file" in msg and "nope.env not found" in msg


def test_missing_plan_file(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="plan file not found"):
        load_plan(tmp_path / "absent.yaml")


def test_durations() -> None:
    from cutover.plan.schema import Duration

    assert Duration.parse("500ms") == 0.5
    assert Duration.parse("5m") == 300
    assert Duration.parse(12) == 12
    with pytest.raises(ValueError):
        Duration.parse("soon")


def test_unsupported_version(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, "version: 2\n" + MINIMAL)
    assert "plan version 2 is not supported" in msg


def test_a_registry_format_needs_a_registry_and_a_registry_needs_urls(tmp_path: Path) -> None:
    text = MINIMAL + CATALOG + "tables:\n  - {topic: a, old: x.a, new: y.a, format: avro, key_format: protobuf}\n"
    (msg,) = problems(tmp_path, text)
    assert "tables[0]: format avro and key_format protobuf need a schema registry" in msg
    text = MINIMAL + "registry:\n  old: {url: 'ftp://x'}\n  new: {uri: 'http://x'}\n"
    found = problems(tmp_path, text)
    assert any("registry.old: 'ftp://x' is not an http:// or https:// URL" in p for p in found)
    assert any("registry.new: 'url' is required" in p for p in found)


def test_yaml_merge_keys_and_extension_keys_are_read_as_yaml_means_them(tmp_path: Path) -> None:
    text = ("x-kafka: &kafka\n  security.protocol: SASL_SSL\n  sasl.mechanism: SCRAM-SHA-512\n"
            "clusters:\n  old:\n    <<: *kafka\n    bootstrap.servers: o:9092\n"
            "  new:\n    <<: *kafka\n    bootstrap.servers: n:9092\n    sasl.mechanism: SCRAM-SHA-256\n")
    plan = load_plan(write(tmp_path, text), environ={})
    assert plan.cluster("old") == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                   "bootstrap.servers": "o:9092"}
    assert plan.cluster("new")["sasl.mechanism"] == "SCRAM-SHA-256"  # the mapping's own key wins over the merge
    twice = problems(tmp_path, "x-a: &a {k: v}\nclusters:\n  old:\n    <<: *a\n    bootstrap.servers: o:9092\n"
                               "    bootstrap.servers: o2\n  new: {bootstrap.servers: n:9092}\n")
    assert twice == [f"{tmp_path / 'plan.yaml'}:6: clusters.old['bootstrap.servers']: duplicate key "
                     "(fix: keep one of them)"]


def test_an_empty_selection_is_refused_not_read_as_everything(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL + "topics:\ngroups:\n")
    assert found == [
        f"{tmp_path / 'plan.yaml'}:4: topics: is empty, which would select every topic (fix: give include (and "
        "exclude) patterns, or remove the key to select everything)",
        f"{tmp_path / 'plan.yaml'}:5: groups: is empty, which would select every group (fix: give include (and "
        "exclude) patterns, or remove the key to select everything)"]


def test_old_and_new_naming_the_same_brokers_is_refused(tmp_path: Path) -> None:
    found = problems(tmp_path, "clusters:\n  old: {bootstrap.servers: 'a:9092,B:9093'}\n"
                               "  new: {bootstrap.servers: 'SASL_SSL://b:9093'}\n")
    assert found == [f"{tmp_path / 'plan.yaml'}:3: clusters.new: 'bootstrap.servers' names b:9093, as clusters.old "
                     "does: old and new must be two clusters (fix: give the new cluster's brokers)"]


def test_a_variable_reference_that_never_closes_is_named(tmp_path: Path) -> None:
    text = ("clusters:\n  old: {bootstrap.servers: o:9092}\n  new:\n    bootstrap.servers: n:9092\n"
            "    sasl.password: ${NEW_PASS\n")
    (msg,) = problems(tmp_path, text)
    assert "clusters.new['sasl.password']: '${NEW_PASS' opens a variable reference that never closes" in msg


def test_a_variable_reference_without_braces_is_named_except_in_a_hooks_shell_command(tmp_path: Path) -> None:
    text = ("clusters:\n  old: {bootstrap.servers: o:9092}\n  new:\n    bootstrap.servers: n:9092\n"
            "    sasl.password: $NEW_PASS\n")
    (msg,) = problems(tmp_path, text)
    assert msg == (f"{tmp_path / 'plan.yaml'}:5: clusters.new['sasl.password']: '$NEW_PASS' is a variable reference "
                   "without braces, which cutover does not read (fix: ${NEW_PASS}; $$ for a literal $)")
    text = ("clusters:\n  old: {bootstrap.servers: o:9092}\n  new:\n    bootstrap.servers: n:9092\n"
            "    sasl.password: a$$b\nhooks: {resume: 'notify.sh $CUTOVER_PLAN_NAME'}\n")
    plan = load_plan(write(tmp_path, text), environ={})
    assert plan.cluster("new")["sasl.password"] == "a$b" and plan.spec.hooks["resume"] == "notify.sh $CUTOVER_PLAN_NAME"


def test_partition_transforms_are_checked_with_the_plan_not_when_the_shadow_starts(tmp_path: Path) -> None:
    text = ("clusters:\n  old: {bootstrap.servers: o:9092}\n  new: {bootstrap.servers: n:9092}\n"
            "tables:\n  - {topic: t, old: a.t, new: b.t, format: json,\n"
            "     partition_by: [day(kafka_timestamp), 'bucket(16, id)', name, dya(ts), bucket(x),\n"
            "                    'truncate(a, b)']}\n")
    (msg,) = problems(tmp_path, text)
    assert msg == (f"{tmp_path / 'plan.yaml'}:6: tables[0].partition_by: 'dya(ts)', 'bucket(x)', 'truncate(a, b)': not "
                   "a partition transform cutover knows (fix: use a column, year(col), month(col), day(col), "
                   "hour(col), bucket(N, col) or truncate(N, col))")


def test_readers_are_checked_each_with_its_line(tmp_path: Path) -> None:
    good = MINIMAL + "readers:\n  - {name: orders-query, kind: spark-checkpoint, checkpoint: ck/orders}\n"
    plan = load_plan(write(tmp_path, good), environ={})
    assert [(r.name, r.kind, r.checkpoint, r.sink) for r in plan.spec.readers] == \
        [("orders-query", "spark-checkpoint", "ck/orders", None)]
    got = problems(tmp_path, MINIMAL + """readers:
  - {name: q, kind: flink-savepoint, checkpoint: ck}
  - {name: "bad name", kind: spark-checkpoint, checkpoint: c}
""")
    text = "\n".join(got)
    assert "plan.yaml:5: readers[0].kind" in text and "spark-checkpoint" in text and "kafka-streams" in text
    assert "'bad name' cannot name a reader" in text
    # what each kind needs, and what does not apply to it, each with its line (once the kinds are known)
    got = problems(tmp_path, MINIMAL + """readers:
  - {name: q, kind: spark-checkpoint}
  - {name: s, kind: kafka-streams, application_id: wc, checkpoint: ck}
""")
    text = "\n".join(got)
    assert "plan.yaml:5: readers[0]: a spark-checkpoint reader needs checkpoint" in text, text
    assert "plan.yaml:6: readers[1]: a kafka-streams reader needs state_dir" in text
    assert "plan.yaml:6: readers[1].checkpoint: checkpoint does not apply to a kafka-streams reader" in text
    got = problems(tmp_path, MINIMAL + """readers:
  - {name: f, kind: flink, savepoints: sp, start: committed, state_dir: st}
  - {name: c, kind: connect, old_url: "http://127.0.0.1:8083", connectors: [files], source_uid: s}
""")
    text = "\n".join(got)
    assert "plan.yaml:5: readers[0]: a flink reader needs source_uid" in text, text
    assert "plan.yaml:5: readers[0]: a flink reader needs group" in text  # start: committed commits to it
    assert "plan.yaml:5: readers[0].state_dir: state_dir does not apply to a flink reader" in text
    assert "plan.yaml:6: readers[1]: a connect reader needs new_url" in text
    assert "plan.yaml:6: readers[1].source_uid: source_uid does not apply to a connect reader" in text
    assert problems(tmp_path, MINIMAL + "readers:\n  - {name: f, kind: flink, source_uid: u, savepoints: sp, "
                    "reset: never}\n")[0].endswith("readers[0].reset: expected one of 'none', 'earliest', 'latest', "
                                                   "found str 'never' (fix: write one of them)")
    assert problems(tmp_path, MINIMAL + "readers:\n  - {name: t, kind: kafka-streams, state_dir: st, state: keep}\n"
                    )[0].endswith("plan.yaml:5: readers[0].state: expected one of 'rewrite', 'wipe', found str 'keep' "
                                  "(fix: write one of them)")
    got = problems(tmp_path, MINIMAL + """readers:
  - {name: t, kind: kafka-streams, state_dir: st}
""")
    assert got == [f"{tmp_path / 'plan.yaml'}:5: readers[0]: a kafka-streams reader needs application_id (fix: add "
                   "application_id: ... to reader t)"], got
    twice = problems(tmp_path, MINIMAL + """readers:
  - {name: q, kind: spark-checkpoint, checkpoint: a}
  - {name: q, kind: spark-checkpoint, checkpoint: b}
""")
    assert any("plan.yaml:6: readers[1].name: reader q is already declared at readers[0].name" in p for p in twice)
    # object storage: a Spark checkpoint may be there; what the Streams and Flink moves read on this host may not
    got = problems(tmp_path, MINIMAL + """readers:
  - {name: q, kind: spark-checkpoint, checkpoint: "s3a://lake/ck/orders", sink: "s3a://lake/out"}
  - {name: t, kind: kafka-streams, application_id: wc, state_dir: "s3://lake/state"}
  - {name: f, kind: flink, source_uid: u, savepoints: "file:///var/sp", start_file: "hdfs://nn/start.json"}
""")
    assert got == [
        f"{tmp_path / 'plan.yaml'}:6: readers[1].state_dir: s3://lake/state is not a local folder: cutover reads and "
        "writes a kafka-streams reader's state_dir on this host (only a Spark checkpoint may be on object storage) "
        "(fix: run the move where the folder is, or copy it here and back)",
        f"{tmp_path / 'plan.yaml'}:7: readers[2].start_file: hdfs://nn/start.json is not a local folder: cutover "
        "reads and writes a flink reader's start_file on this host (only a Spark checkpoint may be on object "
        "storage) (fix: run the move where the folder is, or copy it here and back)"], got


def test_metrics_ports_are_ports_each_given_once_and_a_commands_own_port_wins(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL + "observability:\n  ports: {mirror: 70000, shadow: 0}\n")
    assert [m for m in found if "70000 is not a TCP port" in m and "observability.ports.mirror" in m], found
    assert [m for m in found if "0 is not a TCP port" in m and "observability.ports.shadow" in m], found
    (msg,) = problems(tmp_path, MINIMAL + "observability:\n  ports: {mirror: 9400, reverse_mirror: 9400}\n")
    assert "observability.ports" in msg and "give each its own" in msg
    plan = load_plan(write(tmp_path, MINIMAL + "observability:\n  ports: {mirror: 9400, exporter: 9420}\n"),
                     environ={})
    def port(part: Literal["mirror", "reverse_mirror", "shadow", "exporter"], given: int | None = None,
             of: Plan = plan) -> int | None:
        at = of.metrics_endpoint(part, given)
        return None if at is None else at.port

    assert (port("mirror"), port("mirror", 9999)) == (9400, 9999)
    assert (port("reverse_mirror"), port("exporter")) == (None, 9420)
    assert port("shadow", of=load_plan(write(tmp_path, MINIMAL), environ={})) is None


def test_table_pairs_need_a_catalog_named_with_the_key_and_the_fix(tmp_path: Path) -> None:
    text = MINIMAL + "tables:\n  - {topic: a, old: x.a, new: y.a}\n"
    assert problems(tmp_path, text) == [
        f"{tmp_path / 'plan.yaml'}:4: tables: 1 table pair(s) and no catalog section: the shadow, verify, status and "
        "promote reach the tables through the plan's Iceberg catalog (fix: add catalog: {uri: ...}, e.g. "
        "sqlite:////absolute/path/catalog.db, postgresql+psycopg2://user@host/db or a REST catalog's http(s):// "
        "with type: rest; or remove tables to move topics only)"]
    assert load_plan(write(tmp_path, text + CATALOG), environ={}).spec.tables[0].new == "y.a"


def test_every_bad_regex_is_named_with_its_own_key_path_error_and_fix(tmp_path: Path) -> None:
    text = MINIMAL + ("topics:\n  include: ['(', 'orders', '[a-']\n  exclude: ['*.tmp']\ngroups:\n  include: ['a)']\n"
                      "registry:\n  old: {url: 'http://o:8081'}\n  new: {url: 'http://n:8081'}\n"
                      "  subjects: {include: ['?x']}\n")
    found = problems(tmp_path, text)
    plan = tmp_path / "plan.yaml"
    assert found == [
        f"{plan}:5: topics.include[0]: '(' is not a valid regular expression: missing ), unterminated subpattern at "
        r"position 0 (fix: to match it literally, escape it: \(; patterns are Python regular expressions that match "
        "the whole name)",
        f"{plan}:5: topics.include[2]: '[a-' is not a valid regular expression: unterminated character set at "
        r"position 0 (fix: to match it literally, escape it: \[a\-; patterns are Python regular expressions that "
        "match the whole name)",
        f"{plan}:6: topics.exclude[0]: '*.tmp' is not a valid regular expression: nothing to repeat at position 0 "
        r"(fix: patterns are regular expressions, not shell globs: write .*\.tmp)",
        f"{plan}:8: groups.include[0]: 'a)' is not a valid regular expression: unbalanced parenthesis at position 1 "
        r"(fix: to match it literally, escape it: a\); patterns are Python regular expressions that match the "
        "whole name)",
        f"{plan}:12: registry.subjects.include[0]: '?x' is not a valid regular expression: nothing to repeat at "
        "position 0 (fix: patterns are regular expressions, not shell globs: write .x)"]


@pytest.mark.parametrize(("name", "fix"), [("cutover.my orders", "cutover.my_orders"),
                                           ("cutover.orders-v2", "cutover.orders_v2"),
                                           ("cutover. orders", "cutover.orders"),
                                           ("cut`over.orders", "cut_over.orders"),
                                           ("a..b", "a.b")])
def test_table_names_are_iceberg_identifiers(tmp_path: Path, name: str, fix: str) -> None:
    text = MINIMAL + CATALOG + f"tables:\n  - topic: t\n    old: legacy.t\n    new: '{name}'\n"
    assert problems(tmp_path, text) == [
        f"{tmp_path / 'plan.yaml'}:8: tables[0].new: '{name}' is not a table name cutover can use: namespace.table, "
        "each part letters, digits and _ (fix: e.g. " + fix + ")"]


def test_the_catalog_name_is_an_identifier_for_spark_and_pyiceberg(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, MINIMAL + "catalog: {uri: 'sqlite:////tmp/c.db', name: 'my lake'}\n")
    assert msg == (f"{tmp_path / 'plan.yaml'}:4: catalog.name: 'my lake' cannot name a catalog: letters, digits, "
                   "_ and -, starting with a letter or _ (it becomes Spark's spark.sql.catalog.<name>) (fix: e.g. "
                   "my_lake)")


def test_what_a_plan_leaves_unsaid_is_refused_by_name_where_it_is_needed_not_asserted(tmp_path: Path) -> None:
    from cutover.errors import Refused, UsageError
    from cutover.lake import tables
    from cutover.switch import handover
    from tests.unit.switch.switch_support import unit_plan

    topics_only = load_plan(write(tmp_path, MINIMAL), environ={})  # no tables, so no catalog: a drill's table check
    for reach in (lambda: tables.qualified(topics_only, "a.b"), lambda: tables.load_table(topics_only, "a.b")):
        with pytest.raises(UsageError) as info:
            reach()
        assert info.value.message == (f"{tmp_path / 'plan.yaml'}: catalog: the plan has no catalog section, which "
                                      "table a.b needs")
        assert info.value.fix is not None and info.value.fix.startswith("add catalog: {uri: ...}, e.g. sqlite:")
    # promote checks where each old writer stands first; a plan edited since is refused, not asserted
    pair = {"topic": "o", "old": "legacy.o", "new": "cutover.o", "writer_offsets": "group"}
    plan = unit_plan(tmp_path, tables=[pair])
    with pytest.raises(Refused) as refused:
        handover.writer_positions(None, plan, plan.spec.tables[0], 1.0)
    assert refused.value.message == "table legacy.o: writer_offsets is group but writer_group is not set"


def test_every_problem_of_a_plan_carries_its_fix(tmp_path: Path) -> None:
    text = MINIMAL + """\
gates: {max_mirror_lag: '100', max_missing_rows: -1, max_lag_rows: {new_ahead: -2}, quiet_period: -5}
switch: {reverse_mirror: 'no'}
topics: {include: orders}
groups: {include: {a: b}}
catalog: {uri: 'sqlite:////tmp/c.db', type: hive}
tables:
  - {topic: a, old: x.a, new: y.a, format: JSON, schema: [{name: a, type: varchar}]}
hooks: {freez_producers: ./x.sh}
observability: {ports: {mirror: 70000}}
readers:
  - {name: 'my reader', kind: spark-checkpoint, checkpoint: ck}
version: 2
mirror: {compression: lz5}
"""
    found = problems(tmp_path, text)
    without = [p for p in found if "(fix: " not in p]
    assert without == [], without
    fixes = {p.split(": ", 2)[1]: p.split("(fix: ")[-1][:-1] for p in found}
    assert fixes == {
        "gates.max_mirror_lag": "write 100 without quotes",
        "gates.max_missing_rows": "0 or more; 0, the default, allows none",
        "gates.max_lag_rows.new_ahead": "0 or more, or leave it out for no limit",
        "gates.quiet_period": "a number of seconds, or one with its unit: 500ms, 30s, 5m, 1h, 2d",
        "switch.reverse_mirror": "true or false, without quotes",
        "topics.include": 'a list, even of one: ["orders"]',
        "groups.include": "a list: one item a line, each starting with '- ', or [a, b]",
        "catalog.type": "write one of them",
        "tables[0].format": "did you mean 'json'?",
        "tables[0].schema[0].type": "use string, long, int, double, float, boolean, timestamp, date, binary or "
                                    "decimal(p,s)",
        "hooks": "did you mean freeze_producers?",
        "observability.ports.mirror": "a port from 1 to 65535, or leave it out to serve none",
        "readers[0].name": "e.g. my-reader",
        "version": "version: 1",
        "mirror.compression": "did you mean lz4?"}


def test_an_unset_variable_is_the_only_problem_named_at_its_key(tmp_path: Path) -> None:
    assert problems(tmp_path, "name: ${NOPE_X}\n" + MINIMAL) == [
        f"{tmp_path / 'plan.yaml'}:1: name: environment variable NOPE_X is not set (fix: export it, or define it in "
        "the plan's env_file)"]


def test_an_unclosed_quote_is_named_where_it_opens(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, MINIMAL + "name: 'orders\n")
    assert msg == (f"{tmp_path / 'plan.yaml'}:5:1: YAML syntax error: found unexpected end of stream (fix: close the "
                   "quote opened at line 4, column 7)")


def test_an_env_file_that_is_a_folder_is_named_as_one(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    assert problems(tmp_path, "env_file: secrets\n" + MINIMAL) == [
        f"{tmp_path / 'plan.yaml'}:1: env_file: {tmp_path / 'secrets'} is a folder, not a file of NAME=value lines "
        "(fix: name the file in it, or remove env_file)"]


def test_the_mirror_state_on_the_old_cluster_needs_the_idempotent_mode(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, MINIMAL + "mirror:\n  state_cluster: old\n")
    assert "mirror.state_cluster: old needs mirror.mode: idempotent" in msg and "fix: set mode: idempotent" in msg
    (msg,) = problems(tmp_path, MINIMAL + "mirror:\n  mode: exactly-once\n")
    assert "mirror.mode" in msg and "transactional" in msg and "idempotent" in msg
    plan = load_plan(write(tmp_path, MINIMAL + "mirror:\n  mode: idempotent\n  state_cluster: old\n"))
    assert (plan.spec.mirror.mode, plan.spec.mirror.state_cluster) == ("idempotent", "old")
