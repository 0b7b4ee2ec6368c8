"""Bounds on numbers in input records (docs/contracts.md, "Limits"): a cycle number or an ack
epoch beyond int64, and a resourceVersion that no etcd-backed API server can write (a decimal
beyond int64, or longer than 64 characters), are rejected with the reason, by the decode views
and by the contract models alike."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from streams.wire.contracts import INPUT_ADAPTER
from streams.wire.decoding import DecodeError, decode_input

AT = "2026-11-02T09:00:00.000000Z"


def pod(rv: str) -> bytes:
    return json.dumps({
        "schema": "gangstate.kube/v1", "observed_at": AT, "resource": "pods", "type": "ADDED",
        "object": {"metadata": {
            "name": "g-0", "namespace": "ns", "uid": "u-0", "resourceVersion": rv,
            "annotations": {"gang.scheduling.koordinator.sh/name": "g",
                            "gang.scheduling.koordinator.sh/min-available": "2"}}},
    }).encode()


def cycle(number: int) -> bytes:
    return json.dumps({
        "schema": "gangstate.cycle/v1", "observed_at": AT, "cycle": number,
        "pod": {"namespace": "ns", "name": "g-0", "uid": "u-0"}, "gang": "ns/g",
        "stage": "Permit", "status": "Wait"}).encode()


def ack(epoch: int) -> bytes:
    return json.dumps({
        "schema": "gangstate.ack/v1", "observed_at": AT, "command_id": f"ns/g#{epoch}",
        "gang_group": "ns/g", "epoch": epoch, "outcome": "Applied"}).encode()


INT64_MAX = 9_223_372_036_854_775_807  # etcd's revision is an int64


@pytest.mark.parametrize("raw,reason", [
    pytest.param(cycle(2**80), "cycle: Input should be less than or equal to "
                               "9223372036854775807", id="cycle-2**80"),
    pytest.param(cycle(INT64_MAX + 1), "cycle: Input should be less than or equal to",
                 id="cycle-int64+1"),
    pytest.param(ack(2**80), "epoch: Input should be less than or equal to", id="epoch-2**80"),
    pytest.param(pod("9" * 400), "resourceVersion", id="rv-400-digits"),
    pytest.param(pod(str(INT64_MAX + 1)), "resourceVersion: Value error, a decimal "
                 "resourceVersion is an etcd revision (int64): at most 9223372036854775807",
                 id="rv-int64+1"),
    pytest.param(pod("x" * 65), "resourceVersion: String should have at most 64 characters",
                 id="rv-65-chars"),
])
def test_out_of_bounds_numbers_are_rejected_with_the_reason(raw, reason):
    with pytest.raises(DecodeError) as err:
        decode_input(raw)
    assert reason in str(err.value)
    with pytest.raises(ValidationError):  # the contract models say the same
        INPUT_ADAPTER.validate_json(raw)


@pytest.mark.parametrize("raw", [
    pytest.param(cycle(INT64_MAX), id="cycle-int64"),
    pytest.param(ack(INT64_MAX), id="epoch-int64"),
    pytest.param(pod(str(INT64_MAX)), id="rv-int64"),
    pytest.param(pod("x" * 64), id="rv-64-chars"),
])
def test_numbers_at_the_bounds_are_accepted(raw):
    assert decode_input(raw).record is not None
    INPUT_ADAPTER.validate_json(raw)
