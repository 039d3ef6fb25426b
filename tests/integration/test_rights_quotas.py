"""Client quotas as `rights plan -o json` and `rights apply --dry-run` show them, on the sandbox (no authorizer is
needed for quotas): each value exact, as the broker holds it, never rounded (1048576, not 1.04858e+06)."""

from __future__ import annotations

from pathlib import Path

from cutover.kafka.clients import ClusterRef
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from cutover.rights import quotas
from tests.conftest import cutover


def test_quota_values_are_shown_exactly_in_text_and_json(sandbox: Sandbox, plan: Plan, ns: str,
                                                         tmp_path: Path) -> None:
    scoped = derive(sandbox.plan_file, tmp_path / f"{ns}.yaml", merge=True, name=ns,
                    topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]}, tables=[])
    old = ClusterRef.of(plan, "old")
    entity: quotas.Entity = (("client-id", f"{ns}-client"),)
    values = {"consumer_byte_rate": 1048576.0, "producer_byte_rate": 3000000000.0, "request_percentage": 12.345678}
    quotas.alter(old, {entity: dict(values)}, 60)
    try:
        want = (f"quota of client-id '{ns}-client': consumer_byte_rate=1048576, producer_byte_rate=3000000000, "
                "request_percentage=12.345678")
        shown = cutover("rights", "plan", "--plan", str(scoped.file), "-o", "json")
        assert shown.code == 0, shown.err
        assert want in shown.json()["per_principal"]["(client-id and ip quotas)"]["create"]
        text = cutover("rights", "apply", "--plan", str(scoped.file), "--dry-run")
        assert text.code == 0 and f"  create: {want}" in text.out.splitlines(), text.out + text.err
        assert "e+" not in shown.out + text.out
    finally:
        quotas.alter(old, {entity: dict.fromkeys(values)}, 60)  # the shared sandbox keeps no quota of this test
