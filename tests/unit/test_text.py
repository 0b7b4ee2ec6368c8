"""``streams.core.text.listing``: the lists in a sentence that the messages share."""

from __future__ import annotations

import pytest

from streams.core.text import listing


@pytest.mark.parametrize("items,shown,text", [
    ([], 3, ""),
    (["g-0"], 3, "g-0"),
    (["g-0", "g-1"], 3, "g-0 and g-1"),
    (["g-0", "g-1", "g-2"], 3, "g-0, g-1 and g-2"),
    (["g-0", "g-1", "g-2", "g-3", "g-4"], 3, "g-0, g-1, g-2 and 2 more"),
    (["g-0", "g-1"], 1, "g-0 and 1 more"),
])
def test_listing(items: list[str], shown: int, text: str) -> None:
    assert listing(items, shown) == text
