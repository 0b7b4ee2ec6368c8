"""Dead letters always fit (a head, the size and a sha256 of the value, never the whole value
beyond 4 KiB as written, JSON escapes included: at most 8,192 bytes in all), values over 1 MiB
are refused before parsing, and a record's ``observed_at`` may be at most the skew bound ahead
of its Kafka timestamp (docs/contracts.md, "Limits")."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from streams.core.timefmt import parse_time
from streams.wire.contracts import DEAD_LETTER_MAX_BYTES, DeadLetter, dead_letter
from streams.wire.decoding import (MAX_VALUE_BYTES, DecodeError, check_skew, decode_input)

AT = "2026-11-02T09:00:00.000000Z"


def letter(value: bytes, key: bytes | None = b"ns/g", error: str = "bad") -> dict:
    out = dead_letter(AT, "gang-events", 3, 17, key, value, error)
    DeadLetter.model_validate(out)  # the contract's own model accepts it
    return out


def test_a_short_value_is_kept_whole_with_its_size_and_digest():
    d = letter(b'{"schema": "nope"}')
    assert d["value"] == '{"schema": "nope"}' and d["value_encoding"] == "utf-8"
    assert d["value_size"] == 18 and not d["value_truncated"]
    assert d["value_sha256"] == hashlib.sha256(b'{"schema": "nope"}').hexdigest()


def test_a_6_mib_value_gives_a_dead_letter_of_a_few_kib():
    value = b"x" * (6 * 1024 * 1024)
    d = letter(value, key=b"k" * 5000, error="e" * 10_000)
    assert d["value"] == "x" * 4096 and d["value_truncated"]
    assert d["value_size"] == 6_291_456
    assert d["value_sha256"] == hashlib.sha256(value).hexdigest()
    assert d["key"] == "k" * 1024 and d["error"] == "e" * 2045 + "…"  # 2,048 bytes
    assert len(json.dumps(d).encode()) < 8 * 1024


def test_the_head_is_cut_before_a_character_the_bound_splits():
    value = b"a" * 4095 + "é".encode() + b"b" * 10  # é = 2 bytes at 4095..4096
    d = letter(value)
    assert d["value"] == "a" * 4095 and d["value_encoding"] == "utf-8"
    assert d["value_truncated"] and d["value_size"] == 4107


def test_a_value_that_is_not_utf8_is_base64_of_its_head():
    value = b"\xff\xfe" * 3000
    d = letter(value)
    assert d["value_encoding"] == "base64" and d["value_truncated"]
    assert base64.b64decode(d["value"]) == value[:3072] and len(d["value"]) == 4096


def test_a_value_over_1_mib_is_refused_before_parsing():
    tick = b'{"schema":"gangstate.tick/v1","observed_at":"%s","pad":"' % AT.encode()
    fits = tick + b"x" * (MAX_VALUE_BYTES - len(tick) - 2) + b'"}'
    assert len(fits) == MAX_VALUE_BYTES == 1_048_576
    assert decode_input(fits).record is not None
    over = tick + b"x" * (MAX_VALUE_BYTES - len(tick) - 1) + b'"}'
    with pytest.raises(DecodeError, match="value of 1048577 bytes is over the 1048576-byte "
                                          "bound"):
        decode_input(over)


def test_observed_at_more_than_the_bound_ahead_of_the_kafka_timestamp_is_refused():
    tick = b'{"schema":"gangstate.tick/v1","observed_at":"2099-01-01T00:00:00.000000Z"}'
    kafka = parse_time("2026-12-01T07:00:00Z")  # 1796108400 s; 2099-01-01 is 4070908800 s
    with pytest.raises(DecodeError, match=r"observed_at 2099-01-01T00:00:00.000000Z is "
                                          r"2274800400 s ahead of its Kafka timestamp "
                                          r"2026-12-01T07:00:00.000000Z \(at most 60 s"):
        decode_input(tick, reference=kafka)
    assert decode_input(tick).record is not None  # no Kafka timestamp: a trace line


def test_the_skew_bound_is_inclusive_and_the_past_is_never_refused():
    kafka = parse_time("2026-12-01T07:00:00Z")
    check_skew(kafka + 60_000_000, kafka, 60_000_000)
    check_skew(kafka - 86_400_000_000 * 365, kafka, 60_000_000)  # a replay of last year
    check_skew(kafka + 10**12, None, 60_000_000)  # no timestamp
    with pytest.raises(DecodeError):
        check_skew(kafka + 60_000_001, kafka, 60_000_000)


def test_a_null_value_is_an_invalid_record_with_its_reason_not_a_type_error():
    # a Kafka tombstone (value None) on gang-events: before, len(None) raised TypeError and the
    # worker dead-lettered it as "internal error: TypeError" with a traceback in its log
    with pytest.raises(DecodeError, match=r"^invalid record: null value \(tombstone\)$"):
        decode_input(None)
    with pytest.raises(DecodeError, match=r"^invalid record: null value \(tombstone\)$"):
        decode_input(None, reference=parse_time(AT))
    d = letter(None, error="invalid record: null value (tombstone)")
    assert d["value"] == "" and d["value_size"] == 0 and not d["value_truncated"]
    assert d["value_sha256"] == hashlib.sha256(b"").hexdigest()


WORST = [  # raw values whose every byte takes the most room once JSON-escaped
    pytest.param(b"\x01" * 10_000, id="control-chars"),  # \u0001: 6 bytes each
    pytest.param(b'"' * 10_000, id="quotes"),  # \": 2 bytes each
    pytest.param(b"\\" * 10_000, id="backslashes"),
    pytest.param("\U0001F600".encode() * 3000, id="4-byte-utf8"),
    pytest.param(b"\xff" * 10_000, id="not-utf8"),  # base64; as a key, U+FFFD: 3 bytes each
    pytest.param(b"\x1f\\\"\n\x00" * 3000, id="mixed"),
]


@pytest.mark.parametrize("value", WORST)
def test_the_bound_holds_after_json_escaping(value):
    # before: the head was cut at 4,096 raw bytes, then escaped: 4,096 bytes of \x01 became
    # 24,576 bytes of \u0001, and a dead letter reached 24,992 B against the documented ~8 KiB
    from pydantic_core import to_json

    from streams.worker.app import _json

    d = dead_letter(AT, "t" * 249, 2**31 - 1, 2**63 - 1, value[:5000], value,
                    value.decode("utf-8", "replace") * 2)
    DeadLetter.model_validate(d)
    written = _json(d)  # the bytes the worker sends
    assert written == to_json(d)
    assert len(written) <= DEAD_LETTER_MAX_BYTES == 8192
    assert len(json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()) == len(written)
    for name, bound in (("value", 4096), ("key", 1024), ("error", 2048)):
        inner = json.dumps(d[name], ensure_ascii=False).encode()[1:-1]
        assert len(inner) <= bound, name
        assert len(inner) > bound - 8, name  # cut at the bound, not far below it
    assert d["value_truncated"] and d["value_size"] == len(value)
    if d["value_encoding"] == "utf-8":
        assert value.startswith(d["value"].encode())
    else:
        assert value.startswith(base64.b64decode(d["value"]))


def test_a_head_of_control_characters_holds_682_of_them():
    d = letter(b"\x01" * 5000)
    assert d["value"] == "\x01" * 682  # 682 x 6 = 4,092 bytes; one more would be 4,098
    assert d["value_truncated"] and d["value_size"] == 5000
    assert letter(b'a\tb"c\\')["value"] == 'a\tb"c\\'  # a short value stays whole


def test_the_bound_holds_with_the_longest_cluster():
    """A key naming a cluster of 63 characters adds ``"cluster":"<63>"`` (77 bytes) to the
    worst dead letter: 7,843 bytes at most, still under 8,192."""
    from streams.worker.app import _json

    value = b"\x01" * 10_000
    key = b"c" * 63 + b":" + value[:5000]
    d = dead_letter(AT, "t" * 249, 2**31 - 1, 2**63 - 1, key, value, "\x01" * 5000)
    DeadLetter.model_validate(d)
    assert d["cluster"] == "c" * 63
    assert len(_json(d)) <= DEAD_LETTER_MAX_BYTES
