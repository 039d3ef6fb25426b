"""One exception tree for cutover.

Every error a user can cause or meet carries its exit code, a message that names the
thing and the place, and (where there is one) the fix. The CLI error boundary
(`cutover.cli.main`) is the only place that turns them into output and exit codes, so
commands raise and never print-and-exit.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes cutover promises (ARCHITECTURE.md, "Exit codes")."""

    OK = 0
    ERROR = 1
    USAGE = 2
    REFUSED = 3
    DIFFERENCES = 4
    #: A schema registry did not answer (connection refused, timeout, TLS).
    REGISTRY_UNREACHABLE = 5
    #: A schema registry refused cutover's credentials (401, 403).
    REGISTRY_DENIED = 6
    #: A cluster refused cutover's principal the rights to read or change ACLs, quotas or SCRAM users.
    RIGHTS_DENIED = 7
    #: The switch ended this process as designed: promote closed the forward mirror (its drain took
    #: over), complete or cancel retired a mirror, or the switch handed a shadow's table to the other
    #: cluster's writer. Supervisors treat it as done (the shipped units: SuccessExitStatus=8,
    #: RestartPreventExitStatus=8).
    CLOSED_BY_SWITCH = 8
    INTERRUPTED = 130


class CutoverError(Exception):
    """Base of every expected failure. Rendered without a traceback."""

    exit_code: ExitCode = ExitCode.ERROR
    #: Whether running the same command again, unchanged, may succeed.
    retryable: bool = False

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class UsageError(CutoverError):
    """The call itself is wrong: flags, arguments, or an invalid plan file."""

    exit_code = ExitCode.USAGE


class PlanError(UsageError):
    """A plan file that cannot be used. Carries every problem found, not just the first."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        head = problems[0] if len(problems) == 1 else f"{len(problems)} problems in the plan"
        super().__init__(head)

    def render(self) -> str:
        if len(self.problems) == 1:
            return f"error: {self.problems[0]}"
        lines = [f"error: {self.message}:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class DependencyMissing(CutoverError):
    """A program cutover needs (java, mvn) is missing or too old."""


class ResolveError(CutoverError):
    """Maven could not resolve a jar set."""

    retryable = True


class UnreachableError(CutoverError):
    """A cluster or catalog did not answer within the deadline."""

    retryable = True


class AccessDenied(CutoverError):
    """Authentication or authorization failed against a cluster."""


class SandboxError(CutoverError):
    """The local sandbox could not do what was asked."""


class Refused(CutoverError):
    """A precondition or gate refused to let an operation run. Not a failure of cutover."""

    exit_code = ExitCode.REFUSED


class DifferencesFound(CutoverError):
    """Verification found differences beyond a gate."""

    exit_code = ExitCode.DIFFERENCES


class RegistryUnreachable(UnreachableError):
    """A schema registry did not answer."""

    exit_code = ExitCode.REGISTRY_UNREACHABLE


class RegistryDenied(AccessDenied):
    """A schema registry refused cutover's credentials."""

    exit_code = ExitCode.REGISTRY_DENIED


class RegistryMisplaced(UsageError):
    """The plan's registry URL answers, but not as a schema registry with the Confluent API (404, a web page)."""


class RegistryRefusal(CutoverError):
    """A schema registry refused a request with an error of its API."""


class RightsDenied(AccessDenied):
    """A cluster refused cutover's principal a read or change of its ACLs, quotas or SCRAM users."""

    exit_code = ExitCode.RIGHTS_DENIED


def unexpected(exc: Exception) -> tuple[str, str]:
    """What an exception no command named says, and its fix. A confluent-kafka client error is a cluster's answer
    (or its silence), whose cause is the cluster's, not cutover's: said as such, with where to look. Anything else
    is a bug, said as one."""
    from confluent_kafka import KafkaException

    if isinstance(exc, KafkaException):
        return (f"a Kafka cluster answered: {exc}", "check the plan's clusters (cutover plan check names each one "
                "and what it answers); rerun with --debug for the step that asked, and report it if the clusters "
                "are well")
    return f"unexpected {type(exc).__name__}: {exc}", "(a bug in cutover; rerun with --debug for the traceback " \
        "and report it)"

