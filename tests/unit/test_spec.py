"""Gang membership and spec parsing, as Koordinator applies them: tables of named scenarios."""

from __future__ import annotations

import pytest

from streams.core.spec import (Fallback, RawSettings, gang_of_pod, parse_go_duration,
                               parse_int32, parse_spec, settings_of_pod, settings_of_podgroup)

P = "gang.scheduling.koordinator.sh/"


@pytest.mark.parametrize("labels,annotations,expected", [
    pytest.param({"pod-group.scheduling.sigs.k8s.io": "a"}, {P + "name": "b"}, "ns/a",
                 id="podgroup-label-wins"),
    pytest.param({"pod-group.scheduling.sigs.k8s.io/name": "c"}, {P + "name": "b"}, "ns/c",
                 id="deprecated-label-before-annotation"),
    pytest.param({}, {P + "name": "b"}, "ns/b", id="annotation"),
    pytest.param({}, {}, None, id="no-gang"),
    pytest.param({"pod-group.scheduling.sigs.k8s.io": ""}, {}, None, id="empty-label-no-gang"),
])
def test_gang_of_pod(labels, annotations, expected):
    assert gang_of_pod("ns", labels, annotations) == expected


def test_deprecated_min_available_label_wins():
    s = settings_of_pod({"pod-group.scheduling.sigs.k8s.io/min-available": "5"},
                        {P + "min-available": "3"})
    assert s.min_available == "5"


def test_podgroup_settings_use_spec_and_ignore_waiting_time_annotation():
    s = settings_of_podgroup({"minMember": 4, "scheduleTimeoutSeconds": 300},
                             {P + "waiting-time": "10s", P + "mode": "NonStrict"})
    assert (s.min_available, s.waiting_time, s.mode) == ("4", "300s", "NonStrict")


