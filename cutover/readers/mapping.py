"""The mirror's map as a reader's move uses it: each position translated exactly, what has no
mapping collected (and refused together), and the canary's verdict on the translated positions."""

from __future__ import annotations

from typing import Any

from cutover.errors import Refused
from cutover.kafka.clients import DEFAULT_TIMEOUT
from cutover.mirror import groups
from cutover.mirror import state as st
from cutover.mirror.offsetmap import NotYetMirrored
from cutover.plan import Plan
from cutover.plan.model import Reader
from cutover.readers import canary


class CanaryRefused(Refused):
    """The canary found a partition whose next record differs: nothing written. `result` is the move as
    --dry-run shows it, so `-o json` says which partitions differ."""

    def __init__(self, message: str, *, fix: str, result: dict[str, Any]) -> None:
        super().__init__(message, fix=fix)
        self.result = result


def unselected_text(r: Reader, topics: list[str]) -> str:
    """A reader reading topics the plan does not select, in the words of `plan check` and of a move."""
    return (f"reader {r.name} reads {', '.join(topics)}, which the plan's topic selection leaves out: the mirror "
            "never copies it, so there is no map to translate through")


class Mapped:
    """translate(topic, partition, offset) -> the same record's offset on the target (-1 when unmapped)."""

    def __init__(self, plan: Plan, direction: st.Direction, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.route = st.route(plan, direction)
        self.timeout = timeout
        self._tr = groups.translator(self.route, plan, timeout)
        self._selected = plan.spec.topics.matches
        self.rows: list[dict[str, Any]] = []
        self.unmapped: list[str] = []

    def __call__(self, topic: str, partition: int, offset: int) -> int:
        try:
            target = self._tr.translate((topic, partition), offset)
        except NotYetMirrored as exc:
            self.unmapped.append(f"{topic}[{partition}] at {offset}: {exc}")
            target = -1
        self.rows.append({"topic": topic, "partition": partition, "source_offset": offset, "target_offset": target})
        return target

    def refuse_unmapped(self, r: Reader, where: str) -> None:
        """Refuse a topic outside the selection first (the mirror never copies it: waiting would not help),
        then every position the mirror has not copied yet."""
        unselected = sorted({row["topic"] for row in self.rows if not self._selected(row["topic"])})
        if unselected:
            raise Refused(unselected_text(r, unselected),
                          fix=f"select {', '.join(unselected)} in topics.include; nothing was written")
        if self.unmapped:
            raise Refused(f"reader {r.name}: {len(self.unmapped)} position(s) in {where} have no mapping yet: "
                          + "; ".join(self.unmapped[:5]) + (" ..." if len(self.unmapped) > 5 else ""),
                          fix="let the mirror copy those partitions (cutover mirror --until-caught-up), or add their "
                              "topics to the plan's selection; nothing was written")

    def canary(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One verdict per partition of the rows (next positions to read), in topic and partition order."""
        unique = {(row["topic"], row["partition"]): row for row in rows}
        return canary.checked(self.route.source, self.route.target, [unique[tp] for tp in sorted(unique)],
                              self.timeout)

    def refuse_canary(self, r: Reader, result: dict[str, Any]) -> None:
        """Refuse a move whose canary found a difference; the refusal keeps the move's result, canary included,
        for `-o json`."""
        checked: list[dict[str, Any]] = result["canary"]
        differences = [canary.describe(e, self.route.source.describe(), self.route.target.describe())
                       for e in canary.differing(checked)]
        if differences:
            raise CanaryRefused(f"reader {r.name}: the translated positions point at other records on "
                          f"{self.route.target.describe()} on {len(differences)} of {len(checked)} partition(s): "
                          + "; ".join(differences),
                          fix="the clusters and the mirror's map disagree (a topic recreated, or written outside the "
                              "mirror on the target?): check `cutover mirror status`; nothing was written",
                                result=result)


def moved_pairs(positions: list[dict[str, Any]]) -> str:
    """A move's positions in one line: topic[partition] source -> target, each."""
    return ", ".join(f"{p['topic']}[{p['partition']}] {p['source_offset']} -> {p['target_offset']}" for p in positions)


def positions_table(positions: list[dict[str, Any]]) -> str:
    """A move's positions as a table: topic, partition, the source's offset and the target's."""
    from cutover.output import table

    return table([[p["topic"], str(p["partition"]), str(p["source_offset"]), str(p["target_offset"])]
                  for p in positions], ["topic", "partition", "source", "target"])

