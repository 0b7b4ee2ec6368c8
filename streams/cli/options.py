"""Values of the flags the commands share: ``--at`` times and seconds.

Where it sits: the CLI, below its command modules. Must not: start anything.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from streams.wire.contracts import parse_time


def _now_micros() -> int:
    return parse_time(datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def _at(text: str | None) -> int:
    """``--at``: RFC 3339 (or ``now``/unset) -> microseconds. A bad value ends the command
    with exit status 2 and a one-line message, like any other usage error."""
    if text is None or text == "now":
        return _now_micros()
    try:
        return parse_time(text)
    except ValueError:
        print(f"gangstate: --at: not an RFC 3339 time (e.g. 2026-11-02T09:00:00Z): {text!r}",
              file=sys.stderr)
        raise SystemExit(2) from None


def _seconds(text: str) -> float:
    """argparse type: a finite, non-negative number of seconds."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value
