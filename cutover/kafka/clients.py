"""Kafka clients built from a plan's cluster properties.

Every client made here logs through Python logging (not librdkafka's own stderr
lines), remembers the last error the cluster reported (so a timeout can say "SASL
authentication failed" instead of "timed out"), and is used with bounded timeouts.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from cutover.common import NETWORK_TIMEOUT
from cutover.errors import AccessDenied, CutoverError, UnreachableError, UsageError

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
#: The (bootstrap list, principal) pairs this process has been let in with: a principal the cluster admitted
#: before and refuses now meets a broker restarting; another principal's refusal says nothing of the sort.
_ADMITTED: set[tuple[str, str]] = set()
#: The first and the longest slice of a wait on a cluster: librdkafka's error callback and FAIL lines, which say
#: why a cluster cannot be used (refused credentials: about 300 ms), are read between slices. Slices double
#: from the first to the longest, so an answer slower than one slice (the metadata of a very large cluster) is
#: still waited for.
_FIRST_SLICE, _LONGEST_SLICE = 0.25, 2.0
#: Seconds without an answer or a cause after which `metadata` asks the listener itself what it is (a silent
#: HTTP server, a controller), and the longest each of its two requests waits.
PROBE_AFTER, PROBE_WAIT = 0.5, 0.5

#: Errors that say the cluster refused the client's credentials (not an operation).
_CREDENTIAL_CODES = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
_AUTH_CODES = {
    *_CREDENTIAL_CODES,
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
        if isinstance(kerr, KafkaError) and kerr.code() in _AUTH_CODES - _CREDENTIAL_CODES:
            return AccessDenied(f"{self.describe()} refused {doing}: {kerr.str()}",  # the operation's own answer
                                fix="grant it to this principal (README: 'Using cutover on your clusters', Rights)")
        if isinstance(kerr, KafkaError) and kerr.code() > 0 and not kerr.retriable() \
                and kerr.code() not in _AUTH_CODES:  # the cluster answered the request: its words, not "unreachable"
            return _answered(self, kerr, doing)
        if isinstance(kerr, KafkaError) and kerr.code() == KafkaError.UNKNOWN:  # answered, without saying why
            return CutoverError(f"{self.describe()} failed {doing} with an error it did not name "
                                "(UNKNOWN_SERVER_ERROR): it was reached and answered",
                                fix="its log says why; for Tansu 0.6.0 writing Iceberg tables, a record is refused so "
                                    "while its Iceberg catalog does not answer, or when its topic has no schema or "
                                    "the record does not fit its table's schema (a new field) (docs/limitations.md); "
                                    "then run the same command again")
        candidates = [kerr] if isinstance(kerr, KafkaError) else []
        candidates += reversed(self.errors)
        found = diagnose.explain([*(e.str() for e in candidates), *self.recent_failures()], self.properties)
        if found is not None and found.kind == "closed" and _principal(self) in _ADMITTED:
            # it served this principal before in this process: not a listener of another security protocol
            return UnreachableError(f"{self.describe()} closed the connection on the request while {doing}, after "
                                    "it had served this client: it failed to serve that request",
                                    fix="the brokers' log says why (for Tansu 0.6.0 with SQLite storage, describing "
                                        "a consumer group it holds: docs/limitations.md); then run the same command "
                                        "again")
        if found is not None and found.kind in diagnose.BEFORE_TLS:  # SASL set up wrong, DNS: said exactly
            return UnreachableError(f"could not reach {self.describe()} while {doing}: {found.what}", fix=found.fix)
        refused = next((e for e in candidates if e.code() in _CREDENTIAL_CODES), None)
        if refused is not None or (found is not None and found.kind == "denied"):
            cause = diagnose.bare(refused.str()) if refused is not None else ""
            return AccessDenied(f"{self.describe()} refused the credentials of {diagnose.who(self.properties)} "
                                f"while {doing}{': ' + cause if cause else ''}",
                                fix=diagnose.denied_fix(self.properties))
        auth = next((e for e in candidates if e.code() in _AUTH_CODES), None)
        if auth is not None:
            return AccessDenied(f"{self.describe()} refused {doing}: {auth.str()}",
                                fix="check the credentials and ACLs of this principal in the plan")
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


    def recent_failures(self) -> list[str]:
        """librdkafka's FAIL lines (and the listener probe's) of the last moments, newest first: a line from an
        earlier hiccup of a long run says nothing now."""
        recent = time.monotonic() - _RECENT
        return [t for at, t in reversed(self.failures) if at >= recent]

    def lines(self, exc: BaseException | None = None) -> list[str]:
        """What the cluster's clients have said so far (and `exc`, a failed call's own error), for `diagnose`."""
        own = [exc.args[0].str()] if isinstance(exc, KafkaException) and exc.args and \
            isinstance(exc.args[0], KafkaError) else []
        return [*own, *(e.str() for e in self.errors), *self.recent_failures()]

    def heard(self, line: str) -> None:
        """Keep a line that says why a connection failed (a FAIL line, or what the listener probe found)."""
        self.failures = [*self.failures, (time.monotonic(), line)][-10:]


#: A cluster's refusal of a request, by its error code: the plan key or the step that would change the answer.
_ANSWER_FIXES = {
    KafkaError.INVALID_REPLICATION_FACTOR: (UsageError, "set mirror.replication_factor in the plan to at most the "
                                            "cluster's number of brokers"),
    KafkaError.POLICY_VIOLATION: (CutoverError, "the cluster's create-topic or alter-config policy refused it: ask "
                                  "its operators, or create the topic there by hand as the policy allows"),
    KafkaError.INVALID_CONFIG: (CutoverError, "the cluster refuses that topic config (another Kafka version or "
                                "platform): set it on the target by hand, or drop it on the source"),
}


def _answered(ref: ClusterRef, kerr: KafkaError, doing: str) -> CutoverError:
    """The cluster answered and refused: its own words, named as its answer, with what would change it."""
    kind, fix = _ANSWER_FIXES.get(kerr.code(), (CutoverError, "the cluster's words above say what it refused; "
                                               "change that, then run the same command again"))
    return kind(f"{ref.describe()} refused {doing}: {kerr.str()} ({kerr.name()})", fix=fix)


class _ClientLog:
    """The `logger` of a cluster's clients: keeps its FAIL lines for `failure`, passes every line on to
    `client_log` (shown with --debug only)."""

    def __init__(self, ref: ClusterRef) -> None:
        self.ref = ref

    def log(self, level: int, msg: str, *args: Any) -> None:
        text = msg % args if args else msg
        if text.startswith("FAIL "):
            self.ref.heard(text)
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
    """The cluster's metadata, asked in growing slices so that a failure librdkafka already knows cannot be
    waited out (refused credentials, a TLS client at a plaintext listener, SASL at a plaintext one, a wrong
    mechanism, a name that does not resolve, a port that is not Kafka, a controller's listener): it is named
    at once, not after `timeout`. A listener that stays silent is asked once what it is (`listener.identify`:
    an HTTP server says so at once). Anything else (refused, no answer) is asked again until `timeout`."""
    from cutover.kafka import diagnose

    started = time.monotonic()
    deadline = started + timeout
    bootstrap = ref.properties.get("bootstrap.servers", "")
    probed = False
    wait = _FIRST_SLICE
    while True:
        ask = max(0.05, min(wait, deadline - time.monotonic()))
        wait = min(2 * wait, _LONGEST_SLICE)
        try:
            found = client.list_topics(topic, timeout=ask) if topic is not None else client.list_topics(timeout=ask)
            _REACHED.add(bootstrap)
            _ADMITTED.add(_principal(ref))
            return found
        except KafkaException as exc:
            client.poll(0)  # serve the error callbacks that say why
            lines = ref.lines(exc)
            if not probed and _worth_probing(lines, ref, time.monotonic() - started):
                probed = True
                _probe(ref, deadline)
                lines = ref.lines(exc)
            if time.monotonic() >= deadline or _decisive(ref, lines) or (
                    bootstrap not in _REACHED and time.monotonic() - started >= REFUSED_GRACE
                    and diagnose.all_refused(ref.lines(), ref.properties)):  # the call's own "transport failure" aside
                # The handshake probe within what is left of the wait (at least half a second, enough for a
                # listener's answer to a TLS hello): `--timeout 2` is not 2 s plus another 2 s of probing.
                probe = min(2.0, max(0.5, deadline - time.monotonic()))
                raise ref.failure(exc, doing, client, probe=probe) from None


def result(ref: ClusterRef, client: Any, future: concurrent.futures.Future[Any], timeout: float, doing: str) -> Any:
    """`future.result(timeout)` for a future of `client`'s, waited for in growing slices that serve the client's
    callbacks between them: when librdkafka already knows the cluster cannot be used as configured (refused
    credentials, see `metadata`), the wait ends at once with that named (the `ref.failure` of `doing`), where
    the future itself would only fail when its request times out. Otherwise as `future.result`: its own
    exception, or concurrent.futures.TimeoutError after `timeout`."""

    deadline = time.monotonic() + timeout
    wait = _FIRST_SLICE
    while True:
        try:
            return future.result(timeout=max(0.0, min(wait, deadline - time.monotonic())))
        except concurrent.futures.TimeoutError as exc:
            if time.monotonic() >= deadline:
                raise
            client.poll(0)
            if not future.done() and _decisive(ref, ref.lines()):
                raise ref.failure(exc, doing, client) from None
        wait = min(2 * wait, _LONGEST_SLICE)


def _decisive(ref: ClusterRef, lines: list[str]) -> bool:
    """Whether the lines end a wait at once (`diagnose.decisive`), but refused credentials or a TLS handshake
    closed at a cluster that let this principal in before in this process, with the same settings: that is a
    broker restarting (a KRaft broker refuses SCRAM credentials until it has read its metadata; one starting
    or stopping closes TLS handshakes, which librdkafka takes for a plaintext listener), named only if it lasts
    the whole wait."""
    from cutover.kafka import diagnose

    if not diagnose.decisive(lines, ref.properties):
        return False
    found = diagnose.explain(lines, ref.properties)
    restarting = (found is not None and found.kind == "denied") or any("SSL handshake failed" in t for t in lines)
    return not (restarting and _principal(ref) in _ADMITTED)


def _principal(ref: ClusterRef) -> tuple[str, str]:
    """Who a client is at which cluster, and over what (a TLS client at a cluster let in over PLAINTEXT is
    another client: its handshake's failure is the answer)."""
    from cutover.kafka import diagnose

    protocol = ref.properties.get("security.protocol", "PLAINTEXT").upper()
    return ref.properties.get("bootstrap.servers", ""), f"{diagnose.who(ref.properties)} over {protocol}"


def _worth_probing(lines: list[str], ref: ClusterRef, waited: float) -> bool:
    """Whether to ask the listener of a cluster never reached what it is: it says it is no broker's (a
    controller's answer), or it has been silent for PROBE_AFTER seconds with no line saying why."""
    from cutover.kafka import diagnose

    if reached(ref):  # it answered as a Kafka cluster before: a silence now is a broker's, not another server's
        return False
    found = diagnose.explain(lines, ref.properties)
    if found is not None and found.kind == "controller":
        return True
    return waited >= PROBE_AFTER and (found is None or found.kind == "silent")


def _probe(ref: ClusterRef, deadline: float) -> None:
    """Ask the first bootstrap server what it is; keep what it says among the cluster's failure lines."""
    from cutover.kafka import listener

    line = listener.identify(ref.properties, timeout=min(PROBE_WAIT, max(0.1, deadline - time.monotonic())))
    if line is not None:
        ref.heard(line)


def _bad_property(ref: ClusterRef, exc: KafkaException) -> UsageError:
    from cutover.kafka import tls

    tls.check_files(ref.name, ref.properties)  # a TLS file that cannot be used, named with its path
    said = refusal(exc)
    fix = f"add sasl.username and sasl.password to clusters.{ref.name} (the password as ${{VARIABLE}})" \
        if said.startswith("sasl.username and sasl.password must be set") else \
        "fix or remove the property in the plan (see librdkafka's CONFIGURATION.md)"
    return UsageError(f"clusters.{ref.name}: the client properties are not accepted: {said}", fix=fix)


def refusal(exc: KafkaException) -> str:
    """What librdkafka said when it refused to make a client, without the error's repr around it."""
    err = exc.args[0] if exc.args else None
    text = err.str() if isinstance(err, KafkaError) else str(err if err is not None else exc)
    return re.sub(r"^Failed to create \w+( client)?: ", "", text)
