"""`cutover init`: the plan it writes is valid, commented, keeps passwords out, and bad answers write nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cutover.cli import main
from cutover.errors import ExitCode
from cutover.plan import load_plan


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_a_sasl_ssl_plan_is_written_commented_with_the_password_as_a_variable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OLD_KAFKA_PASSWORD", "S3_ACCESS_KEY", "S3_SECRET_KEY"):
        monkeypatch.delenv(var, raising=False)
    plan = tmp_path / "plan.yaml"
    code, out, err = run(["init", "--plan", str(plan), "--name", "orders-move",
                          "--old-bootstrap", "kafka-old-1:9093,kafka-old-2:9093", "--old-security", "SASL_SSL",
                          "--old-sasl-mechanism", "SCRAM-SHA-256", "--old-user", "cutover-reader",
                          "--old-ca", "/etc/kafka/ca.pem", "--new-bootstrap", "kafka-new:9092",
                          "--topics", "orders", "--topics", "payments\\..*", "--groups", "billing-.*",
                          "--pair", "orders=legacy.orders:cutover.orders",
                          "--catalog-uri", "http://catalog:8181", "--warehouse", "s3://lake/wh"], capsys)
    # the password and storage key variables are not set: written, not checked, not ready
    assert code == 3, err
    assert (f"wrote {plan}; not checked: set OLD_KAFKA_PASSWORD, S3_ACCESS_KEY, S3_SECRET_KEY (or give --env-file)"
            in out)
    text = plan.read_text()
    assert text.startswith("# A cutover migration plan, written by `cutover init`.")
    assert 'sasl.password: "${OLD_KAFKA_PASSWORD}"' in text
    loaded = load_plan(plan, environ={"OLD_KAFKA_PASSWORD": "pw", "S3_ACCESS_KEY": "k", "S3_SECRET_KEY": "s"})
    assert loaded.name == "orders-move"
    assert dict(loaded.cluster("old")) == {
        "bootstrap.servers": "kafka-old-1:9093,kafka-old-2:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "cutover-reader", "sasl.password": "pw",
        "ssl.ca.location": "/etc/kafka/ca.pem"}
    assert dict(loaded.cluster("new")) == {"bootstrap.servers": "kafka-new:9092"}
    assert loaded.spec.topics.include == ["orders", "payments\\..*"] and loaded.spec.groups.include == ["billing-.*"]
    assert [(t.topic, t.old, t.new) for t in loaded.spec.tables] == [("orders", "legacy.orders", "cutover.orders")]
    assert loaded.spec.catalog is not None and loaded.spec.catalog.type == "rest"
    assert yaml.safe_load(text)["catalog"]["warehouse"] == "s3://lake/wh"
    assert loaded.spec.catalog.storage == "s3://lake/wh"  # the s3:// warehouse is where plan check probes
    assert loaded.spec.catalog.properties == {"s3.access-key-id": "k", "s3.secret-access-key": "s"}


def test_s3_storage_is_written_with_its_endpoint_and_keys_as_variables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.yaml"
    code, _out, err = run(["init", "--plan", str(plan), "--old-bootstrap", "o:1", "--new-bootstrap", "n:1",
                           "--catalog-uri", "https://rest.example/api/catalog", "--warehouse", "analytics",
                          "--storage", "s3://lake-bucket/warehouse", "--s3-endpoint", "https://s3.example",
                          "--s3-region", "eu-west-1", "--s3-path-style", "--s3-key-var", "LAKE_KEY",
                          "--s3-secret-var", "LAKE_SECRET", "--no-check"], capsys)
    assert code == 0, err
    text = plan.read_text()
    assert 's3.access-key-id: "${LAKE_KEY}"' in text and "never here" in text
    c = load_plan(plan, environ={"LAKE_KEY": "k", "LAKE_SECRET": "s"}).spec.catalog
    assert c is not None and (c.warehouse, c.storage) == ("analytics", "s3://lake-bucket/warehouse")
    assert c.properties == {"s3.endpoint": "https://s3.example", "s3.access-key-id": "k",
                            "s3.secret-access-key": "s", "s3.path-style-access": "true", "s3.region": "eu-west-1"}
    # the AWS SDK's own credentials (a role): no key in the plan at all
    run(["init", "--plan", str(plan), "--force", "--old-bootstrap", "o:1", "--new-bootstrap", "n:1",
         "--catalog-uri", "sqlite:////tmp/c.db", "--warehouse", "s3://b/w", "--s3-key-var", "", "--s3-secret-var",
         "", "--no-check"], capsys)
    c = load_plan(plan).spec.catalog
    assert c is not None and c.storage == "s3://b/w" and not c.properties


@pytest.mark.parametrize(("argv", "words"), [
    (["--new-bootstrap", "n:1"], ["cutover init needs --old-bootstrap", "fix: give --old-bootstrap, or run cutover "
                                  "init at a terminal to be asked"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--pair", "orders"],
     ["--pair 'orders': expected TOPIC=OLD_TABLE:NEW_TABLE"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--pair", "orders=a.b:c.d"], ["--pair needs a catalog"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--name", "a/b"], ["'a/b' cannot name a plan"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--old-security", "SASL_PLAINTEXT"],
     ["cutover init needs --old-user"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--s3-endpoint", "http://s3"], ["need S3 storage"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--old-user", "app", "--old-ca", "/ca.pem"],
     ["--old-user and --old-ca given with --old-security PLAINTEXT, which has no use for them: nothing was written",
      "fix: choose the --old-security that uses them"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--new-security", "SASL_PLAINTEXT", "--new-user", "u",
      "--new-ca", "/ca.pem"], ["--new-ca given with --new-security SASL_PLAINTEXT, which has no use for it"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--catalog-uri", "sqlite:////tmp/c.db", "--warehouse",
      "file:///data/w", "--storage", "s3://b/w"], ["--warehouse file:///data/w is a local folder, and --storage "
                                                   "s3://b/w is on S3"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "o:1"],
     ["names o:1, as clusters.old does", "(nothing was written)"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--catalog-uri", "http://c", "--storage", "/data"],
     ["--storage /data: not an s3:// location"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--storage", "s3://b/w"], ["--storage needs a catalog"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--catalog-uri", "http://c", "--storage", "s3://b/w",
      "--s3-key-var", ""], ["--s3-key-var and --s3-secret-var go together"]),
    # each answer named by its flag, with a fix, never by a line of a file that was not written
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--name", "my plan"],
     ["--name (plan key name): 'my plan' cannot name a plan", "(fix: e.g. my-plan)"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--catalog-uri", "sqlite:////tmp/c.db", "--pair",
      "orders=legacy.orders:cutover.my orders"],
     ["--pair (plan key tables[0].new): 'cutover.my orders' is not a table name cutover can use",
      "(fix: e.g. cutover.my_orders)"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--catalog-uri", "sqlite:////tmp/c.db", "--pair",
      "my orders=legacy.orders:cutover.orders"],
     ["--pair (plan key tables[0].topic): 'my orders' is not a Kafka topic name", "(fix: e.g. my_orders, "]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--catalog-uri", "sqlite:////tmp/c.db", "--catalog-name",
      "my lake"], ["--catalog-name (plan key catalog.name): 'my lake' cannot name a catalog", "(fix: e.g. my_lake)"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--old-security", "SASL_SSL", "--old-user", "u",
      "--old-password-var", "my var"],
     ["--old-password-var 'my var': not an environment variable name",
      "fix: letters, digits and _, not starting with a digit, e.g. OLD_KAFKA_PASSWORD"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--old-security", "SASL_SSL", "--old-user", "u",
      "--old-password-var", ""],
     ["--old-password-var '': not an environment variable name", "e.g. OLD_KAFKA_PASSWORD"]),
    (["--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--catalog-uri", "http://c", "--storage", "s3://b/w",
      "--s3-key-var", "1KEY"], ["--s3-key-var '1KEY': not an environment variable name", "e.g. S3_ACCESS_KEY"]),
], ids=["no-bootstrap", "bad-table", "table-without-catalog", "bad-name", "sasl-without-user", "s3-without-storage",
        "user-and-ca-with-plaintext", "ca-with-sasl-plaintext", "file-warehouse-s3-storage", "same-cluster-twice",
        "storage-not-s3", "storage-without-catalog", "one-key-var", "name-with-a-space", "table-with-a-space",
        "topic-with-a-space", "catalog-name-with-a-space", "password-var-with-a-space", "password-var-empty",
        "key-var-starting-with-a-digit"])
def test_bad_answers_write_nothing(argv: list[str], words: list[str], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["init", "--plan", str(tmp_path / "plan.yaml"), "--no-check", *argv], capsys)
    assert (code, out) == (ExitCode.USAGE, ""), err
    for w in words:
        assert w in err, err
    assert list(tmp_path.iterdir()) == [] and "Traceback" not in err
    assert "/tmp/tmp" not in err  # a problem is named against the plan's path, not a draft that is gone


def test_an_existing_plan_is_kept_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("mine\n")
    args = ["init", "--plan", str(plan), "--old-bootstrap", "o:1", "--new-bootstrap", "n:1", "--no-check"]
    code, _, err = run(args, capsys)
    assert code == ExitCode.USAGE and f"{plan} already exists" in err and plan.read_text() == "mine\n"
    code, out, _ = run([*args, "--force"], capsys)
    assert code == 0 and "not checked (--no-check)" in out
    assert load_plan(plan).cluster("old")["bootstrap.servers"] == "o:1"


def test_values_are_written_as_given_and_paths_made_absolute(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "secrets.env").write_text("NEW_KAFKA_PASSWORD=pw\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NEW_KAFKA_PASSWORD", raising=False)
    code, _out, err = run(["init", "--plan", "conf/plan.yaml", "--old-bootstrap", "o:1", "--new-bootstrap", "n:1",
                          "--new-security", "SASL_SSL", "--new-user", "cutover", "--new-ca", "conf/ca.pem",
                          "--topics", "cost-$5", "--topics", "käse\\..*", "--env-file", "conf/secrets.env",
                          "--no-check"], capsys)
    assert code == 0, err
    plan = load_plan(tmp_path / "conf" / "plan.yaml")  # read from another folder than it was written from
    assert plan.spec.topics.include == ["cost-$5", "käse\\..*"]
    assert plan.cluster("new")["ssl.ca.location"] == str(tmp_path / "conf" / "ca.pem")
    assert plan.cluster("new")["sasl.password"] == "pw"  # through the env file, named by its absolute path
    assert "pw" not in (tmp_path / "conf" / "plan.yaml").read_text().replace("password", "")
