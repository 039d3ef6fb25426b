"""The capability table's logic: an ApiVersions answer read byte by byte, what the API list alone says,
the real probe's answers over it, and the refusal that names each missing capability."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from cutover.cli import main
from cutover.errors import ExitCode, Refused
from cutover.kafka import capabilities as caps
from cutover.kafka.listener import parse_api_versions

#: What Apache Kafka 4.1 lists (the keys cutover's capabilities need, and more), and what Tansu 0.6.0
#: lists of them (no EndTxn, ACL deletion, CreatePartitions, DescribeProducers, ListTransactions or
#: ConsumerGroupHeartbeat).
KAFKA = {k: (0, 9) for k in (0, 1, 2, 3, 8, 9, 10, 11, 18, 19, 20, 21, 22, 23, 24, 25, 26, 28, 29, 30, 31, 32, 33,
                             37, 44, 50, 51, 60, 61, 66, 68)}
TANSU = {k: v for k, v in KAFKA.items() if k not in (26, 31, 37, 61, 66, 68, 23)}


def _answer(correlation: int, error: int, apis: dict[int, tuple[int, int]]) -> bytes:
    return struct.pack(">ihi", correlation, error, len(apis)) + b"".join(
        struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in apis.items())


def test_an_api_versions_answer_is_read_key_by_key_and_anything_else_is_no_answer() -> None:
    assert parse_api_versions(_answer(11, 0, {18: (0, 4), 22: (0, 5)}), 11) == {18: (0, 4), 22: (0, 5)}
    assert parse_api_versions(_answer(12, 0, {18: (0, 4)}), 11) is None  # another request's answer
    assert parse_api_versions(_answer(11, 35, {}), 11) is None  # UNSUPPORTED_VERSION
    assert parse_api_versions(_answer(11, 0, {18: (0, 4)})[:-2], 11) is None  # cut short
    assert parse_api_versions(b"HTTP/1.1 400", 11) is None


def test_the_api_list_alone_answers_what_it_can_and_leaves_the_rest_to_the_probe() -> None:
    kafka, tansu = caps.from_apis("new", KAFKA), caps.from_apis("new", TANSU)
    assert {f.capability.name: f.supported for f in kafka.findings} == {
        "transactions": True, "read-committed": None, "timestamps": None, "headers": None,
        "idempotent-producer": True, "describe-producers": True, "list-transactions": True, "acls": True,
        "scram-admin": True, "incremental-configs": True, "create-partitions": True, "delete-records": True,
        "new-consumer-groups": True}
    assert [f.capability.name for f in tansu.missing()] == [
        "transactions", "describe-producers", "list-transactions", "acls", "create-partitions",
        "new-consumer-groups"]
    assert tansu.get("transactions").evidence == "ApiVersions lacks EndTxn"
    assert tansu.get("acls").evidence == "ApiVersions lacks DeleteAcls"
    assert all(f.supported is None for f in caps.from_apis("new", None).findings)
    row = tansu.get("transactions").as_dict()
    assert row["supported"] is False
    assert row["without"].startswith("the mirror cannot write records and progress atomically")
    assert "cutover_does" not in kafka.get("transactions").as_dict()  # said only where it is missing


def test_the_real_probe_answers_over_the_list_and_an_unknown_answer_keeps_the_lists() -> None:
    listed = caps.from_apis("new", KAFKA)
    probed = caps.merge(listed, {"transactions": (False, "a transaction could not be ended: x"),
                                 "read-committed": (None, "no transaction could be ended"),
                                 "headers": (True, "the records' headers read back as written")},
                        {"markers_take_offsets": True})
    assert probed.get("transactions").supported is False
    assert probed.get("transactions").evidence == "a transaction could not be ended: x"
    assert probed.get("read-committed").evidence == "no transaction could be ended"  # why the probe could not tell
    assert probed.get("headers").supported is True
    assert probed.facts["markers_take_offsets"] is True
    assert probed.facts["probe"]["read-committed"] == "no transaction could be ended"


def test_a_command_needing_a_missing_capability_is_refused_naming_each_one_and_its_cost() -> None:
    tansu = caps.from_apis("new", TANSU)
    with pytest.raises(Refused) as refused:
        caps.require(tansu, ["transactions", "headers", "create-partitions"], "cutover mirror")
    text = str(refused.value)
    assert text.startswith("cutover mirror cannot run on the new cluster: transactions: ApiVersions lacks EndTxn")
    assert "create-partitions: ApiVersions lacks CreatePartitions" in text
    assert "headers:" not in text  # not known from the list: not a reason to refuse
    assert refused.value.exit_code == ExitCode.REFUSED and refused.value.fix
    caps.require(caps.from_apis("new", KAFKA), ["transactions", "create-partitions"], "cutover mirror")


def test_the_idempotent_mode_needs_no_transactions_and_a_refusal_for_them_alone_names_it() -> None:
    tansu = caps.from_apis("new", TANSU)
    assert caps.mirror_needs("transactional") == ("transactions", "idempotent-producer", "headers")
    assert caps.mirror_needs("idempotent") == ("idempotent-producer", "headers")
    caps.require(tansu, caps.mirror_needs("idempotent"), "cutover mirror")  # nothing missing: no refusal
    with pytest.raises(Refused) as refused:
        caps.require(tansu, caps.mirror_needs("transactional"), "cutover mirror")
    assert refused.value.fix is not None and refused.value.fix.startswith("set mirror.mode: idempotent in the plan")


@pytest.mark.parametrize("argv, words", [
    (["--platform", "new=tansu", "--brokers", "new=3"], ["--platform new=tansu runs one plaintext Tansu broker",
                                                         "--brokers new=3", "fix: leave --brokers new=3 out"]),
    (["--platform", "new=tansu", "--security", "new=scram"], ["--security new=scram is for Apache Kafka"]),
    (["--platform", "new=redpanda"], ["redpanda", "kafka, tansu"]),
])
def test_a_tansu_cluster_with_kafka_only_options_is_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: list[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["local", "up", "--dir", str(tmp_path / "box"), *argv])
    err = capsys.readouterr().err
    assert done.value.code == ExitCode.USAGE, err
    for word in words:
        assert word in err, err
    assert not (tmp_path / "box").exists()


def test_tansu_not_built_is_named_with_how_to_build_it_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTOVER_TANSU", str(tmp_path / "no-tansu"))
    with pytest.raises(SystemExit) as done:
        main(["local", "up", "--dir", str(tmp_path / "box"), "--platform", "new=tansu"])
    err = capsys.readouterr().err
    assert done.value.code == ExitCode.ERROR, err
    assert f"Tansu 0.6.0 is not built on this machine (looked for {tmp_path / 'no-tansu'})" in err
    assert "fix: run scripts/tansu once" in err and "Traceback" not in err
    assert not (tmp_path / "box").exists()
