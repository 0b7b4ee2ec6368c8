"""Decoding through the narrow decode views (``contracts.INPUT_VIEW``) gives exactly what the
contract models give: the same core records for every accepted value, the same ``DecodeError``
reason for every rejected one, and ``event_time`` is ``parse_time``.

The oracle below is the decoder as it was before the views (``INPUT_ADAPTER`` models, then the
records built from the models' attributes), kept here verbatim in substance.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from streams.wire import contracts
from streams.wire.contracts import (INPUT_ADAPTER, AckRecord, CapacityRecord, CycleRecord,
                               GangSummaryRecord,
                               KubeRecord, TickRecord, event_time, parse_time)
from streams.core.records import (AckObserved, Capacity, CapacityObserved, CycleObserved,
                                  GangSummarized, PodGroupObserved, PodObserved, Tick)
from streams.core.spec import (RawSettings, gang_of_pod, settings_of_pod, settings_of_podgroup,
                               waits_for_podgroup)
from streams.wire.decoding import Decoded, DecodeError, _short, decode_input, scheduling_gates

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))


# -- the oracle: the decoder before the views --------------------------------------------------

def oracle(raw: bytes | str) -> Decoded:
    try:
        rec = INPUT_ADAPTER.validate_json(raw)
    except ValidationError as err:
        raise DecodeError(f"invalid record: {_short(err)}") from None
    if isinstance(rec, TickRecord):
        return Decoded(None, Tick(parse_time(rec.observed_at), rec.cluster))
    if isinstance(rec, CycleRecord):
        return Decoded(rec.gang, CycleObserved(
            at=parse_time(rec.observed_at), scheduler=rec.scheduler, cycle=rec.cycle,
            pod=f"{rec.pod.namespace}/{rec.pod.name}", pod_uid=rec.pod.uid, gang=rec.gang,
            gang_group=rec.gang_group or rec.gang, stage=rec.stage, status=rec.status,
            reason=rec.reason, message=rec.message, representative=rec.representative,
            node=rec.node, attempt="" if rec.cycle is not None or rec.source is None
            else f"{rec.source.uid}#{rec.source.count}"))
    if isinstance(rec, GangSummaryRecord):
        return Decoded(rec.to, GangSummarized(
            parse_time(rec.observed_at), rec.gang, rec.to, tuple(rec.groups), rec.exists,
            rec.initialized, rec.members, rec.min_member,
            None if rec.wanted_as_of is None else parse_time(rec.wanted_as_of)))
    if isinstance(rec, AckRecord):
        return Decoded(rec.gang_group, AckObserved(
            parse_time(rec.observed_at), rec.command_id, rec.gang_group, rec.epoch,
            rec.outcome, rec.representative))
    if isinstance(rec, CapacityRecord):
        c = rec.capacity
        return Decoded(rec.gang, CapacityObserved(
            parse_time(rec.observed_at), rec.gang, rec.culprit,
            Capacity(c.resource, c.request, c.allocatable, c.free, c.nodes, c.room, c.largest,
                     tuple(c.requests or ()), c.priority, c.room_preempting)))
    assert isinstance(rec, KubeRecord)
    obj = rec.object
    meta = obj.metadata
    at = parse_time(rec.observed_at)
    if rec.resource == "events":
        return Decoded(None, None, "events")
    if not meta.namespace:
        raise DecodeError(f"invalid record: object.metadata.namespace: missing for a "
                          f"namespaced {rec.resource} object {meta.name!r}")
    if rec.resource == "podgroups":
        gang = f"{meta.namespace}/{meta.name}"
        return Decoded(gang, PodGroupObserved(
            at, rec.type, gang, meta.namespace, meta.name, meta.uid, meta.resourceVersion,
            settings_of_podgroup(obj.spec, meta.annotations)))
    gang = gang_of_pod(meta.namespace, meta.labels, meta.annotations)
    if gang is None:
        return Decoded(None, None, "no-gang")
    node = obj.spec.get("nodeName") or None
    phase = obj.status.get("phase") or ""
    status_reason = obj.status.get("reason") or ""
    if not isinstance(node, (str, type(None))) or not isinstance(phase, str):
        raise DecodeError("invalid record: object.spec.nodeName and object.status.phase must "
                          "be strings")
    if not isinstance(status_reason, str):
        raise DecodeError("invalid record: object.status.reason must be a string")
    return Decoded(gang, PodObserved(
        at, rec.type, gang, meta.namespace, meta.name, meta.uid, meta.resourceVersion, node,
        phase, meta.deletionTimestamp is not None, settings_of_pod(meta.labels, meta.annotations),
        waits_for_podgroup(meta.labels), scheduling_gates(obj.spec.get("schedulingGates")),
        status_reason))


def outcome(decode: Any, raw: bytes | str) -> tuple[str, str]:
    """('ok', repr of the Decoded) or ('error', reason); repr tells 5 from 5.0 and '5'."""
    try:
        return "ok", repr(decode(raw))
    except DecodeError as err:
        return "error", str(err)


# -- handed traces and the synthetic trace ----------------------------------------------------

def handed_lines() -> list[bytes]:
    return [line for trace in sorted((ROOT / "tests/cases").glob("*/trace.jsonl"))
            for line in trace.read_bytes().splitlines() if line.strip()]


def test_every_handed_trace_line_decodes_as_before():
    lines = handed_lines()
    assert len(lines) >= 20
    for line in lines:
        assert outcome(decode_input, line) == outcome(oracle, line)
        assert outcome(decode_input, line.decode()) == outcome(oracle, line)  # text, as read


def test_the_synthetic_trace_decodes_as_before():
    """Both shapes of the bench's Pods: as ``gangstate watch`` publishes them, and whole (every
    field the views skip)."""
    import synthetic

    for manifests in (False, True):
        values = [v for _k, v in synthetic.trace(6, manifests=manifests, shape="legacy")]
        assert len(values) > 500
        for value in values:
            assert outcome(decode_input, value) == outcome(oracle, value)
    # the real shape (a storm, shim rounds, Events): the views give what the models give
    from streams.wire.decoding import _by_contract

    values = [v for _k, v in synthetic.trace(17)]
    assert len(values) > 5000
    for value in values:
        assert outcome(decode_input, value) == outcome(_by_contract, value)


def test_a_decoded_pod_has_the_expected_values():
    raw = (b'{"schema":"gangstate.kube/v1","observed_at":"2026-11-02T09:00:10.400000Z",'
           b'"resource":"pods","type":"MODIFIED","object":{"apiVersion":"v1","kind":"Pod",'
           b'"metadata":{"name":"w-1","namespace":"team-b","uid":"u-1","resourceVersion":"12",'
           b'"deletionTimestamp":"2026-11-02T09:00:10Z","labels":{"x":"y"},'
           b'"annotations":{"gang.scheduling.koordinator.sh/name":"moe",'
           b'"gang.scheduling.koordinator.sh/min-available":"3",'
           b'"gang.scheduling.koordinator.sh/waiting-time":"1h30"},"ownerReferences":[{}]},'
           b'"spec":{"nodeName":"gpu-7","containers":[{"name":"c"}],'
           b'"schedulingGates":[{"name":"kueue.x-k8s.io/admission"},{"name":"example.com/q"}]},'
           b'"status":{"phase":"Running","conditions":[]}}}')
    assert decode_input(raw) == Decoded("team-b/moe", PodObserved(
        1793610010400000, "MODIFIED", "team-b/moe", "team-b", "w-1", "u-1", "12", "gpu-7",
        "Running", True, RawSettings("3", None, None, "1h30"), False,
        ("kueue.x-k8s.io/admission", "example.com/q")))


@pytest.mark.parametrize("raw,gates", [
    (None, ()),                                    # absent (``spec.get``) or null
    ([], ()),
    ([{"name": "example.com/quota"}], ("example.com/quota",)),
    ([{"name": "b"}, {"name": "a", "other": 1}], ("b", "a")),  # order as written
], ids=lambda v: repr(v))
def test_the_names_of_the_scheduling_gates_are_decoded_in_order(raw, gates):
    assert scheduling_gates(raw) == gates


@pytest.mark.parametrize("raw", ["example.com/quota", {}, {"name": "a"}, 0, ["a"], [{}],
                                 [{"name": None}], [{"name": 5}], [{"name": "a"}, None]],
                         ids=lambda v: repr(v))
def test_scheduling_gates_of_another_shape_are_rejected(raw):
    with pytest.raises(DecodeError) as err:
        scheduling_gates(raw)
    assert str(err.value) == ("invalid record: object.spec.schedulingGates must be a list of "
                              "objects with a string name")


def test_a_decoded_podgroup_keeps_spec_values_as_written():
    raw = (b'{"schema":"gangstate.kube/v1","observed_at":"2026-11-02T09:00:00Z",'
           b'"resource":"podgroups","type":"ADDED","object":{"metadata":{"name":"g",'
           b'"namespace":"ns","uid":"u","annotations":null},'
           b'"spec":{"minMember":4.0,"scheduleTimeoutSeconds":90,"other":{"a":[1]}},'
           b'"status":null}}')
    assert decode_input(raw) == Decoded("ns/g", PodGroupObserved(
        1793610000000000, "ADDED", "ns/g", "ns", "g", "u", "",
        RawSettings("4.0", None, None, "90s", None, None, None)))


def test_a_decoded_cycle_and_ack_have_the_expected_values():
    cycle = (b'{"schema":"gangstate.cycle/v1","observed_at":"2026-11-02T09:00:10.000001Z",'
             b'"cycle":"501","pod":{"namespace":"a","name":"p"},"gang":"a/g","stage":"Filter",'
             b'"status":"Unschedulable","representative":null,"extra":[1,2]}')
    assert decode_input(cycle) == Decoded("a/g", CycleObserved(
        1793610010000001, "", 501, "a/p", "", "a/g", "a/g", "Filter", "Unschedulable", "",
        "", None, None))
    assert type(decode_input(cycle).record.cycle) is int  # type: ignore[union-attr]
    from_event = (b'{"schema":"gangstate.cycle/v1","observed_at":"2026-11-02T09:00:10.000001Z",'
                  b'"cycle":null,"pod":{"namespace":"a","name":"p","uid":"u"},"gang":"a/g",'
                  b'"stage":"PostFilter","status":"Rejected","reason":"GangGroupRejected",'
                  b'"source":{"event":"a/p.17","uid":"e-7","count":3,"parsed":true}}')
    assert decode_input(from_event) == Decoded("a/g", CycleObserved(
        1793610010000001, "", None, "a/p", "u", "a/g", "a/g", "PostFilter", "Rejected",
        "GangGroupRejected", "", None, None, "e-7#3"))
    numbered = json.loads(cycle)
    numbered["source"] = {"uid": "e-7", "count": 3}  # a cycle number is the identity then
    assert decode_input(json.dumps(numbered)).record.attempt == ""  # type: ignore[union-attr]
    ack = (b'{"schema":"gangstate.ack/v1","observed_at":"2026-11-02T09:00:10.000001Z",'
           b'"command_id":"a/g#2","gang_group":"a/g","epoch":2.0,"outcome":"Stale"}')
    assert decode_input(ack) == Decoded("a/g", AckObserved(
        1793610010000001, "a/g#2", "a/g", 2, "Stale", None))


def test_a_capacity_record_decodes_to_the_room_it_tells():
    """``gangstate.capacity/v1`` (the producer's word on the room of a gang's short resource)
    decodes to ``CapacityObserved`` keyed by its gang, milli-units kept as written."""
    raw = json.dumps(SAMPLES["capacity"])
    assert decode_input(raw) == Decoded("a/b", CapacityObserved(
        1793610000600000, "a/b", "a/p",
        Capacity("nvidia.com/gpu", 1000, 2000, 0, 2, 0, 1000, (1000, 1000), 10, 2)))
    empty = json.loads(raw)
    empty["capacity"] = {}
    with pytest.raises(DecodeError, match="capacity.resource: Field required"):
        decode_input(json.dumps(empty))


# -- rejected values: the same reasons as before ----------------------------------------------

T = '"observed_at": "2026-11-02T09:00:00.000000Z"'
POD = ('{"schema": "gangstate.kube/v1", %s, "resource": "pods", "type": "ADDED", "object": '
       '{"metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": '
       '{"gang.scheduling.koordinator.sh/name": "g"}}%%s}}' % T)
TAGS = ("'gangstate.kube/v1', 'gangstate.cycle/v1', 'gangstate.ack/v1', "
        "'gangstate.gang-summary/v1', 'gangstate.tick/v1', 'gangstate.preemption/v1', "
        "'gangstate.capacity/v1', 'gangstate.roster/v1'")

REJECTED = [  # (value, reason) as the decoder before the views gave them
    (b"not json", "invalid record: Invalid JSON: expected ident at line 1 column 2"),
    (b"", "invalid record: Invalid JSON: EOF while parsing a value at line 1 column 0"),
    (b"[]", "invalid record: Input should be an object"),
    (b'{"observed_at": "2026-11-02T09:00:00Z"}',
     "invalid record: Unable to extract tag using discriminator 'schema_' | 'schema'"),
    (b'{"schema": "gangstate.nope/v1", "observed_at": "2026-11-02T09:00:00Z"}',
     "invalid record: Input tag 'gangstate.nope/v1' found using 'schema_' | 'schema' does not "
     f"match any of the expected tags: {TAGS}"),
    (b'{"schema": "gangstate.tick/v1", "observed_at": "yesterday"}',
     "invalid record: gangstate.tick/v1.observed_at: Value error, Invalid isoformat string: "
     "'yesterday'"),
    (b'{"schema": "gangstate.tick/v1", "observed_at": "2026-11-02T24:00:00.000000Z"}',
     "invalid record: gangstate.tick/v1.observed_at: Value error, hour must be in 0..23"),
    (b'{"schema": "gangstate.tick/v1", "observed_at": 5}',
     "invalid record: gangstate.tick/v1.observed_at: Input should be a valid string"),
    (b'{"schema": "gangstate.tick/v1", "schema_": "x", "observed_at": "2026-11-02T09:00:00Z"}',
     "invalid record: Input tag 'x' found using 'schema_' | 'schema' does not match any of the "
     f"expected tags: {TAGS}"),
    (b'{"schema": "gangstate.cycle/v1", "observed_at": "2026-11-02T09:00:00Z"}',
     "invalid record: gangstate.cycle/v1.cycle: Field required; gangstate.cycle/v1.pod: Field "
     "required; gangstate.cycle/v1.gang: Field required (+2 more)"),
    (('{"schema": "gangstate.cycle/v1", %s, "cycle": -1, "pod": {"namespace": "a", "name": ""}, '
      '"gang": "nogang", "stage": "Nowhere", "status": "Wait"}' % T).encode(),
     "invalid record: gangstate.cycle/v1.cycle: Input should be greater than or equal to 0; "
     "gangstate.cycle/v1.pod.name: String should have at least 1 character; "
     "gangstate.cycle/v1.gang: String should match pattern '^[^/]+/[^/]+$' (+1 more)"),
    (('{"schema": "gangstate.cycle/v1", %s, "cycle": null, "pod": {"namespace": "a", "name": '
      '"p"}, "gang": "a/g", "stage": "Filter", "status": "Unschedulable", "source": {"event": '
      '"a/p.1"}}' % T).encode(),
     "invalid record: gangstate.cycle/v1: Value error, cycle is null (unknown) but no "
     "source.uid names the Event that identifies the attempt"),
    (('{"schema": "gangstate.cycle/v1", %s, "cycle": null, "pod": {"namespace": "a", "name": '
      '"p"}, "gang": "a/g", "stage": "Filter", "status": "Unschedulable", "source": {"uid": '
      '"u", "count": 0}}' % T).encode(),
     "invalid record: gangstate.cycle/v1.source.count: Input should be greater than or equal "
     "to 1"),
    (('{"schema": "gangstate.ack/v1", %s, "command_id": "", "gang_group": "a/b", "epoch": 0, '
      '"outcome": "Applied"}' % T).encode(),
     "invalid record: gangstate.ack/v1.command_id: String should have at least 1 character; "
     "gangstate.ack/v1.epoch: Input should be greater than or equal to 1"),
    (('{"schema": "gangstate.gang-summary/v1", %s, "gang": "a/b", "to": "a/c", "exists": true, '
      '"initialized": true, "members": 1, "wanted_as_of": "soon"}' % T).encode(),
     "invalid record: gangstate.gang-summary/v1.wanted_as_of: Value error, Invalid isoformat "
     "string: 'soon'"),
    ((POD % "").replace('"namespace": "ns", ', "").encode(),
     "invalid record: object.metadata.namespace: missing for a namespaced pods object 'p'"),
    ((POD % "").replace('"resource": "pods"', '"resource": "podgroups"')
     .replace('"namespace": "ns", ', "").encode(),
     "invalid record: object.metadata.namespace: missing for a namespaced podgroups object 'p'"),
    ((POD % ', "spec": {"nodeName": 5}').encode(),
     "invalid record: object.spec.nodeName and object.status.phase must be strings"),
    ((POD % ', "status": {"phase": ["Running"]}').encode(),
     "invalid record: object.spec.nodeName and object.status.phase must be strings"),
    ((POD % ', "status": {"phase": "Failed", "reason": 5}').encode(),
     "invalid record: object.status.reason must be a string"),
    ((POD % ', "spec": {"schedulingGates": [{"name": 5}]}').encode(),
     "invalid record: object.spec.schedulingGates must be a list of objects with a string name"),
    ((POD % ', "spec": []').encode(),
     "invalid record: gangstate.kube/v1.object.spec: Input should be an object"),
    ((POD % "").replace('"annotations": {', '"labels": {"a": 1}, "annotations": {').encode(),
     "invalid record: gangstate.kube/v1.object.metadata.labels.a: Input should be a valid "
     "string"),
    ((POD % "").replace('"uid": "u"', '"uid": ""').encode(),
     "invalid record: gangstate.kube/v1.object.metadata.uid: String should have at least 1 "
     "character"),
]


@pytest.mark.parametrize("raw,reason", REJECTED, ids=range(len(REJECTED)))
def test_a_rejected_value_gives_the_same_reason_as_before(raw, reason):
    with pytest.raises(DecodeError) as err:
        decode_input(raw)
    assert str(err.value) == reason
    assert "\n" not in str(err.value)
    assert outcome(oracle, raw) == ("error", reason)


# -- mutations: the view never accepts what the models reject, nor decodes differently ---------

VALUES: list[Any] = [
    None, "", "x", "a/b", "/b", 0, 1, -1, 5.0, 5.5, "5", True, [], {}, ["a"], {"k": "v"},
    {"k": 1}, 2**70, "2026-11-02T09:00:00Z", "2026-11-02T09:00:00.123456Z",
    "2026-11-02 09:00:00.123456Z", "2026-11-02T09:00:00.123456+01:00", "2026-11-02t09:00:00.1Z",
    "2026-11-02T09:00:00.12345\u0663Z", "2026-13-02T09:00:00.123456Z", "gangstate.kube/v1",
    "gangstate.tick/v1", "pods", "podgroups", "events", "SYNC", "Permit", "Wait", "Applied",
]

SAMPLES: dict[str, dict[str, Any]] = {
    "pod": {"schema": "gangstate.kube/v1", "observed_at": "2026-11-02T09:00:00.000000Z",
            "resource": "pods", "type": "ADDED",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": "w-0", "namespace": "ns", "uid": "u0", "resourceVersion": "7",
                "labels": {"pod-group.scheduling.sigs.k8s.io": "g"},
                "annotations": {"gang.scheduling.koordinator.sh/min-available": "2"},
                "deletionTimestamp": None, "ownerReferences": [{"uid": "o"}]},
                "spec": {"nodeName": "n1", "containers": [],
                         "schedulingGates": [{"name": "example.com/quota"}]},
                "status": {"phase": "Running"}}},
    "podgroup": {"schema": "gangstate.kube/v1", "observed_at": "2026-11-02T09:00:00.000000Z",
                 "resource": "podgroups", "type": "MODIFIED",
                 "object": {"metadata": {"name": "g", "namespace": "ns", "uid": "u1",
                                         "annotations": {"gang.scheduling.koordinator.sh/mode":
                                                         "NonStrict"}},
                            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 60}}},
    "event": {"schema": "gangstate.kube/v1", "observed_at": "2026-11-02T09:00:00.000000Z",
              "resource": "events", "type": "ADDED",
              "object": {"metadata": {"name": "e", "uid": "u2"}, "reason": "x"}},
    "cycle": {"schema": "gangstate.cycle/v1", "observed_at": "2026-11-02T09:00:00.000001Z",
              "scheduler": "s", "cycle": 5, "pod": {"namespace": "a", "name": "p", "uid": "u"},
              "gang": "a/b", "gang_group": "a/b,a/c", "stage": "Permit", "status": "Wait",
              "reason": "r", "message": "m", "representative": "a/p", "node": "n"},
    "attempt": {"schema": "gangstate.cycle/v1", "observed_at": "2026-11-02T09:00:00.000001Z",
                "scheduler": "koord-scheduler", "cycle": None,
                "pod": {"namespace": "a", "name": "p", "uid": "u"}, "gang": "a/b",
                "stage": "Filter", "status": "Unschedulable", "reason": "r", "message": "m",
                "representative": None, "node": None,
                "source": {"event": "a/p.1", "uid": "e-u", "count": 2, "parsed": True}},
    "ack": {"schema": "gangstate.ack/v1", "observed_at": "2026-11-02T09:00:00.000002Z",
            "command_id": "a/b#1", "gang_group": "a/b", "epoch": 1, "outcome": "Applied",
            "representative": "a/p"},
    "summary": {"schema": "gangstate.gang-summary/v1",
                "observed_at": "2026-11-02T09:00:00.000003Z", "gang": "a/b", "to": "a/c",
                "gang_group": "a/b,a/c", "groups": ["a/b", "a/c"], "exists": True,
                "initialized": True, "members": 3, "min_member": 3,
                "wanted_as_of": "2026-11-02T09:00:01.000000Z"},
    "tick": {"schema": "gangstate.tick/v1", "observed_at": "2026-11-02T09:00:00.500000Z"},
    "capacity": {"schema": "gangstate.capacity/v1", "observed_at": "2026-11-02T09:00:00.600000Z",
                 "gang": "a/b", "culprit": "a/p",
                 "capacity": {"resource": "nvidia.com/gpu", "request": 1000,
                              "allocatable": 2000, "free": 0, "nodes": 2, "room": 0,
                              "largest": 1000, "requests": [1000, 1000], "priority": 10,
                              "room_preempting": 2}},
}


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) \
        if isinstance(obj, list) else ()
    for key, value in items:
        yield prefix + (key,)
        yield from _paths(value, prefix + (key,))


def _mutants(sample: dict[str, Any]) -> Iterator[str]:
    yield json.dumps(sample)
    for path in _paths(sample):
        for value in [...] + VALUES:  # ... = delete the field
            mutant = copy.deepcopy(sample)
            parent = mutant
            for key in path[:-1]:
                parent = parent[key]
            if value is ...:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
            yield json.dumps(mutant)
    for key, value in (("schema_", "x"), ("schema_", sample["schema"]), ("extra", [{}])):
        yield json.dumps({**sample, key: value})
    text = json.dumps(sample)
    yield text.replace('"observed_at"', '"observed_at": "bad", "observed_at"', 1)
    yield text.replace('"observed_at"', '"observed_at": 1, "observed_at"', 1)
    yield text.replace('"schema"', '"schema": "gangstate.nope/v1", "schema"', 1)
    yield text[:-1]
    yield text + " x"
    yield f" \n{text}\n"
    yield text.replace('"}', '", "deep": ' + "[" * 300 + "]" * 300 + "}", 1)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_mutated_records_decode_exactly_as_the_models_decode_them(name):
    mutants = list(_mutants(SAMPLES[name]))
    assert len(mutants) > 40
    accepted = 0
    for text in mutants:
        expected = outcome(oracle, text)
        assert outcome(decode_input, text) == expected, text
        assert outcome(decode_input, text.encode()) == expected, text
        accepted += expected[0] == "ok"
    assert accepted > 5


def test_values_that_are_not_utf8_json_are_rejected_as_before():
    text = json.dumps(SAMPLES["tick"])
    for raw in (text.encode("utf-16"), b"\xff" + text.encode(), b"\xc3" + text.encode(),
                text.replace("500000", "\\ud800").encode()):
        assert outcome(decode_input, raw) == outcome(oracle, raw)
        assert outcome(decode_input, raw)[0] == "error"


# -- the views follow the models ---------------------------------------------------------------

def _model_keys(model: type[BaseModel]) -> dict[str, bool]:
    return {(f.alias or name): f.is_required() for name, f in model.model_fields.items()}


def _view_keys(view: Any) -> dict[str, bool]:
    schema = TypeAdapter(view).json_schema()  # as pydantic reads the view
    keys = {k: k in schema.get("required", ()) for k in schema["properties"]}
    keys.pop("schema_", None)
    return keys


@pytest.mark.parametrize("model", list(contracts.VIEWS), ids=lambda m: m.__name__)
def test_each_view_has_the_fields_of_its_model(model):
    """A field added to (or removed from) an input model must be added to its view too."""
    assert _view_keys(contracts.VIEWS[model]) == _model_keys(model)


def test_every_input_model_has_a_view():
    union = {KubeRecord, CycleRecord, AckRecord, GangSummaryRecord, TickRecord}
    assert union <= set(contracts.VIEWS)


# -- event time ----------------------------------------------------------------------------------

TIMES = [
    "2026-11-02T09:00:10.400000Z", "2026-11-02T09:00:10.400001Z", "2026-11-02T09:00:10.999999Z",
    "2026-11-02T09:00:10Z", "2026-11-02T09:00:10.4Z", "2026-11-02T09:00:10.1234567Z",
    "2026-11-02T09:00:10.400000+02:00", "2026-11-02T09:00:10.400000", "2026-11-02 09:00:10.4Z",
    "2026-11-02t09:00:10.400000Z", "1969-12-31T23:59:59.999999Z", "0001-01-01T00:00:00.000000Z",
    "9999-12-31T23:59:59.999999Z", "2024-02-29T12:00:00.000000Z",
    # rejected by parse_time: must stay rejected, also after a valid time of the same second
    "2025-02-29T12:00:00.000000Z", "2026-11-02T24:00:00.000000Z", "2026-11-02T23:59:60.000000Z",
    "2026-11-02T09:00:10.40000xZ", "2026-11-02T09:00:10.4000\u0663\u0663Z",
    "2026-11-02T09:00:10.+40000Z", "2026-11-02T09:00:10. 40000Z", "2026-11-02T09:00:10.4_0000Z",
    "2026-11-02T09:00:10x400000Z", "2026-11-02T09:00:1\u0663.400000Z", "yesterday", "",
]


def _parse(fn: Any, text: str) -> tuple[str, Any]:
    try:
        return "ok", fn(text)
    except ValueError as err:
        return "error", str(err)


def test_event_time_is_parse_time():
    for _ in range(2):  # the second round hits the per-second cache
        for text in TIMES:
            assert _parse(event_time, text) == _parse(parse_time, text), text
    rng = random.Random(5)
    for _ in range(2000):
        micros = rng.randrange(-10**16, 10**17)
        text = contracts.format_time(micros)
        assert event_time(text) == parse_time(text) == micros, text


def test_the_time_cache_is_bounded():
    for second in range(10_000):
        text = contracts.format_time(second * 1_000_000 + 7)
        assert event_time(text) == second * 1_000_000 + 7
    assert 0 < len(contracts._SECONDS) <= 4096
