"""The rights the plan's selection uses on the source cluster, translated to the target's
principal names and compared with what the target holds: what to create, what the target has
beyond it (extra), and what cannot be copied, and why. Pure: the inventories are read elsewhere.

The scope: ACLs whose pattern covers a selected topic or group (any pattern type, any
principal, the wildcard principal too), and every GROUP, TRANSACTIONAL_ID and CLUSTER ACL of
the principals those name (their consumers' groups, their producers' transactional ids and
IDEMPOTENT_WRITE). Quotas: the users of those principals and the user default, and every
client-id and ip quota (neither is tied to a principal). SCRAM users: those of the principals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from cutover.common import exact
from cutover.rights.authorizer import WILDCARD_PRINCIPAL, Acl
from cutover.rights.inventory import Inventory
from cutover.rights.quotas import Entity, Quotas, entity_text

PER_PRINCIPAL = ("GROUP", "TRANSACTIONAL_ID", "CLUSTER")
SASL = ("SASL_SSL", "SASL_PLAINTEXT")


@dataclass(frozen=True)
class Selected:
    """What the plan selects on the source cluster."""

    topics: tuple[str, ...]
    groups: tuple[str, ...]


@dataclass(frozen=True)
class Change:
    """One thing to create on the target (or, for an extra, to delete when the plan owns it)."""

    kind: Literal["acl", "quota", "scram"]
    #: the principal on the target ("" for client-id and ip quotas)
    principal: str
    acl: Acl | None = None
    entity: Entity | None = None
    #: quota key -> value (None: remove)
    quotas: tuple[tuple[str, float | None], ...] = ()
    #: SCRAM: (user, mechanism, iterations, the env-file variable of the password)
    scram: tuple[str, str, int, str] | None = None

    def describe(self) -> str:
        if self.acl is not None:
            return self.acl.describe()
        if self.scram is not None:
            user, mechanism, iterations, _var = self.scram
            return f"SCRAM user {user} ({mechanism}, {iterations} iterations)"
        assert self.entity is not None
        values = ", ".join(f"{k}={'(removed)' if v is None else exact(v)}" for k, v in self.quotas)
        return f"quota of {entity_text(self.entity)}: {values}"


@dataclass(frozen=True)
class Gap:
    """Something the source holds that cannot be copied, and why."""

    principal: str
    what: str
    why: str


@dataclass
class RightsDiff:
    source: str
    target: str
    create: list[Change] = field(default_factory=list)
    extra: list[Change] = field(default_factory=list)
    cannot: list[Gap] = field(default_factory=list)
    #: warnings that block nothing (a principal kept under its name where the two authenticate differently)
    notes: list[str] = field(default_factory=list)
    #: source principal -> target principal, for every principal in scope
    principals: dict[str, str] = field(default_factory=dict)

    def by_principal(self) -> dict[str, dict[str, list[str]]]:
        """target principal -> create / extra / cannot -> lines (what `rights plan` shows)."""
        out: dict[str, dict[str, list[str]]] = {}

        def add(principal: str, key: str, line: str) -> None:
            entry = out.setdefault(principal or "(client-id and ip quotas)", {"create": [], "extra": [], "cannot": []})
            entry[key].append(line)

        for c in self.create:
            add(c.principal, "create", c.describe())
        for c in self.extra:
            add(c.principal, "extra", c.describe())
        for g in self.cannot:
            add(g.principal, "cannot", f"{g.what}: {g.why}")
        return dict(sorted(out.items()))


def in_scope(acls: Iterable[Acl], selected: Selected, principals: Iterable[str] = ()) -> list[Acl]:
    """The ACLs of the selection (see the module's doc); `principals` adds principals in scope."""
    acls = list(acls)
    covering = {a for a in acls if (a.resource_type == "TOPIC" and any(a.covers("TOPIC", t) for t in selected.topics))
                or (a.resource_type == "GROUP" and any(a.covers("GROUP", g) for g in selected.groups))}
    who = {a.principal for a in covering} | set(principals)
    if not who:
        return []
    theirs = {a for a in acls if a.resource_type in PER_PRINCIPAL and (a.principal in who or
                                                                        a.principal == WILDCARD_PRINCIPAL)}
    return sorted(covering | theirs)


def diff(source: Inventory, target: Inventory, selected: Selected, principal_map: Mapping[str, str],
         source_props: Mapping[str, str], target_props: Mapping[str, str],
         passwords: Mapping[str, str]) -> RightsDiff:
    """What the target needs to grant what the source grants the selection, no more and no less."""
    out = RightsDiff(source.side, target.side)

    def rename(principal: str) -> str:
        return principal_map.get(principal, principal)

    scope = in_scope(source.acls, selected)
    wanted = {dataclasses.replace(a, principal=rename(a.principal)) for a in scope}
    out.principals = {p: rename(p) for p in sorted({a.principal for a in scope})}
    there = set(target.acls)
    target_scope = set(in_scope(target.acls, selected, out.principals.values()))
    out.create += [Change("acl", a.principal, acl=a) for a in sorted(wanted - there)]
    out.extra += [Change("acl", a.principal, acl=a) for a in sorted(target_scope - wanted)]
    _principal_checks(out, target, source_props, target_props, principal_map)
    _quotas(out, source.quotas, target.quotas, out.principals)
    _scram(out, source, target, passwords)
    return out


def _principal_checks(out: RightsDiff, target: Inventory, source_props: Mapping[str, str],
                      target_props: Mapping[str, str], principal_map: Mapping[str, str]) -> None:
    rules = target.settings.get("ssl.principal.mapping.rules") or "DEFAULT"
    source_auth = _auth(source_props)
    target_auth = _auth(target_props)
    for old, new in out.principals.items():
        if old == WILDCARD_PRINCIPAL or old in principal_map:
            continue
        if old.startswith("User:CN=") and rules != "DEFAULT" and target_auth == "certificates":
            out.cannot.append(Gap(new, f"the rights of {old}",
                                  f"the {target.side} cluster derives certificate principals with rules {rules}, "
                                  "which turn a distinguished name into a short name: map it in rights.principals"))
        elif source_auth != target_auth:
            out.notes.append(f"{old} keeps its name on the {target.side} cluster, which authenticates clients by "
                             f"{target_auth} where the {out.source} cluster uses {source_auth}: check that its "
                             f"clients authenticate as {old} there (ssl.principal.mapping.rules: {rules}), or map it "
                             "in rights.principals")


def _auth(props: Mapping[str, str]) -> str:
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol in SASL:
        return f"SASL ({props.get('sasl.mechanism') or props.get('sasl.mechanisms') or 'GSSAPI'})"
    if protocol == "SSL" and ("ssl.certificate.location" in props or "ssl.keystore.location" in props
                              or "ssl.certificate.pem" in props):
        return "certificates"
    return "no authentication"


def _users(principals: Mapping[str, str]) -> dict[str | None, str | None]:
    """Quota user names in scope: source user -> target user; the default (None) to itself."""
    users: dict[str | None, str | None] = {None: None}
    for old, new in principals.items():
        if old.startswith("User:") and new.startswith("User:") and old != WILDCARD_PRINCIPAL:
            users[old[5:]] = new[5:]
    return users


def _quota_principal(entity: Entity) -> str:
    user = dict(entity).get("user", "")
    return "" if user == "" else f"User:{user}" if user is not None else "(user default)"


def _quotas(out: RightsDiff, source: Quotas, target: Quotas, principals: Mapping[str, str]) -> None:
    users = _users(principals)

    def in_scope_source(entity: Entity) -> bool:
        parts = dict(entity)
        return "user" not in parts or parts["user"] in users

    def translate(entity: Entity) -> Entity:
        return tuple((t, users[n] if t == "user" else n) for t, n in entity)

    wanted = {translate(e): q for e, q in source.items() if in_scope_source(e)}
    target_users = set(users.values())
    target_scope = {e: q for e, q in target.items() if "user" not in dict(e) or dict(e)["user"] in target_users}
    for entity, quotas in sorted(wanted.items(), key=lambda kv: str(kv[0])):
        have = target.get(entity, {})
        changes = tuple((k, v) for k, v in sorted(quotas.items()) if have.get(k) != v)
        if changes:
            out.create.append(Change("quota", _quota_principal(entity), entity=entity, quotas=changes))
    for entity, quotas in sorted(target_scope.items(), key=lambda kv: str(kv[0])):
        beyond = tuple((k, None) for k in sorted(quotas) if k not in wanted.get(entity, {}))
        if beyond:
            out.extra.append(Change("quota", _quota_principal(entity), entity=entity, quotas=beyond))


def _scram(out: RightsDiff, source: Inventory, target: Inventory, passwords: Mapping[str, str]) -> None:
    for old, new in out.principals.items():
        if not old.startswith("User:") or old == WILDCARD_PRINCIPAL:
            continue
        user = old[5:]
        if user not in source.scram:
            continue
        if new != old:
            out.notes.append(f"SCRAM user {user} is not copied: {old} is {new} on the {target.side} cluster, which "
                             "authenticates it its own way (rights.principals)")
            continue
        have = set(target.scram.get(user, ()))
        for mechanism, iterations in source.scram[user]:
            if (mechanism, iterations) in have:
                continue
            variable = passwords.get(user)
            if variable is None:
                out.cannot.append(Gap(new, f"SCRAM user {user} ({mechanism}, {iterations} iterations)",
                                      "a SCRAM password is never readable (DescribeUserScramCredentials gives only "
                                      f"the mechanism and iterations): set rights.scram_passwords.{user} to the name "
                                      "of an env-file variable holding it"))
            else:
                out.create.append(Change("scram", new, scram=(user, mechanism, iterations, variable)))
        for mechanism, iterations in sorted(have - set(source.scram[user])):
            out.extra.append(Change("scram", new, scram=(user, mechanism, iterations, "")))
