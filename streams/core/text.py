"""Words for people, shared by the messages of the core (pure, standard library only).

Where it sits: the bottom of the core, beside ``timefmt``; the rule families' messages and the
failure episode's use it. Must not: read the clock or do I/O.
"""

from __future__ import annotations

from typing import Sequence


def listing(items: Sequence[str], shown: int) -> str:
    """``items`` as a list in a sentence, at most ``shown`` of them named (``shown`` >= 1):
    ``a``, ``a and b``, ``a, b and c``, or ``a, b, c and 2 more``; ``""`` for no item."""
    named = list(items[:shown])
    more = len(items) - len(named)
    if more > 0:
        return f"{', '.join(named)} and {more} more"
    if len(named) > 1:
        return f"{', '.join(named[:-1])} and {named[-1]}"
    return named[0] if named else ""
