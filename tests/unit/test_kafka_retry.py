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
