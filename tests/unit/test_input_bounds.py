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
from tests.fixtures.builders import kube_pod, pod_line

AT = "2026-11-02T09:00:00.000000Z"


def pod(rv: str) -> bytes:
    return json.dumps(pod_line(kube_pod("g-0", uid="u-0", rv=rv, gang="g", min_available=2),
                               AT)).encode()


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


# -- names (docs/contracts.md, "Limits"): Kubernetes' own bounds, k8s.io/apimachinery v0.35.2
# DNS1123SubdomainMaxLength = 253 (object names), DNS1123LabelMaxLength = 63 (namespaces),
# LabelValueMaxLength = 63 (label values)

def named(name: str = "g-0", namespace: str = "ns", *, gang: str = "g",
          labels: dict | None = None, resource: str = "pods") -> bytes:
    meta = {"name": name, "namespace": namespace, "uid": "u-0", "resourceVersion": "1"}
    if resource == "pods":
        meta["annotations"] = {"gang.scheduling.koordinator.sh/name": gang,
                               "gang.scheduling.koordinator.sh/min-available": "2"}
        if labels:
            meta["labels"] = labels
    return json.dumps({"schema": "gangstate.kube/v1", "observed_at": AT, "resource": resource,
                       "type": "ADDED", "object": {"metadata": meta, "spec": {"minMember": 2}
                                                   if resource == "podgroups" else {}}}).encode()


def cycle_of(pod_name: str = "g-0", namespace: str = "ns", gang: str = "ns/g",
             culprit: str | None = None) -> bytes:
    rec = {"schema": "gangstate.cycle/v1", "observed_at": AT, "cycle": 7,
           "pod": {"namespace": namespace, "name": pod_name, "uid": "u-0"}, "gang": gang,
           "stage": "Filter", "status": "Unschedulable"}
    if culprit is not None:
        rec["culprit"] = culprit
    return json.dumps(rec).encode()


SUBDOMAIN = "(DNS-1123 subdomain, k8s.io/apimachinery DNS1123SubdomainMaxLength"
LABEL = "(DNS-1123 label, k8s.io/apimachinery DNS1123LabelMaxLength)"


@pytest.mark.parametrize("raw,reason", [
    pytest.param(named("p" * 2048), "object.metadata.name: Value error, 2048 characters; a "
                 "Kubernetes object name has at most 253 " + SUBDOMAIN, id="pod-name-2KiB"),
    pytest.param(named("p" * 254), "object.metadata.name: Value error, 254 characters; a "
                 "Kubernetes object name has at most 253", id="pod-name-254"),
    pytest.param(named(namespace="n" * 64), "object.metadata.namespace: Value error, 64 "
                 "characters; a namespace name has at most 63 " + LABEL, id="namespace-64"),
    pytest.param(named("q" * 254, resource="podgroups"), "object.metadata.name: Value error, "
                 "254 characters; a Kubernetes object name has at most 253",
                 id="podgroup-name-254"),
    pytest.param(named(gang="g" * 254), "invalid record: object.metadata.annotations."
                 "gang.scheduling.koordinator.sh/name: 254 characters; a gang name has at most "
                 "253 " + SUBDOMAIN + ", as a PodGroup's)", id="gang-annotation-254"),
    pytest.param(named(labels={"pod-group.scheduling.sigs.k8s.io": "l" * 64}),
                 "invalid record: object.metadata.labels.pod-group.scheduling.sigs.k8s.io: 64 "
                 "characters; a label value has at most 63 (k8s.io/apimachinery "
                 "LabelValueMaxLength)", id="gang-label-64"),
    pytest.param(cycle_of("p" * 254), "pod.name: Value error, 254 characters; a Pod name has "
                 "at most 253", id="cycle-pod-254"),
    pytest.param(cycle_of(namespace="n" * 64), "pod.namespace: Value error, 64 characters",
                 id="cycle-namespace-64"),
    pytest.param(cycle_of(gang="ns/" + "g" * 254), "gang: Value error, 254 characters; a gang "
                 "or pod name has at most 253", id="cycle-gang-254"),
    pytest.param(cycle_of(gang="n" * 64 + "/g"), "gang: Value error, 64 characters; a "
                 "namespace name has at most 63", id="cycle-gang-namespace-64"),
    pytest.param(cycle_of(culprit="ns/" + "c" * 300), "culprit: Value error, 300 characters",
                 id="culprit-300"),
])
def test_names_longer_than_kubernetes_allows_are_refused_naming_field_length_and_limit(
        raw, reason):
    # before: a 2 KiB pod name (or gang, or namespace) was accepted and folded
    with pytest.raises(DecodeError) as err:
        decode_input(raw)
    assert reason in str(err.value)
    if "Value error" in reason:  # the models' own check (the gang labels are the decoder's)
        with pytest.raises(ValidationError):
            INPUT_ADAPTER.validate_json(raw)


@pytest.mark.parametrize("raw", [
    pytest.param(named("p" * 253, "n" * 63), id="pod-253-namespace-63"),
    pytest.param(named(gang="g" * 253), id="gang-annotation-253"),
    pytest.param(named(labels={"pod-group.scheduling.sigs.k8s.io": "l" * 63},
                       gang="g" * 300), id="gang-label-63-annotation-ignored"),
    pytest.param(named("q" * 253, resource="podgroups"), id="podgroup-253"),
    pytest.param(cycle_of("p" * 253, "n" * 63, "n" * 63 + "/" + "g" * 253,
                          "n" * 63 + "/" + "c" * 253), id="cycle-at-the-bounds"),
])
def test_names_at_the_kubernetes_bounds_are_accepted(raw):
    decoded = decode_input(raw)
    assert decoded.record is not None and decoded.key is not None
    INPUT_ADAPTER.validate_json(raw)
