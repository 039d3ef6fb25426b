"""Kafka clients built from a plan's cluster properties.

Every client made here logs through Python logging (not librdkafka's own stderr
lines), remembers the last error the cluster reported (so a timeout can say "SASL
authentication failed" instead of "timed out"), and is used with bounded timeouts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from cutover.common import NETWORK_TIMEOUT
from cutover.errors import AccessDenied, UnreachableError, UsageError

if TYPE_CHECKING:
    from cutover.plan import ClusterSide, Plan

log = logging.getLogger("cutover.kafka")
#: librdkafka's own log lines: shown with --debug only; failures are reported by cutover.
client_log = logging.getLogger("cutover.kafka.librdkafka")

DEFAULT_TIMEOUT = NETWORK_TIMEOUT
#: Seconds librdkafka's FAIL lines stay relevant to explain a failure.
_RECENT = 2 * NETWORK_TIMEOUT
#: A cluster this process never reached whose every connection is refused for this long is named at once:
#: nothing listens there. One it has reached is waited for to the timeout (a broker restarting refuses).
REFUSED_GRACE = 3.0
#: The bootstrap lists this process has had an answer from.
_REACHED: set[str] = set()

_AUTH_CODES = {
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


@dataclass
class ClusterRef:
    """A named cluster and its client properties; what errors and logs call it."""

    name: str
    properties: Mapping[str, str]
    errors: list[KafkaError] = field(default_factory=list)
    #: librdkafka's last FAIL log lines for this cluster (monotonic time, line): why a connection failed.
    failures: list[tuple[float, str]] = field(default_factory=list)

    @classmethod
    def of(cls, plan: Plan, side: ClusterSide) -> ClusterRef:
        """The plan's `side` cluster."""
        return cls(side, plan.cluster(side))

    @property
    def bootstrap(self) -> str:
        return self.properties.get("bootstrap.servers", "?")

    def describe(self) -> str:
        return f"the {self.name} cluster ({self.bootstrap})"

    def config(self, **extra: Any) -> dict[str, Any]:
        """Client config: the plan's properties, our logger and error callback, then extras."""

        def on_error(err: KafkaError) -> None:
            self.errors = ([*self.errors, err])[-5:]
            log.debug("%s: %s", self.name, err.str())

        conf: dict[str, Any] = dict(self.properties)
        conf.setdefault("socket.connection.setup.timeout.ms", 5000)
        conf.update({"logger": _ClientLog(self), "error_cb": on_error})
        conf.update(extra)
        return conf

    def failure(self, exc: BaseException | None, doing: str, client: Any = None, probe: float = 2.0) -> Exception:
        """Turn a client failure into an error that names the cluster and, if known, the cause.

        Pass the client so its queued error callbacks (where librdkafka reports
        authentication failures) are served first. `probe` bounds the TLS handshake that tells
        whether the listener speaks TLS (a host that accepts and never answers holds it that long).
        """
        if client is not None:
            client.poll(0.2)
        from cutover.kafka import diagnose, tls

        kerr = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if isinstance(kerr, KafkaError) and kerr.code() in _AUTH_CODES - {KafkaError._AUTHENTICATION}:
            return AccessDenied(f"{self.describe()} refused {doing}: {kerr.str()}",  # the operation's own answer
                                fix="grant it to this principal (README: 'Using cutover on your clusters', Rights)")
        candidates = [kerr] if isinstance(kerr, KafkaError) else []
        candidates += reversed(self.errors)
        recent = time.monotonic() - _RECENT  # a line from an earlier hiccup of a long run says nothing now
        found = diagnose.explain([*(e.str() for e in candidates), *(t for at, t in reversed(self.failures)
                                                                    if at >= recent)], self.properties)
        if found is not None and found.kind in diagnose.BEFORE_TLS:  # SASL set up wrong, DNS: said exactly
            return UnreachableError(f"could not reach {self.describe()} while {doing}: {found.what}", fix=found.fix)
        auth = next((e for e in candidates if e.code() in _AUTH_CODES), None)
        if auth is not None or (found is not None and found.kind == "denied"):
            cause = auth.str() if auth is not None else found.what if found is not None else ""
            fix = found.fix if found is not None and found.kind == "denied" else \
                "check the credentials and ACLs of this principal in the plan"
            return AccessDenied(f"{self.describe()} refused {doing}: {cause}", fix=fix)
        handshake = tls.diagnose(self.properties, timeout=probe)
        if handshake is not None:
            what, fix = handshake
            return UnreachableError(f"could not reach {self.describe()} while {doing}: {what}", fix=fix)
        if found is not None:
            return UnreachableError(f"could not reach {self.describe()} while {doing}: {found.what}", fix=found.fix)
        cause = candidates[0].str() if candidates else (str(exc) if exc else "no answer")
        return UnreachableError(
            f"could not reach {self.describe()} while {doing}: {cause}",
            fix="check bootstrap.servers and that the brokers are up and reachable from here",
        )


