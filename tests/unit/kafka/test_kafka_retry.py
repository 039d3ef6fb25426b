"""again_while_transient: which Kafka answers are asked again, and for how long (pure logic)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from cutover.kafka import offsets
from cutover.kafka.offsets import again_while_transient


def _answers(*codes: int) -> tuple[list[int], object]:
    """A call failing with each code in turn, then returning "done"; and the list of calls made."""
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(codes):
            raise KafkaException(KafkaError(codes[len(calls) - 1]))
        return "done"
    return calls, call


def test_transient_answers_are_asked_again_until_the_call_succeeds() -> None:
    calls, call = _answers(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR)
    pauses: list[int] = []
    assert again_while_transient(call, 60, lambda: pauses.append(1)) == "done"  # type: ignore[arg-type]
    assert len(calls) == 3 and len(pauses) == 2


def test_an_answer_that_is_not_transient_is_raised_at_once() -> None:
    calls, call = _answers(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as exc:
        again_while_transient(call, 60, lambda: None)  # type: ignore[arg-type]
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and len(calls) == 1


def test_a_final_code_is_raised_at_once_even_if_kafka_calls_it_retriable() -> None:
    calls, call = _answers(KafkaError.REBALANCE_IN_PROGRESS)
    with pytest.raises(KafkaException):
        again_while_transient(call, 60, lambda: None, final=frozenset({KafkaError.REBALANCE_IN_PROGRESS}))  # type: ignore[arg-type]
    assert len(calls) == 1


def test_the_last_transient_answer_is_raised_when_time_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]  # a clock that moves only when the retry loop pauses: no real waiting
    monkeypatch.setattr(offsets, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    def pause() -> None:
        clock[0] += 10

    calls, call = _answers(*[KafkaError.COORDINATOR_NOT_AVAILABLE] * 100)
    with pytest.raises(KafkaException) as exc:
        again_while_transient(call, 25, pause)  # type: ignore[arg-type]
    # asked at 0, 10, 20 and 30 s; at 30 s the 25 s are up
    assert exc.value.args[0].code() == KafkaError.COORDINATOR_NOT_AVAILABLE and len(calls) == 4


@pytest.mark.parametrize("code", [
    KafkaError.UNKNOWN_LEADER_EPOCH,  # a broker restarted: its partitions' leader epoch moved past what was asked
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.REPLICA_NOT_AVAILABLE, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER,
])
def test_a_leader_moving_in_a_rolling_restart_is_asked_again(code: int) -> None:
    # librdkafka does not flag these as retriable in an Admin answer (CI, three brokers, one restarting:
    # "Leader epoch is newer than broker epoch" while listing the start offsets stopped a promote)
    calls, call = _answers(code)
    assert again_while_transient(call, 60, lambda: None) == "done"  # type: ignore[arg-type]
    assert len(calls) == 2


class _Client:
    """An admin client as `retrying` uses it when the call is given: only served callbacks."""

    def poll(self, timeout: float) -> None:
        pass


def _transport_once() -> tuple[list[object], object]:
    """An admin call whose first attempt fails with a transport failure, then answers; the clients it was made on."""
    import concurrent.futures

    used: list[object] = []

    def call(client: object, wait: float) -> dict[str, concurrent.futures.Future[int]]:
        used.append(client)
        if len(used) == 1:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        done: concurrent.futures.Future[int] = concurrent.futures.Future()
        done.set_result(7)
        return {"p0": done}
    return used, call


def test_a_transport_failure_at_a_cluster_reached_before_is_asked_again_on_a_new_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # CI, three brokers: a promote's drain began with a broker stopped, and listing the end offsets failed at once
    # with "nothing listens on" that broker. The cluster had answered before: it is a broker going down.
    from cutover.kafka import clients

    ref = clients.ClusterRef("new", {"bootstrap.servers": "127.0.0.1:1"})
    monkeypatch.setattr(clients, "_REACHED", {"127.0.0.1:1"})
    first = _Client()
    used, call = _transport_once()
    assert offsets.retrying(ref, first, call, "listing the end offsets", 60) == {"p0": 7}  # type: ignore[arg-type]
    assert len(used) == 2 and used[0] is first and used[1] is not first  # the second on a new client


def test_a_transport_failure_at_a_cluster_never_reached_is_named_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from cutover.errors import CutoverError
    from cutover.kafka import clients

    ref = clients.ClusterRef("new", {"bootstrap.servers": "127.0.0.1:1"})
    monkeypatch.setattr(clients, "_REACHED", set())
    used, call = _transport_once()
    with pytest.raises(CutoverError) as exc:
        offsets.retrying(ref, _Client(), call, "listing the end offsets", 60)  # type: ignore[arg-type]
    assert len(used) == 1
    assert "could not reach the new cluster (127.0.0.1:1) while listing the end offsets" in str(exc.value)


def test_refused_credentials_end_a_wait_at_once_only_at_a_cluster_never_reached(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same refusal of a principal the cluster let in before in this process is a broker restarting (a KRaft
    broker refuses SCRAM credentials until it has read its metadata): waited for, named only if it lasts. Another
    principal let in says nothing of this one (rights audit checks several side by side)."""
    from cutover.kafka import clients

    ref = clients.ClusterRef("new", {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
                                     "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin"})
    line = ("sasl_plaintext://127.0.0.1:1/bootstrap: SASL authentication error: Authentication failed during "
            "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256 (after 3ms in state AUTH_REQ)")
    monkeypatch.setattr(clients, "_ADMITTED", set())
    assert clients._decisive(ref, [line])
    monkeypatch.setattr(clients, "_ADMITTED", {("127.0.0.1:1", "user other (SCRAM-SHA-256) over SASL_PLAINTEXT")})
    assert clients._decisive(ref, [line])  # another principal let in says nothing of this one's credentials
    monkeypatch.setattr(clients, "_ADMITTED", {("127.0.0.1:1", "user admin (SCRAM-SHA-256) over SASL_PLAINTEXT")})
    assert not clients._decisive(ref, [line])
    other = "FAIL [thrd:x]: Failed to resolve 'kafka-olld:9092': Name or service not known"
    assert clients._decisive(ref, [other])  # what no restart explains still ends it at once


