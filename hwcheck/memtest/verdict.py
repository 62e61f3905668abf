"""The owner's line for a card whose memory test found errors: a few fixed blocks, or return it.

A public CMP 170HX test suite found the two kinds the field knows: cells that fail at the
same few places every pass (the card may serve with them; retest after reseating and
cooling), and HBM that corrupts data right after each jump from idle to full traffic,
following timing rather than location (a quarter of the 2 MiB blocks failed within a
minute), which no fix helps. The block map tells them apart: few blocks, all of them
found by the fixed patterns, is the first; many blocks, or blocks only the stress mode
finds, is the second.
"""

from __future__ import annotations

from collections.abc import Set

FEW_BLOCKS = 8  # at most this many failed blocks, all seen by the fixed patterns: "fixed"
MAX_NAMED_BLOCKS = 4


def _size(block_kib: int) -> str:
    return f"{block_kib // 1024} MiB" if block_kib % 1024 == 0 else f"{block_kib} KiB"


def judge(
    static_blocks: Set[int],
    stress_blocks: Set[int],
    zero_bursts: int,
    blocks_tested: int,
    block_kib: int,
) -> str | None:
    """The verdict line, or None when no block failed.

    ``static_blocks``: the blocks the fixed patterns found bad; ``stress_blocks``: those the
    stress mode found bad; ``zero_bursts``: 128-byte bursts that read back all zeros.
    """
    failed = static_blocks | stress_blocks
    if not failed:
        return None
    size = _size(block_kib)
    zeros = f", {zero_bursts:,} bursts read back as zeros" if zero_bursts else ""
    load_only = stress_blocks - static_blocks
    if len(failed) > FEW_BLOCKS or load_only:
        where = " (found only under the stress mode's load)" if not static_blocks else ""
        return (
            f"errors everywhere under load: {len(failed):,} of {blocks_tested:,} {size} "
            f"blocks failed{where}{zeros}: return the card"
        )
    named = ", ".join(f"#{block}" for block in sorted(failed)[:MAX_NAMED_BLOCKS])
    more = "" if len(failed) <= MAX_NAMED_BLOCKS else ", ..."
    return (
        f"a few fixed blocks: {len(failed)} of {blocks_tested:,} {size} blocks fail "
        f"({named}{more}) at the same place each pattern{zeros}; the rest is clean: keep "
        "the card out of the recipe, reseat and cool it, and retest"
    )
