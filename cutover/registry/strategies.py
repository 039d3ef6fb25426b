"""The table of id-keeping strategies (keeping.IdKeeping), in the order a target is asked: the first that
applies keeps its ids. A new strategy is its module and its entry here; `registry sync`, the switch and
`plan check` name none of them."""

from __future__ import annotations

from cutover.registry.apicurio import ApicurioImport
from cutover.registry.client import RegistryClient
from cutover.registry.import_mode import ImportMode
from cutover.registry.keeping import IdKeeping

STRATEGIES: list[IdKeeping] = [ImportMode(), ApicurioImport()]


def choose(target: RegistryClient) -> IdKeeping | None:
    """The strategy `target` keeps ids by, or None when it has none cutover knows (read-only)."""
    return next((s for s in STRATEGIES if s.applies(target)), None)


def for_sync(target: RegistryClient) -> IdKeeping:
    """The strategy a sync onto `target` uses: the one that applies, else IMPORT mode (whose first write then
    refuses, naming what the target lacks)."""
    return choose(target) or STRATEGIES[0]


def named(name: str) -> IdKeeping:
    """The strategy of a sync plan's `method`."""
    return next(s for s in STRATEGIES if s.name == name)


def unknown_problem(target: RegistryClient) -> str:
    """plan check's finding for a target that keeps ids no way cutover knows."""
    return f"{target.describe()} has no /mode (IMPORT mode): it cannot take schemas under their ids"