def test_a_tls_handshake_closed_ends_a_wait_at_once_only_at_a_cluster_never_let_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker of a cluster this process was let into, with the same settings, closes TLS handshakes while it
    starts or stops (CI, three brokers over SASL_SSL, a rolling restart: librdkafka said "connecting to a
    PLAINTEXT broker listener?" of the broker going down, and a new client's metadata read failed at once
    while two brokers answered). Waited for, named only if it lasts; at first contact it is the answer."""
    from cutover.kafka import clients

    ref = clients.ClusterRef("new", {"bootstrap.servers": "127.0.0.1:1,127.0.0.1:2", "security.protocol": "SASL_SSL",
                                     "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin"})
    line = ("sasl_ssl://127.0.0.1:2/bootstrap: SSL handshake failed: Disconnected: SSL connection closed by peer: "
            "connecting to a PLAINTEXT broker listener? (after 113ms in state SSL_HANDSHAKE)")
    monkeypatch.setattr(clients, "_ADMITTED", set())
    assert clients._decisive(ref, [line])
    bootstrap = "127.0.0.1:1,127.0.0.1:2"
    monkeypatch.setattr(clients, "_ADMITTED", {(bootstrap, "user admin (SCRAM-SHA-256) over SASL_PLAINTEXT")})
    assert clients._decisive(ref, [line])  # let in without TLS: this client's handshake failing is the answer
    monkeypatch.setattr(clients, "_ADMITTED", {(bootstrap, "user admin (SCRAM-SHA-256) over SASL_SSL")})
    assert not clients._decisive(ref, [line])