class _ClientLog:
    """The `logger` of a cluster's clients: keeps its FAIL lines for `failure`, passes every line on to
    `client_log` (shown with --debug only)."""

    def __init__(self, ref: ClusterRef) -> None:
        self.ref = ref

    def log(self, level: int, msg: str, *args: Any) -> None:
        text = msg % args if args else msg
        if text.startswith("FAIL "):
            self.ref.failures = [*self.ref.failures, (time.monotonic(), text)][-10:]
        client_log.log(level, "%s", text)


def reached(ref: ClusterRef) -> bool:
    """Whether this process has had an answer from the cluster's bootstrap list (so a connection it refuses now
    is a broker restarting, not an address where nothing listens)."""
    return ref.properties.get("bootstrap.servers", "") in _REACHED


def admin(ref: ClusterRef, warm_for: float | None = None) -> AdminClient:
    """An admin client. `warm_for` (a timeout): read the cluster's metadata first, for a client whose first
    call lists offsets: librdkafka then knows every partition's leader, where a cold client's first
    ListOffsets now and then waits 1 to 3 s for them (measured here: 3 of 12 fresh clients)."""
    try:
        client = AdminClient(ref.config())
    except KafkaException as exc:
        raise _bad_property(ref, exc) from None
    if warm_for is not None:
        metadata(ref, client, warm_for, "reading the cluster's metadata")
    return client


def metadata(ref: ClusterRef, client: AdminClient, timeout: float, doing: str, topic: str | None = None) -> Any:
    """The cluster's metadata, asked in slices of a second so that a failure librdkafka already knows
    cannot be waited out (a TLS client at a plaintext listener, SASL at a plaintext one, a wrong
    mechanism or password, a name that does not resolve, a port that is not Kafka): it is named at
    once, not after `timeout`. Anything else (refused, no answer) is asked again until `timeout`."""
    from cutover.kafka import diagnose

    started = time.monotonic()
    deadline = started + timeout
    bootstrap = ref.properties.get("bootstrap.servers", "")
    while True:
        left = deadline - time.monotonic()
        try:
            found = client.list_topics(topic, timeout=max(0.1, min(1.0, left))) if topic is not None else \
                client.list_topics(timeout=max(0.1, min(1.0, left)))
            _REACHED.add(bootstrap)
            return found
        except KafkaException as exc:
            client.poll(0)  # serve the error callbacks that say why
            recent = time.monotonic() - _RECENT
            lines = [*(e.str() for e in ref.errors), *(t for at, t in ref.failures if at >= recent)]
            if time.monotonic() >= deadline or diagnose.decisive(lines, ref.properties) or (
                    bootstrap not in _REACHED and time.monotonic() - started >= REFUSED_GRACE
                    and diagnose.all_refused(lines, ref.properties)):
                # The handshake probe within what is left of the wait (at least half a second, enough for a
                # listener's answer to a TLS hello): `--timeout 2` is not 2 s plus another 2 s of probing.
                probe = min(2.0, max(0.5, deadline - time.monotonic()))
                raise ref.failure(exc, doing, client, probe=probe) from None


def _bad_property(ref: ClusterRef, exc: KafkaException) -> UsageError:
    from cutover.kafka import tls

    tls.check_files(ref.name, ref.properties)  # a TLS file that cannot be used, named with its path
    return UsageError(f"clusters.{ref.name}: the client properties are not accepted: {exc.args[0]}",
                      fix="fix or remove the property in the plan (see librdkafka's CONFIGURATION.md)")
