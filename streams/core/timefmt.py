"""Event-time formatting: RFC 3339 UTC strings <-> integer microseconds since the Unix epoch.

Where it sits: the functional core (pure; standard library only). Used by decoding (records'
``observed_at``) and by the decision rules (outputs' ``observed_at`` / ``issued_at``).
"""

from __future__ import annotations

from datetime import datetime, timezone

_SECONDS: dict[int, str] = {}
"""Formatted whole seconds (memo: outputs of one stretch of event time share their seconds)."""
_SECONDS_MAX = 4096


def format_time(micros: int) -> str:
    """Format event time as the contract's RFC 3339 UTC string with microseconds.

    ``micros`` is an integer count of microseconds since the Unix epoch; the result looks like
    ``2026-11-29T10:00:00.000000Z``.
    """
    seconds, rest = divmod(micros, 1_000_000)
    known = _SECONDS.get(seconds)
    if known is None:
        if len(_SECONDS) >= _SECONDS_MAX:
            _SECONDS.clear()
        known = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        _SECONDS[seconds] = known
    stamp: str = known
    return stamp + "." + str(1_000_000 + rest)[1:] + "Z"  # rest as 6 digits, zero-padded


def parse_time(text: str) -> int:
    """Parse an RFC 3339 timestamp into integer microseconds since the Unix epoch.

    Accepts ``Z`` or a numeric offset and 0 to 6 fractional digits. A timestamp without an
    offset is read as UTC. Raises ``ValueError`` when the text is not RFC 3339.
    """
    value = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
