"""The checkpoint block hashes read from one node's chain, and the reorganisations they show:
what ``ledger_blockchain_reorgs_total`` counts.

Each cycle the node is asked for its block at the chain's checkpoint
(:mod:`exporter.model.network`); its hash is remembered by height, for the last
:data:`HASHES_PER_CHAIN` heights read. A later answer for a remembered height with another
hash is a reorganisation (the node's history was rewritten), counted once: the new hash
replaces the old, and the heights above it are forgotten (a rewritten block replaces the
history after it, so one rewrite is not counted again at every height above it).

A checkpoint that stays put (a stalled chain) is read every cycle anyway; one that moves
leaves its heights behind, so every :data:`RECHECK_EVERY` cycles one remembered height other
than the checkpoint is asked again with it, in turn: at most one extra block request per
node and chain every RECHECK_EVERY cycles.
"""

from __future__ import annotations

#: Checkpoint heights whose hash is remembered per node and chain (each a height and a hash:
#: well under a kilobyte a chain).
HASHES_PER_CHAIN = 8
#: One remembered height is read again every this many cycles (per node and chain).
RECHECK_EVERY = 4


class BlockHashes:
    """One node's chain: the remembered checkpoint hashes by height, and the reorganisations
    found so far (since the exporter started: a counter)."""

    __slots__ = ("_cycles", "_hashes", "reorgs")

    def __init__(self) -> None:
        self._hashes: dict[int, str] = {}
        self._cycles = 0  # cycles planned (for the recheck's turn)
        self.reorgs = 0

    def note(self, height: int, block_hash: str) -> None:
        """The node answered ``block_hash`` for ``height``: count a reorganisation when it had
        answered another, and remember it."""
        known = self._hashes.get(height)
        if known is not None and known != block_hash:
            self.reorgs += 1
            self._hashes = {h: kept for h, kept in self._hashes.items() if h < height}
        self._hashes[height] = block_hash
        if len(self._hashes) > HASHES_PER_CHAIN:
            del self._hashes[min(self._hashes)]

    def recheck(self, checkpoint: int) -> int | None:
        """The remembered height to ask again beside this cycle's ``checkpoint`` (one cycle
        in RECHECK_EVERY, each such height in turn); None in the other cycles or when none
        is remembered but the checkpoint."""
        self._cycles += 1
        if self._cycles % RECHECK_EVERY:
            return None
        others = sorted(height for height in self._hashes if height != checkpoint)
        if not others:
            return None
        return others[(self._cycles // RECHECK_EVERY) % len(others)]
