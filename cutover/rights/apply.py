"""`cutover rights apply`: create on the target what the diff says is missing (and, when the plan
owns the target's rights, delete what is extra). Every change is idempotent (creating an ACL
that exists is a no-op; a quota or SCRAM upsert sets the same value), and the diff is computed
afresh each run, so a run killed half-way is finished by running it again. Secrets are all
resolved before the first change: a variable that is not set changes nothing.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from cutover.common import exact, settled
from cutover.errors import UsageError
from cutover.kafka import batches
from cutover.kafka.clients import ClusterRef, admin
from cutover.rights import inventory, quotas
from cutover.rights.diff import Change, RightsDiff
from cutover.secrets import register


@dataclass
class Applied:
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"created": self.created, "deleted": self.deleted}

    def record(self, verb: str, changes: list[Change], say: Callable[[str], None], note: str = "") -> None:
        for c in changes:
            say(f"{verb} {c.describe()}{note}")
            (self.deleted if verb in ("deleted", "removed") else self.created).append(c.describe())


def passwords(changes: list[Change], env: Mapping[str, str]) -> dict[str, str]:
    """SCRAM user -> password, for every SCRAM change; every unset variable named at once."""
    wanted = {c.scram[0]: c.scram[3] for c in changes if c.scram is not None and c.scram[3]}
    unset = sorted(f"{var} (SCRAM user {user})" for user, var in wanted.items() if not env.get(var))
    if unset:
        raise UsageError(f"the password variable(s) {', '.join(unset)} are not set: nothing was changed",
                         fix="set them in the plan's env file (or the environment), then run rights apply again")
    out = {user: env[var] for user, var in wanted.items()}
    for secret in out.values():
        register(secret)
    return out


def apply(ref: ClusterRef, found: RightsDiff, env: Mapping[str, str], delete: bool, timeout: float,
          say: Callable[[str], None]) -> Applied:
    """Make the changes on the target `ref`; deletes only when `delete` (the plan owns the rights)."""
    secrets = passwords(found.create, env)
    done = Applied()
    client = admin(ref)
    creates = found.create
    deletes = found.extra if delete else []
    _acls(ref, client, [c for c in creates if c.acl], [c for c in deletes if c.acl], timeout, done, say)
    _quotas(ref, [c for c in creates if c.entity], [c for c in deletes if c.entity], timeout, done, say)
    _scram(ref, client, [c for c in creates if c.scram], [c for c in deletes if c.scram], secrets, timeout, done,
           say)
    return done


def _wait(ref: ClusterRef, client: AdminClient, futures: Mapping[Any, concurrent.futures.Future[Any]], doing: str,
          timeout: float) -> None:
    for fut in futures.values():
        try:
            fut.result(timeout=timeout + 5)
        except KafkaException as exc:
            raise inventory.failure(ref, exc, doing, "ALTER on the CLUSTER resource", client) from None
        except concurrent.futures.TimeoutError as exc:
            raise ref.failure(exc, doing, client) from None


def _acls(ref: ClusterRef, client: AdminClient, creates: list[Change], deletes: list[Change], timeout: float,
          done: Applied, say: Callable[[str], None]) -> None:
    if creates:
        bindings = [inventory.to_binding(c.acl) for c in creates if c.acl]
        for request in batches.split(bindings):  # a KRaft controller takes 10,000 ACLs a request
            _wait(ref, client, client.create_acls(request, request_timeout=timeout), "creating ACLs", timeout)
        done.record("created", creates, say)
    if deletes:
        filters = [inventory.to_filter(c.acl) for c in deletes if c.acl]
        for matching in batches.split(filters):  # each filter names one ACL
            _wait(ref, client, client.delete_acls(matching, request_timeout=timeout), "deleting ACLs", timeout)
        done.record("deleted", deletes, say)


def _value(v: float | None) -> str:
    return "(none)" if v is None else exact(v)


def _quotas(ref: ClusterRef, creates: list[Change], deletes: list[Change], timeout: float, done: Applied,
            say: Callable[[str], None]) -> None:
    changes: dict[quotas.Entity, dict[str, float | None]] = {}
    for c in [*creates, *deletes]:
        assert c.entity is not None
        changes.setdefault(c.entity, {}).update(dict(c.quotas))
    if not changes:
        return
    quotas.alter(ref, changes, timeout)
    def wrong(back: dict[quotas.Entity, dict[str, float]]) -> list[str]:
        return [f"{quotas.entity_text(e)} {k}: wanted {_value(v)}, reads {_value(back.get(e, {}).get(k))}"
                for e, q in changes.items() for k, v in q.items() if back.get(e, {}).get(k) != v]

    _back, wrongly = settled(lambda: quotas.describe(ref, timeout), wrong, timeout)
    if wrongly:
        raise UsageError(f"{ref.describe()} did not keep the quotas set: {'; '.join(wrongly)}",
                         fix="check the broker's log, then run rights apply again")
    done.record("set", creates, say, " (read back equal)")
    done.record("removed", deletes, say)


def _scram(ref: ClusterRef, client: AdminClient, creates: list[Change], deletes: list[Change],
           secrets: Mapping[str, str], timeout: float, done: Applied, say: Callable[[str], None]) -> None:
    alterations: list[Any] = []
    for c in creates:
        assert c.scram is not None
        user, mechanism, iterations, _var = c.scram
        info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], iterations)
        alterations.append(UserScramCredentialUpsertion(user, info, secrets[user].encode()))
    for c in deletes:
        assert c.scram is not None
        alterations.append(UserScramCredentialDeletion(c.scram[0], ScramMechanism[c.scram[1].replace("-", "_")]))
    if not alterations:
        return
    _wait(ref, client, client.alter_user_scram_credentials(alterations, request_timeout=timeout),
          "setting SCRAM users", timeout)
    def unlisted(back: dict[str, tuple[tuple[str, int], ...]]) -> list[str]:
        return [c.describe() for c in creates if c.scram and (c.scram[1], c.scram[2]) not in back.get(c.scram[0], ())]

    _back, missing = settled(lambda: inventory.read_scram(ref, client, timeout), unlisted, timeout)
    if missing:
        raise UsageError(f"{ref.describe()} does not list {', '.join(missing)} {exact(timeout)} s after it was set",
                         fix="check the broker's log, then run rights apply again")
    done.record("created", creates, say, " (read back)")
    done.record("deleted", deletes, say)