@pytest.mark.parametrize("text,seconds", [
    ("3600s", 3600.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("90m", 5400.0), ("0", 0.0),
    ("-5s", -5.0), ("500ms", 0.5), ("30", None), ("1h30", None), ("", None), ("h", None),
    ("1d", None), (".s", None), ("9999999h", None), ("1" + "0" * 400 + "s", None),
    ("2562047h", 2562047 * 3600.0),
])
def test_go_duration(text, seconds):
    assert parse_go_duration(text) == seconds


@pytest.mark.parametrize("text,value", [
    ("4", 4), ("+4", 4), ("-1", -1), ("0", 0), ("2147483647", 2147483647),
    ("2147483648", None), ("4.0", None), (" 4", None), ("1_0", None), (None, None), ("", None),
])
def test_int32(text, value):
    assert parse_int32(text) == value


SCENARIOS = [
    # (id, settings, expected (min, total, mode, waiting, groups, policy) or None, fallbacks)
    ("defaults", RawSettings("4"), (4, 4, "Strict", 600, ("ns/g",), "once-satisfied"), ()),
    ("all-valid", RawSettings("2", "3", "NonStrict", "1h", '["ns/g","ns/h"]', "only-waiting"),
     (2, 3, "NonStrict", 3600, ("ns/g", "ns/h"), "only-waiting"),
     # T3: 1h is kept by Koordinator, but kube-scheduler caps the Permit wait at 15 min
     # (kubernetes v1.35.2 pkg/scheduler/framework/runtime/framework.go:52,1708-1711)
     (Fallback("waiting-time", "1h", "900s"),)),
    ("missing-min-available-fails-init", RawSettings(None, "4"), None, ()),
    ("unparsable-min-available-fails-init", RawSettings("four"), None, ()),
    ("zero-min-available-accepted", RawSettings("0"), (0, 0, "Strict", 600, ("ns/g",),
                                                        "once-satisfied"), ()),
    ("total-below-min", RawSettings("4", "2"), (4, 4, "Strict", 600, ("ns/g",), "once-satisfied"),
     (Fallback("total-number", "2", "4"),)),
    ("total-zero", RawSettings("4", "0"), (4, 4, "Strict", 600, ("ns/g",), "once-satisfied"),
     (Fallback("total-number", "0", "4"),)),
    ("lowercase-mode", RawSettings("2", mode="nonstrict"),
     (2, 2, "Strict", 600, ("ns/g",), "once-satisfied"), (Fallback("mode", "nonstrict", "Strict"),)),
    ("waiting-time-without-unit", RawSettings("2", waiting_time="30"),
     (2, 2, "Strict", 600, ("ns/g",), "once-satisfied"), (Fallback("waiting-time", "30", "600s"),)),
    ("negative-waiting-time", RawSettings("2", waiting_time="-1m"),
     (2, 2, "Strict", 600, ("ns/g",), "once-satisfied"),
     (Fallback("waiting-time", "-1m", "600s"),)),
    ("groups-not-json", RawSettings("2", groups="ns/g,ns/h"),
     (2, 2, "Strict", 600, ("ns/g",), "once-satisfied"),
     (Fallback("groups", "ns/g,ns/h", '["ns/g"]'),)),
    ("groups-empty-list", RawSettings("2", groups="[]"),
     (2, 2, "Strict", 600, ("ns/g",), "once-satisfied"), (Fallback("groups", "[]", '["ns/g"]'),)),
    ("groups-omit-self", RawSettings("2", groups='["ns/h","ns/i"]'),
     (2, 2, "Strict", 600, ("ns/h", "ns/i"), "once-satisfied"),
     (Fallback("groups", '["ns/h","ns/i"]', '["ns/h","ns/i"]'),)),
    ("unknown-match-policy", RawSettings("2", match_policy="all"),
     (2, 2, "Strict", 600, ("ns/g",), "once-satisfied"),
     (Fallback("match-policy", "all", "once-satisfied"),)),
]


@pytest.mark.parametrize("settings,expected,fallbacks", [s[1:] for s in SCENARIOS],
                         ids=[s[0] for s in SCENARIOS])
def test_parse_spec(settings, expected, fallbacks):
    spec, got = parse_spec("ns/g", settings, "Pod/p")
    if expected is None:
        assert spec is None
    else:
        assert (spec.min_member, spec.total_number, spec.mode, spec.waiting_seconds, spec.groups,
                spec.match_policy) == expected
        assert spec.gang_group == ",".join(expected[4])
    assert got == fallbacks


def test_podgroup_timeout_fallback_is_named_after_the_spec_field():
    spec, fallbacks = parse_spec("ns/g", RawSettings("2", waiting_time="0s"), "PodGroup/g",
                                 from_podgroup=True)
    assert spec.waiting_seconds == 600
    assert fallbacks == (Fallback("scheduleTimeoutSeconds", "0", "600s"),)


def test_a_waiting_time_annotation_on_a_podgroup_is_reported_as_ignored():
    settings = settings_of_podgroup({"minMember": 2, "scheduleTimeoutSeconds": 300},
                                    {P + "waiting-time": "1h"})
    spec, fallbacks = parse_spec("ns/g", settings, "PodGroup/g", from_podgroup=True)
    assert spec.waiting_seconds == 300
    assert fallbacks == (Fallback("waiting-time", "1h", "300s"),)


# -- Koordinator v1.8.0 rules S14, S16, S23, S26, S27 (shared brief koordinator-v1.8.md) --------

def spec_of(**annotations: str):
    """parse_spec of a pod with min-available 2 and these gang annotations (names after the
    ``gang.scheduling.koordinator.sh/`` prefix, ``-`` written as ``_``)."""
    written = {P + "min-available": "2"}
    written.update({P + k.replace("_", "-"): v for k, v in annotations.items()})
    return parse_spec("ns/a", settings_of_pod({}, written), "Pod/a-0")


def test_s14_an_empty_mode_is_strict_without_a_word():
    """core/gang.go:130-133: mode "" becomes Strict before the validity check (no klog)."""
    spec, fallbacks = spec_of(mode="")
    assert spec.mode == "Strict" and fallbacks == ()
    spec, fallbacks = spec_of(mode="strict")
    assert fallbacks == (Fallback("mode", "strict", "Strict"),)


def test_s16_match_policy_alias_annotation():
    """apis/extension/coscheduling.go:100-106: the Koordinator annotation when non-empty, else
    ``pod-group.scheduling.sigs.k8s.io/match-policy``; pods and PodGroups alike."""
    alias = "pod-group.scheduling.sigs.k8s.io/match-policy"
    s = settings_of_pod({}, {P + "min-available": "1", alias: "only-waiting"})
    assert parse_spec("ns/a", s, "Pod/a")[0].match_policy == "only-waiting"
    s = settings_of_pod({}, {P + "min-available": "1", P + "match-policy": "",
                             alias: "waiting-and-running"})
    assert parse_spec("ns/a", s, "Pod/a")[0].match_policy == "waiting-and-running"
    s = settings_of_pod({}, {P + "min-available": "1", P + "match-policy": "only-waiting",
                             alias: "waiting-and-running"})
    assert parse_spec("ns/a", s, "Pod/a")[0].match_policy == "only-waiting"
    s = settings_of_podgroup({"minMember": 1}, {alias: "only-waiting"})
    assert parse_spec("ns/a", s, "PodGroup/a", from_podgroup=True)[0].match_policy == \
        "only-waiting"


@pytest.mark.parametrize("groups,ids,effective", [
    # null elements: "" without an error (Go leaves the zero value)
    ('[null, "ns/a"]', ("", "ns/a"), '["", "ns/a"]'),
    # a number: UnmarshalTypeError, decoding goes on, the slice is kept
    ('["ns/a", 7, "ns/b"]', ("", "ns/a", "ns/b"), '["ns/a", "", "ns/b"]'),
    ('[{"x": 1}, "ns/a"]', ("", "ns/a"), '["", "ns/a"]'),
])
def test_s23_groups_with_null_or_non_string_elements_keep_their_length(groups, ids, effective):
    """util/gang_helper.go:91-101 and core/gang.go:167-176 (verified in Go): the group keeps an
    empty gang id "", so its id starts with a comma and a gang "" that never exists blocks it."""
    spec, fallbacks = spec_of(groups=groups)
    assert spec.groups == ids
    assert spec.gang_group == ",".join(ids)
    assert fallbacks == (Fallback("groups", groups, effective),)


@pytest.mark.parametrize("groups", ["null", "[]", '"ns/a"', '{"a": 1}', "[ns/a]"])
def test_s22_groups_that_leave_the_gang_alone(groups):
    spec, fallbacks = spec_of(groups=groups)
    assert spec.groups == ("ns/a",)
    assert fallbacks == (Fallback("groups", groups, '["ns/a"]'),)


@pytest.mark.parametrize("value,valid", [
    ('{"gatherStrategy": [{"layer": "spineLayer", "strategy": "MustGather", '
     '"podCountMultiple": 8}]}', True),
    ('{"gatherStrategy": null, "unknown": 1}', True),
    ("null", True),
    ('{"gatherStrategy": [{"layer": 1}]}', False),        # a number into a string
    ('{"gatherStrategy": [{"podCountMultiple": 2.5}]}', False),  # not an integer
    ('{"gatherStrategy": {"layer": "x"}}', False),        # an object into a slice
    ('["x"]', False),                                       # an array into a struct
    ("{not json", False),
])
def test_s26_network_topology_spec(value, valid):
    """apis/extension/network_topology.go:43-53,60-70; core/gang.go:178-182: an invalid spec
    is dropped (klog only) and the gang has no topology requirement."""
    spec, fallbacks = spec_of(network_topology_spec=value)
    assert spec is not None
    assert fallbacks == (() if valid else (Fallback("network-topology-spec", value, "none"),))


def test_s27_a_podgroup_without_min_member_is_a_gang_of_minimum_zero():
    """scheduling/v1alpha1 types.go:141-144 (minMember omitempty) and core/gang.go:193-197: the
    scheduler takes 0 and the gang is initialised, so nothing holds it at PreEnqueue."""
    s = settings_of_podgroup({}, {})
    assert s.min_available == "0"
    spec, fallbacks = parse_spec("ns/pg", s, "PodGroup/pg", from_podgroup=True)
    assert (spec.min_member, spec.total_number, fallbacks) == (0, 0, ())


def test_a_network_topology_spec_survives_the_table_and_old_rows_still_read():
    from streams.core.state import from_wire, to_wire
    from tests.fixtures.builders import fold_records, pod

    store: dict = {}
    outputs = fold_records([pod("p0", 0, network_topology_spec='{"gatherStrategy": 1}')],
                           store=store)
    state = store["ns/g"]
    assert state.members["uid-p0"].settings.network_topology_spec == '{"gatherStrategy": 1}'
    assert from_wire(to_wire(state)) == state
    assert [(o["reason"], o["facts"]["field"]) for o in outputs] == [
        ("GangSpecInvalid", "network-topology-spec")]
    # a row written before the field existed (6 settings values) reads with no topology spec
    wire = to_wire(state)
    (row,) = [r for rows in wire.values() if isinstance(rows, list) for r in rows
              if isinstance(r, list) and r[:1] == ["uid-p0"]]
    assert row[6][-1] == '{"gatherStrategy": 1}' and len(row[6]) == 8
    row[6] = row[6][:6]
    old = from_wire(wire)
    assert old.members["uid-p0"].settings.network_topology_spec is None
    assert old.members["uid-p0"].settings.min_available == "2"
