"""A client for the Confluent schema-registry REST API, as every registry that speaks it serves it.

Only the calls of the published contract are used (`/subjects`, `/schemas/ids/{id}`, `/config`,
`/mode`), so the same code moves Confluent, Karapace, Redpanda and Apicurio (its `/apis/ccompat/v7`
root) registries. Failures are named: the registry (old or new), its URL without credentials,
what was asked, and the fix; each kind has its own exit code (cutover.errors).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import requests

from cutover.common import NETWORK_TIMEOUT
from cutover.errors import RegistryDenied, RegistryMisplaced, RegistryRefusal, RegistryUnreachable, UsageError

log = logging.getLogger("cutover.registry")

#: Confluent error codes that are answers, not failures.
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_COMPAT_NOT_SET = 40408
SUBJECT_MODE_NOT_SET = 40409
_ANSWERS = {SUBJECT_NOT_FOUND, VERSION_NOT_FOUND, SCHEMA_NOT_FOUND, SUBJECT_COMPAT_NOT_SET, SUBJECT_MODE_NOT_SET}
JSON_TYPES = ("application/vnd.schemaregistry.v1+json", "application/json")


@dataclass(frozen=True)
class Schema:
    """A schema as the registry holds it under an id: its text, type and references."""

    text: str
    type: str = "AVRO"
    #: (name, subject, version) of each schema it references
    references: tuple[tuple[str, str, int], ...] = ()

    @classmethod
    def of(cls, answer: Mapping[str, Any]) -> Schema:
        refs = tuple((str(r["name"]), str(r["subject"]), int(r["version"])) for r in answer.get("references") or [])
        return cls(str(answer["schema"]), str(answer.get("schemaType") or "AVRO").upper(), refs)

    def canonical(self) -> str:
        """A form two registries agree on for the same schema: JSON schemas (Avro, JSON Schema) re-serialized
        with sorted keys and no spaces; Protobuf with its whitespace collapsed. Registries re-format what they
        are given (Confluent strips whitespace, others keep it), so the texts may differ when the schemas do not."""
        if self.type in ("AVRO", "JSON"):
            try:
                body = json.dumps(json.loads(self.text), sort_keys=True, separators=(",", ":"))
            except ValueError:
                body = self.text.strip()
        else:
            body = " ".join(self.text.split())
        refs = ";".join(f"{n}={s}@{v}" for n, s, v in sorted(self.references))
        return f"{self.type}|{body}|{refs}"

    def body(self, with_references: bool = True) -> dict[str, Any]:
        """The request body that registers this schema."""
        out: dict[str, Any] = {"schema": self.text}
        if self.type != "AVRO":
            out["schemaType"] = self.type
        if with_references and self.references:
            out["references"] = [{"name": n, "subject": s, "version": v} for n, s, v in self.references]
        return out


@dataclass(frozen=True)
class Version:
    """One version of a subject: what `GET /subjects/{s}/versions/{v}` answers."""

    subject: str
    version: int
    id: int
    schema: Schema
    deleted: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "version": self.version, "id": self.id, "type": self.schema.type,
                "deleted": self.deleted}


def safe_url(url: str) -> str:
    """The URL without user:password@ (never shown anywhere)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class RegistryClient:
    """One registry, named after its cluster side, with the plan's client properties."""

    name: str
    properties: Mapping[str, str]
    timeout: float = NETWORK_TIMEOUT
    session: requests.Session = field(default_factory=requests.Session, repr=False)

    def __post_init__(self) -> None:
        url = self.properties.get("url", "")
        if not url:
            raise UsageError(f"registry.{self.name}: no url", fix=f"set registry.{self.name}.url in the plan")
        parts = urlsplit(url.split(",")[0].strip())
        self.base = safe_url(url.split(",")[0].strip()).rstrip("/")
        user_info = self.properties.get("basic.auth.user.info")
        if user_info:
            user, _, password = user_info.partition(":")
            self.session.auth = (user, password)
        elif parts.username:
            self.session.auth = (parts.username, parts.password or "")
        token = self.properties.get("bearer.auth.token")
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        ca = self.properties.get("ssl.ca.location")
        if ca:
            self.session.verify = ca
        cert, key = self.properties.get("ssl.certificate.location"), self.properties.get("ssl.key.location")
        if cert:
            self.session.cert = (cert, key) if key else cert
        self.session.headers["Accept"] = "application/vnd.schemaregistry.v1+json, application/json"

    def describe(self) -> str:
        return f"the {self.name} schema registry ({self.base})"

    def _root_fix(self) -> str:
        """Where the API's root is likely to be, on the host and port the plan gives."""
        parts = urlsplit(self.base)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        return (f"point registry.{self.name}.url at the API's root{f', not {path}' if path else ''}: {origin} for "
                f"Confluent, Karapace or Redpanda, {origin}/apis/ccompat/v7 for Apicurio")

    # -- the calls ------------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None, params: Mapping[str, str] | None = None) -> Any:
        """One request; the answer's JSON, or None for a Confluent 'not found' answer (404 with 4040x)."""
        url = self.base + path
        try:
            answer = self.session.request(method, url, json=body, params=params, timeout=self.timeout,
                                          headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}
                                          if body is not None else None)
        except requests.exceptions.SSLError as exc:
            raise RegistryUnreachable(f"{self.describe()}: TLS failed for {method} {path}: {_reason(exc)}",
                                      fix=f"check registry.{self.name}.ssl.ca.location (and the certificate and "
                                          "key for mTLS), or use http:// if the registry does not speak TLS") from None
        except requests.exceptions.RequestException as exc:
            raise RegistryUnreachable(f"{self.describe()} did not answer {method} {path} within "
                                      f"{self.timeout:.0f}s: {_reason(exc)}",
                                      fix=f"start the registry, or fix registry.{self.name}.url in the plan") from None
        data = _json(answer)
        code = data.get("error_code") if isinstance(data, dict) else None
        if answer.status_code in (401, 403):
            raise RegistryDenied(f"{self.describe()} refused {method} {path}: {answer.status_code} "
                                 f"{answer.reason}" + (f" ({data.get('message')})" if code else ""),
                                 fix=f"set registry.{self.name}.basic.auth.user.info (user:password, from the env "
                                     "file) to a user allowed to read and, for the target, write subjects, "
                                     "config and mode")
        if answer.status_code == 404 and code in _ANSWERS:
            return None
        if data is None or (answer.status_code >= 400 and code is None) or (
                answer.status_code == 404 and not (isinstance(code, int) and code > 40400)):
            # a web page, an error without the API's error code, or a 404 that is not the API's "not found"
            # (a registry's own server answers a path it does not serve with error_code 404)
            kind = answer.headers.get("Content-Type", "no content type")
            raise RegistryMisplaced(
                f"{self.describe()} is not a schema registry with the Confluent API: {method} {path} answered "
                f"{answer.status_code} {answer.reason} ({kind}" + (", not the API's JSON)" if code is None else
                                                                   f", error {code}: {data.get('message', '')})"),
                fix=self._root_fix())
        if answer.status_code >= 400:
            raise RegistryError(self, method, path, answer.status_code, int(code or 0), str(data.get("message", "")))
        return data

    def subjects(self, deleted: bool = False) -> list[str]:
        return [str(s) for s in self.call("GET", "/subjects", params={"deleted": "true"} if deleted else None)]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        got = self.call("GET", f"/subjects/{_q(subject)}/versions", params={"deleted": "true"} if deleted else None)
        return sorted(int(v) for v in got or [])

    def version(self, subject: str, version: int, deleted: bool = False) -> Version | None:
        got = self.call("GET", f"/subjects/{_q(subject)}/versions/{version}",
                        params={"deleted": "true"} if deleted else None)
        if got is None:
            return None
        return Version(subject, int(got["version"]), int(got["id"]), Schema.of(got))

    def schema(self, schema_id: int) -> Schema | None:
        got = self.call("GET", f"/schemas/ids/{schema_id}")
        return None if got is None else Schema.of(got)

    def compatibility(self, subject: str | None = None) -> str | None:
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        got = self.call("GET", path, params=None if subject is None else {"defaultToGlobal": "false"})
        if not got:
            return None
        return str(got.get("compatibilityLevel") or got.get("compatibility") or "") or None

    def set_compatibility(self, level: str, subject: str | None = None) -> None:
        self.call("PUT", "/config" if subject is None else f"/config/{_q(subject)}", {"compatibility": level})

    def mode(self, subject: str | None = None) -> str | None:
        path = "/mode" if subject is None else f"/mode/{_q(subject)}"
        try:
            got = self.call("GET", path, params=None if subject is None else {"defaultToGlobal": "false"})
        except (RegistryRefusal, RegistryMisplaced):
            return None  # a registry without modes (or per-subject modes)
        return None if not got else str(got.get("mode") or "") or None

    def set_mode(self, mode: str, subject: str | None = None, force: bool = False) -> None:
        path = "/mode" if subject is None else f"/mode/{_q(subject)}"
        self.call("PUT", path, {"mode": mode}, params={"force": "true"} if force else None)

    def register(self, subject: str, schema: Schema, schema_id: int | None = None,
                 version: int | None = None) -> int:
        body = schema.body()
        if schema_id is not None:
            body["id"] = schema_id
        if version is not None:
            body["version"] = version
        return int(self.call("POST", f"/subjects/{_q(subject)}/versions", body)["id"])

    def delete_version(self, subject: str, version: int) -> None:
        self.call("DELETE", f"/subjects/{_q(subject)}/versions/{version}")

    def probe(self) -> None:
        """Ask one read-only question, so that a wrong URL, a refusal or silence is named before any work."""
        self.subjects()


class RegistryError(RegistryRefusal):
    """The registry answered a request with a Confluent error (not a 'not found')."""

    def __init__(self, client: RegistryClient, method: str, path: str, status: int, code: int, text: str) -> None:
        self.status, self.code, self.text = status, code, text
        super().__init__(f"{client.describe()} refused {method} {path}: {status}, error {code}: {text}",
                         fix="see the registry's message; cutover changed nothing after this request")


def _q(subject: str) -> str:
    return quote(subject, safe="")


def _json(answer: requests.Response) -> Any:
    kind = answer.headers.get("Content-Type", "")
    if not any(t in kind for t in JSON_TYPES) and "json" not in kind:
        return None
    try:
        return answer.json()
    except ValueError:
        return None


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Read timed out", "timed out", "Name or service not known",
                   "CERTIFICATE_VERIFY_FAILED", "WRONG_VERSION_NUMBER", "Connection reset"):
        if marker in text:
            return {"WRONG_VERSION_NUMBER": "the registry does not speak TLS on this port"}.get(marker, marker)
    return text.splitlines()[0][:200] if text else type(exc).__name__
