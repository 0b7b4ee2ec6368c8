"""The Event recorder's core (``streams.events.recorder``) as tables of named scenarios: names,
truncation, correlation, series ending, the spam filter, rendering and reading back. Values
are worked out by hand; nothing here talks to an API."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from streams.core.timefmt import parse_time
from streams.events.bodies import (core_v1_event, core_v1_patch, events_v1_event, events_v1_patch,
                                   written_from_event)
from streams.events.recorder import (ANNOTATION_IDS, ANNOTATION_LAST_AT, ANNOTATION_LAST_ID, Create,
                                     Drop, EventKey, LruCache, ObjectRef, Occurrence, Patch,
                                     Recorder, Skip, SpamFilter, Written, correlate, ender_keys,
                                     event_name, occurrences, outcome, truncate_message)

T0 = parse_time("2026-11-02T09:00:10Z")
S = 1_000_000  # one second in microseconds
POD = ObjectRef("Pod", "team-a", "llm-0", "uid-0", "v1")
WARN = EventKey(POD, "Warning", "GangMembersInsufficient")
SATISFIED = EventKey(POD, "Normal", "GangMembersSatisfied")
SCHEDULED = EventKey(POD, "Normal", "GangScheduled")


def occ(at: int = T0, ident: str = "g#R#aaa", key: EventKey = WARN,
        message: str = "3 of 4") -> Occurrence:
    return Occurrence(key, ident, at, message, "team-a/llm")


def state(count: int = 1, first: int = T0, last: int = T0, ids: tuple[str, ...] = ("g#R#aaa",),
          message: str = "3 of 4", key: EventKey = WARN) -> Written:
    return Written(key.name, "team-a", count, first, last, ids, message, "team-a/llm")


# -- names ----------------------------------------------------------------------------------

def test_event_name_is_the_object_name_and_a_hash_of_the_key() -> None:
    name = event_name(WARN)
    assert name == WARN.name and name.startswith("llm-0.") and len(name) == len("llm-0.") + 16
    assert event_name(EventKey(POD, "Warning", "GangMembersInsufficient")) == name


@pytest.mark.parametrize("other", [
    EventKey(ObjectRef("Pod", "team-a", "llm-0", "uid-9"), "Warning", "GangMembersInsufficient"),
    EventKey(POD, "Warning", "GangNotInitialized"),
    EventKey(POD, "Warning", "GangMembersInsufficient", "mode"),
    EventKey(ObjectRef("PodGroup", "team-a", "llm-0", "uid-0"), "Warning",
             "GangMembersInsufficient"),
], ids=["recreated pod (new uid)", "other reason", "other field", "other kind"])
def test_event_name_differs_per_key(other: EventKey) -> None:
    assert event_name(other) != event_name(WARN)


def test_event_name_fits_a_dns_subdomain() -> None:
    long = EventKey(ObjectRef("Pod", "ns", "p" * 253, "u"), "Warning", "GangSpecInvalid", "mode")
    assert len(event_name(long)) == 253 and event_name(long)[236] == "."


# -- truncation -----------------------------------------------------------------------------

@pytest.mark.parametrize("message,expected_len,suffix", [
    ("short", 5, "short"),
    ("x" * 1024, 1024, "x"),
    ("x" * 1025, 1024, " ..."),
    ("a" + "é" * 600, 1023, "é ..."),  # byte 1020 is half an "é": 1 + 509 * 2 bytes kept
], ids=["short", "exactly the limit", "one byte over", "multi-byte characters are not split"])
def test_truncate_message(message: str, expected_len: int, suffix: str) -> None:
    out = truncate_message(message)
    assert len(out.encode()) == expected_len and out.endswith(suffix)


# -- correlation ----------------------------------------------------------------------------

@dataclass
class Scenario:
    occ: Occurrence
    written: Written | None
    ended_at: int | None
    expect: Any


CORRELATE = {
    "first occurrence creates with count 1": Scenario(
        occ(), None, None,
        Create(WARN, state())),
    "newer diagnostic patches count, time, message and ids": Scenario(
        occ(T0 + 60 * S, "g#R#bbb", message="2 of 4"), state(), None,
        Patch(WARN, state(2, T0, T0 + 60 * S, ("g#R#bbb",), "2 of 4"), state())),
    "same diagnostic again is a duplicate": Scenario(
        occ(), state(), None, Skip(WARN, "duplicate")),
    "older diagnostic is stale": Scenario(
        occ(T0 - S, "g#R#old"), state(), None, Skip(WARN, "stale")),
    "another diagnostic at the same instant counts and joins the ids": Scenario(
        occ(T0, "g#R#bbb", message="3 of 4 (b)"), state(2, T0 - S, T0), None,
        Patch(WARN, state(3, T0 - S, T0, ("g#R#aaa", "g#R#bbb"), "3 of 4 (b)"),
              state(2, T0 - S, T0))),
    "replayed second diagnostic of an instant is a duplicate": Scenario(
        occ(T0, "g#R#aaa"), state(3, T0 - S, T0, ("g#R#aaa", "g#R#bbb")), None,
        Skip(WARN, "duplicate")),
    "warning older than the Normal that ended it is dropped": Scenario(
        occ(T0), None, T0 + 300 * S, Drop(WARN, "series-ended")),
    "warning at the same instant as the Normal is dropped": Scenario(
        occ(T0), state(), T0, Drop(WARN, "series-ended")),
    "warning newer than the Normal starts a new series": Scenario(
        occ(T0 + 600 * S, "g#R#ccc"), state(), T0 + 300 * S,
        Patch(WARN, state(2, T0, T0 + 600 * S, ("g#R#ccc",)), state())),
}


@pytest.mark.parametrize("name", list(CORRELATE))
def test_correlate(name: str) -> None:
    s = CORRELATE[name]
    assert correlate(s.occ, s.written, s.ended_at) == s.expect


def test_ids_kept_per_instant_are_bounded() -> None:
    written = state(40, ids=tuple(f"id{i}" for i in range(32)))
    decision = correlate(occ(T0, "id32"), written)
    assert isinstance(decision, Patch)
    assert decision.state.ids == tuple(f"id{i}" for i in range(1, 33))


@pytest.mark.parametrize("reason,enders", [
    ("GangMembersInsufficient", ["GangMembersSatisfied", "GangScheduled"]),
    ("GangNotInitialized", ["GangMembersSatisfied", "GangScheduled"]),
    ("GangGroupIncomplete", ["GangMembersSatisfied", "GangScheduled"]),
    ("GangMemberGated", ["GangMembersSatisfied", "GangMembersUngated", "GangScheduled"]),
    ("GangUnschedulable", ["GangScheduled"]),
    ("GangPermitTimeout", ["GangScheduled"]),
    ("GangPreemptionWasted", ["GangScheduled"]),
    # a gang the scheduler tried again, or members activated, once it is scheduled
    ("GangAwaitingRetry", ["GangScheduled"]),
    ("GangMembersStranded", ["GangScheduled"]),
    ("GangMembersLost", ["GangMembersRestored"]),
    # a native gang's loss (its PodGroupInitiallyScheduled stays True): the same ender
    ("GangBelowMinCount", ["GangMembersRestored"]),
    ("GangSpecInvalid", []),
    ("GangSpecConflict", []),
    ("GangMembersSatisfied", []),
    ("GangMembersUngated", []),
], ids=lambda v: str(v))
def test_which_normal_events_end_a_warning_series(reason: str, enders: list[str]) -> None:
    keys = ender_keys(EventKey(POD, "Warning", reason))
    assert [k.reason for k in keys] == enders
    assert all(k.involved == POD and k.type == "Normal" and k.field == "" for k in keys)


# -- spam filter ----------------------------------------------------------------------------

@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


SPAM = {  # (seconds to advance before each try, object index) -> expected allowed
    "a burst of 25 passes, the 26th is refused": (
        [(0.0, 0)] * 26, [True] * 25 + [False]),
    "one token comes back after 300 s": (
        [(0.0, 0)] * 26 + [(299.0, 0), (1.0, 0), (0.0, 0)], [True] * 25 + [False, False, True,
                                                                           False]),
    "objects have their own buckets": (
        [(0.0, 0)] * 26 + [(0.0, 1)], [True] * 25 + [False, True]),
    "a full bucket does not grow past the burst": (
        [(3000.0, 0)] + [(0.0, 0)] * 25, [True] * 25 + [False]),
}


@pytest.mark.parametrize("name", list(SPAM))
def test_spam_filter(name: str) -> None:
    steps, expected = SPAM[name]
    clock = Clock()
    spam = SpamFilter(clock)
    objects = [POD, ObjectRef("Pod", "team-a", "llm-1", "uid-1")]
    got = []
    for advance, index in steps:
        clock.now += advance
        got.append(spam.allow("gangstate", objects[index]))
    assert got == expected


def test_spam_filter_lru_forgets_the_oldest_object() -> None:
    spam = SpamFilter(Clock(), burst=1, capacity=2)
    a, b, c = (ObjectRef("Pod", "ns", n) for n in "abc")
    assert [spam.allow("g", a), spam.allow("g", a)] == [True, False]
    spam.allow("g", b)
    spam.allow("g", c)  # evicts a
    assert spam.allow("g", a) is True


def test_lru_cache_evicts_least_recently_used() -> None:
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert [cache.get(k) for k in "abc"] == [(True, 1), (False, None), (True, 3)]
    assert len(cache) == 2


# -- recorder -------------------------------------------------------------------------------

@dataclass
class Api:
    """A lookup over a dict of Event states, counting the keys looked up."""

    states: dict[EventKey, Written] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def __call__(self, key: EventKey) -> Written | None:
        self.asked.append(key.reason)
        return self.states.get(key)


def test_recorder_looks_up_once_then_uses_its_cache() -> None:
    recorder, api = Recorder(SpamFilter(Clock())), Api()
    first = recorder.decide(occ(), api)
    assert isinstance(first, Create)
    assert api.asked == ["GangMembersSatisfied", "GangScheduled", "GangMembersInsufficient"]
    recorder.observe(WARN, first.state)
    assert recorder.decide(occ(), api) == Skip(WARN, "duplicate")
    assert len(api.asked) == 3


def test_restarted_recorder_reads_the_event_and_the_series_end_from_the_api() -> None:
    api = Api({WARN: state(), SATISFIED: state(key=SATISFIED, last=T0 + 290 * S,
                                               first=T0 + 290 * S, ids=("g#S#x",))})
    recorder = Recorder(SpamFilter(Clock()))
    assert recorder.decide(occ(), api) == Drop(WARN, "series-ended")
    late = occ(T0 + 100 * S, "g#R#late")
    assert recorder.decide(late, api) == Drop(WARN, "series-ended")
    again = occ(T0 + 400 * S, "g#R#again")
    assert recorder.decide(again, api) == Patch(
        WARN, state(2, T0, T0 + 400 * S, ("g#R#again",)), state())


def test_gang_scheduled_ends_a_failure_episode() -> None:
    rejected = EventKey(POD, "Warning", "GangUnschedulable")
    api = Api({SCHEDULED: state(key=SCHEDULED, first=T0 + S, last=T0 + S)})
    recorder = Recorder(SpamFilter(Clock()))
    assert recorder.decide(occ(key=rejected), api) == Drop(rejected, "series-ended")


def test_recorder_drops_writes_over_the_spam_budget_but_not_repeats() -> None:
    recorder = Recorder(SpamFilter(Clock(), burst=2))
    api = Api()
    outcomes = []
    for i in range(3):
        d = recorder.decide(occ(T0 + i * S, f"id{i}"), api)
        if isinstance(d, (Create, Patch)):
            recorder.observe(WARN, d.state)
        outcomes.append(outcome(d))
    outcomes.append(outcome(recorder.decide(occ(T0 + S, "id1"), api)))
    assert outcomes == [("created", "GangMembersInsufficient"),
                        ("patched", "GangMembersInsufficient"), ("dropped", "spam"),
                        ("skipped", "duplicate")]


# -- occurrences, rendering, reading back ---------------------------------------------------

DIAGNOSTIC = {
    "schema": "gangstate.diagnostic/v1", "id": "nlp/gpt#GangSpecInvalid#23487113bf2a",
    "observed_at": "2026-11-02T09:00:00.250000Z", "gang": "nlp/gpt", "gang_group": "nlp/gpt",
    "type": "Warning", "reason": "GangSpecInvalid",
    "message": "gang nlp/gpt: mode 'nonstrict' is not valid; the scheduler silently uses Strict",
    "involved": [{"kind": "Pod", "namespace": "nlp", "name": "gpt-0", "uid": "u0"},
                 {"kind": "PodGroup", "namespace": "nlp", "name": "gpt", "uid": "pg"}],
    "facts": {"field": "mode", "value": "nonstrict", "effective": "Strict"},
}


def test_occurrences_one_per_involved_object_with_the_field() -> None:
    got = occurrences(DIAGNOSTIC)
    assert [(o.key.involved.kind, o.key.involved.name, o.key.involved.api_version, o.key.field)
            for o in got] == [("Pod", "gpt-0", "v1", "mode"),
                              ("PodGroup", "gpt", "scheduling.sigs.k8s.io/v1alpha1", "mode")]
    assert {o.observed_at for o in got} == {parse_time("2026-11-02T09:00:00.25Z")}
    assert {o.diagnostic_id for o in got} == {DIAGNOSTIC["id"]}


def test_core_v1_event_and_patch() -> None:
    o = occurrences(DIAGNOSTIC)[0]
    first = correlate(o, None)
    assert isinstance(first, Create)
    body = core_v1_event(o.key, first.state, "sink-0")
    assert body == {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": o.key.name, "namespace": "nlp", "annotations": {
            ANNOTATION_LAST_ID: DIAGNOSTIC["id"],
            ANNOTATION_LAST_AT: "2026-11-02T09:00:00.250000Z",
            ANNOTATION_IDS: DIAGNOSTIC["id"], "gangstate.dev/gang": "nlp/gpt"}},
        "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": "nlp",
                           "name": "gpt-0", "uid": "u0"},
        "type": "Warning", "reason": "GangSpecInvalid", "message": DIAGNOSTIC["message"],
        "count": 1, "firstTimestamp": "2026-11-02T09:00:00Z",
        "lastTimestamp": "2026-11-02T09:00:00Z", "source": {"component": "gangstate"},
        "reportingComponent": "gangstate", "reportingInstance": "sink-0"}
    later = Occurrence(o.key, "nlp/gpt#GangSpecInvalid#ffff", o.observed_at + 2 * S, "m2",
                       "nlp/gpt")
    patch = correlate(later, first.state)
    assert isinstance(patch, Patch)
    assert core_v1_patch(patch.state) == {
        "count": 2, "lastTimestamp": "2026-11-02T09:00:02Z", "message": "m2",
        "metadata": {"annotations": {
            ANNOTATION_LAST_ID: "nlp/gpt#GangSpecInvalid#ffff",
            ANNOTATION_LAST_AT: "2026-11-02T09:00:02.250000Z",
            ANNOTATION_IDS: "nlp/gpt#GangSpecInvalid#ffff", "gangstate.dev/gang": "nlp/gpt"}}}
    # core/v1 keeps firstTimestamp in whole seconds; the last time is exact (annotation)
    assert written_from_event(core_v1_event(o.key, patch.state, "x")) == replace(
        patch.state, first_at=parse_time("2026-11-02T09:00:00Z"))


def test_events_v1_event_series_and_patch() -> None:
    o = occurrences(DIAGNOSTIC)[1]
    first = correlate(o, None)
    assert isinstance(first, Create)
    body = events_v1_event(o.key, first.state, "sink-0")
    assert (body["regarding"], body["note"], body["eventTime"], body["action"],
            body["reportingController"], "series" in body) == (
        {"kind": "PodGroup", "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
         "namespace": "nlp", "name": "gpt", "uid": "pg"},
        DIAGNOSTIC["message"], "2026-11-02T09:00:00.250000Z", "Diagnose", "gangstate", False)
    later = Occurrence(o.key, "x#y#z", o.observed_at + 2 * S, "new facts", "nlp/gpt")
    patch = correlate(later, first.state)
    assert isinstance(patch, Patch)
    assert events_v1_patch(patch.state)["series"] == {
        "count": 2, "lastObservedTime": "2026-11-02T09:00:02.250000Z"}
    assert "note" not in events_v1_patch(patch.state)  # note is immutable in events.k8s.io/v1
    assert written_from_event(events_v1_event(o.key, patch.state, "x")) == patch.state


def test_an_event_without_annotations_is_read_from_its_fields() -> None:
    foreign = {"metadata": {"name": "e", "namespace": "ns"}, "count": 7,
               "firstTimestamp": "2026-11-02T09:00:00Z", "lastTimestamp": "2026-11-02T09:05:00Z",
               "message": "m"}
    assert written_from_event(foreign) == Written(
        "e", "ns", 7, parse_time("2026-11-02T09:00:00Z"), parse_time("2026-11-02T09:05:00Z"),
        (), "m", "")


# -- a native PodGroup (Kubernetes' own gang scheduling, scheduling.k8s.io) --------------------

NATIVE_DIAGNOSTIC = {
    "schema": "gangstate.diagnostic/v1", "id": "ml/llm@kube-scheduler#GangUnschedulable#abc",
    "observed_at": "2026-12-01T10:00:15Z", "gang": "ml/llm@kube-scheduler",
    "gang_group": "ml/llm@kube-scheduler", "type": "Warning", "reason": "GangUnschedulable",
    "message": "PodGroup ml/llm cannot be scheduled",
    "involved": [{"kind": "Pod", "namespace": "ml", "name": "llm-0", "uid": "uid-llm-0"},
                 {"kind": "PodGroup", "namespace": "ml", "name": "llm", "uid": "pg",
                  "apiVersion": "scheduling.k8s.io/v1beta1"}],
    "facts": {},
}
"""A diagnostic of a native gang as the core writes it (``streams.core.rules.base.involved``:
the PodGroup entry names its apiVersion)."""


def test_a_native_podgroup_is_written_with_its_api_version() -> None:
    """``kubectl describe podgroup.scheduling.k8s.io llm`` lists the Events whose
    involvedObject is that PodGroup: its apiVersion must be the native one, in both APIs."""
    pod, group = occurrences(NATIVE_DIAGNOSTIC)
    assert (pod.key.involved.api_version, group.key.involved.api_version) == (
        "v1", "scheduling.k8s.io/v1beta1")
    created = correlate(group, None)
    assert isinstance(created, Create)
    assert core_v1_event(group.key, created.state, "s")["involvedObject"] == {
        "kind": "PodGroup", "apiVersion": "scheduling.k8s.io/v1beta1", "namespace": "ml",
        "name": "llm", "uid": "pg"}
    assert events_v1_event(group.key, created.state, "s")["regarding"]["apiVersion"] == \
        "scheduling.k8s.io/v1beta1"
    # an entry whose apiVersion is null (a diagnostic through the contract model) is the kind's
    through_model = {**NATIVE_DIAGNOSTIC, "involved": [
        {**NATIVE_DIAGNOSTIC["involved"][0], "apiVersion": None}]}
    assert occurrences(through_model)[0].key.involved.api_version == "v1"


def test_event_names_stay_and_a_native_podgroups_differ() -> None:
    """The names of the Events of Pods and Koordinator PodGroups are as before (the digest of
    kind, namespace, name, uid, reason, field: worked out here with hashlib); a native
    PodGroup's digest also holds its apiVersion, so a Koordinator PodGroup and a native one of
    one name and uid (a hand-made trace) never share an Event."""
    import hashlib

    def digest(*parts: str) -> str:
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]

    koord = ObjectRef("PodGroup", "ml", "llm", "pg", "scheduling.sigs.k8s.io/v1alpha1")
    native = ObjectRef("PodGroup", "ml", "llm", "pg", "scheduling.k8s.io/v1beta1")
    assert event_name(WARN) == "llm-0." + digest("Pod", "team-a", "llm-0", "uid-0",
                                                 "GangMembersInsufficient", "")
    assert event_name(EventKey(koord, "Warning", "GangUnschedulable")) == "llm." + digest(
        "PodGroup", "ml", "llm", "pg", "GangUnschedulable", "")
    assert event_name(EventKey(native, "Warning", "GangUnschedulable")) == "llm." + digest(
        "PodGroup", "ml", "llm", "pg", "GangUnschedulable", "", "scheduling.k8s.io/v1beta1")
