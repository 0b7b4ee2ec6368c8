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
     (2, 3, "NonStrict", 3600, ("ns/g", "ns/h"), "only-waiting"), ()),
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
