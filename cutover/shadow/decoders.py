"""Which decoder reads a table pair's format: a plain one (cutover.shadow.decode) or a schema-registry format's,
which reads the registry of the cluster read (cutover.shadow.framed, built on decode's)."""

from __future__ import annotations

from cutover.plan import ClusterSide, Plan, TablePair
from cutover.shadow.decode import DECODERS, Decoder


def decoder_for(plan: Plan, pair: TablePair, side: ClusterSide = "new") -> Decoder:
    """The decoder of a pair's format: a plain one, or one that reads the registry of the cluster read."""
    if pair.format in DECODERS:
        return DECODERS[pair.format]
    from cutover.shadow import framed  # its registry clients: only for a registry format

    return framed.decoder_for(plan, pair, side)
