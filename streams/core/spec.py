"""Gang membership and gang spec rules, as Koordinator's Coscheduling plugin applies them.

Where it sits: the functional core. Decoding calls ``gang_of_pod`` and ``settings_of_pod`` /
``settings_of_podgroup`` to turn a Kubernetes object into core values; the fold calls
``parse_spec`` to learn what the scheduler will actually use and which silent fallbacks it took.
Pure computation: no I/O, no clock, no Faust/Kafka/Kubernetes imports.

Sources (Koordinator): ``apis/extension/coscheduling.go`` (label and annotation keys),
``pkg/scheduler/plugins/coscheduling/core/gang.go`` (``tryInitByPodConfig``,
``tryInitByPodGroup``), ``pkg/scheduler/plugins/coscheduling/util/gang_helper.go``
(``GetGangNameByPod``, ``GetGangGroupId``, wait-time parsing), and
``core/gang_cache_test.go``, at v1.8.0 (``docs/koordinator-rules.md`` lists where v1.8.0
differs from older releases).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal, Mapping, NamedTuple

LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"
"""scheduler-plugins' PodGroup label; pods carrying it wait for their PodGroup object."""
LABEL_POD_GROUP_NAME_DEPRECATED = "pod-group.scheduling.sigs.k8s.io/name"
LABEL_MIN_AVAILABLE_DEPRECATED = "pod-group.scheduling.sigs.k8s.io/min-available"
PREFIX = "gang.scheduling.koordinator.sh/"
ANNOTATION_NAME = PREFIX + "name"
ANNOTATION_MATCH_POLICY_ALIAS = "pod-group.scheduling.sigs.k8s.io/match-policy"
"""The alias of ``gang.scheduling.koordinator.sh/match-policy``, read when that one is absent or
empty (Koordinator v1.8.0 ``apis/extension/coscheduling.go:64-66,100-106``
``GetGangMatchPolicy``)."""
ANNOTATION_NETWORK_TOPOLOGY_SPEC = PREFIX + "network-topology-spec"
"""The gang group's network-topology requirements, JSON (Koordinator v1.8.0
``apis/extension/network_topology.go:37-38``)."""

ANNOTATION_HOLD = "gangstate.io/hold"
"""gangstate's own per-gang switch: ``off`` (or ``false``) on any member pod or on the PodGroup
keeps gangstate from holding the gang out of the scheduling queue (``rules.holding``); not a
Koordinator setting (the scheduler ignores it)."""

DEFAULT_WAITING_SECONDS = 600
"""Koordinator Coscheduling plugin default waiting time (``DefaultWaitTime``), seconds."""

Mode = Literal["Strict", "NonStrict"]
MatchPolicy = Literal["once-satisfied", "only-waiting", "waiting-and-running"]
MATCH_POLICIES: tuple[str, ...] = ("once-satisfied", "only-waiting", "waiting-and-running")

SPEC_FIELDS: tuple[str, ...] = (
    "min-available", "total-number", "mode", "waiting-time", "groups", "match-policy",
)
"""Gang settings by their annotation names (after the prefix), in ``RawSettings`` order."""


class RawSettings(NamedTuple):
    """Gang settings exactly as written on one object (``None`` = not set).

    For a pod: the annotations ``gang.scheduling.koordinator.sh/<field>`` (min-available from the
    deprecated label first when non-empty), and ``hold``: gangstate's own
    ``gangstate.io/hold`` annotation (``ANNOTATION_HOLD``). For a PodGroup: ``spec.minMember`` as
    ``min_available``, ``spec.scheduleTimeoutSeconds`` as ``waiting_time`` (``"<n>s"``) and the
    other fields from the PodGroup's annotations; ``ignored_waiting_time`` keeps a
    ``waiting-time`` annotation written on a PodGroup, which the scheduler ignores.

    For a native PodGroup (``scheduling.k8s.io``, ``streams.core.native``):
    ``schedulingPolicy.gang.minCount`` as ``min_available``, ``policy`` (``Gang`` or
    ``Basic``, the ``schedulingPolicy`` set) and ``parent`` (``parentCompositePodGroupName``);
    the other fields are ``None``.
    """

    min_available: str | None = None
    total_number: str | None = None
    mode: str | None = None
    waiting_time: str | None = None
    groups: str | None = None
    match_policy: str | None = None
    ignored_waiting_time: str | None = None
    network_topology_spec: str | None = None
    hold: str | None = None
    policy: str | None = None
    parent: str | None = None

    def as_written(self) -> tuple[tuple[str, str | None], ...]:
        """Pairs of (annotation field name, value as written) in ``SPEC_FIELDS`` order."""
        return tuple(zip(SPEC_FIELDS, (self.min_available, self.total_number, self.mode,
                                       self.waiting_time, self.groups, self.match_policy)))


@dataclass(frozen=True, slots=True)
class GangSpec:
    """What the scheduler uses for a gang once it is initialised.

    ``min_member`` and ``total_number`` are pod counts; ``waiting_micros`` is the gang's waiting
    time in microseconds, exactly as the scheduler uses it (rule S19: a fractional
    ``1500ms`` is 1.5 s, Koordinator v1.8.0 ``core/gang.go:156-165`` keeps the parsed
    ``time.Duration``); ``groups`` the gang ids of the gang group (sorted); ``gang_group``
    their ``,``-joined id. ``source`` names where it came from: ``PodGroup/<name>`` or
    ``Pod/<name>``.
    """

    source: str
    min_member: int
    total_number: int
    mode: Mode
    waiting_micros: int
    groups: tuple[str, ...]
    gang_group: str
    match_policy: str

    @property
    def waiting_seconds(self) -> int | float:
        """The waiting time in seconds: an ``int`` when whole (``600``), else a ``float``
        (``1.5``), so diagnostics' facts read as the annotation was meant."""
        return seconds_value(self.waiting_micros)

    @property
    def permit_wait_micros(self) -> int:
        """How long a member actually waits at Permit, in microseconds: the waiting time,
        capped at 15 minutes by kube-scheduler (rule T3: kubernetes v1.35.2
        ``pkg/scheduler/framework/runtime/framework.go:52,1708-1711``, ``maxTimeout``)."""
        return min(self.waiting_micros, MAX_PERMIT_WAIT_MICROS)

    @property
    def permit_wait_seconds(self) -> int | float:
        """``permit_wait_micros`` in seconds (``int`` when whole)."""
        return seconds_value(self.permit_wait_micros)


MAX_PERMIT_WAIT_MICROS = 15 * 60 * 1_000_000
"""kube-scheduler's cap on any Permit wait (``maxTimeout``, 15 min), kubernetes v1.35.2
``pkg/scheduler/framework/runtime/framework.go:52``."""


def seconds_value(micros: int) -> int | float:
    """Microseconds as seconds: an ``int`` when whole, else a ``float`` (``1_500_000`` ->
    ``1.5``)."""
    if micros % 1_000_000 == 0:
        return micros // 1_000_000
    return micros / 1_000_000


@dataclass(frozen=True, slots=True)
class Fallback:
    """A silent fallback the scheduler takes: ``field`` as written was ``value``, it uses
    ``effective`` instead (strings as they would be written in the annotation)."""

    field: str
    value: str
    effective: str


def gang_of_pod(namespace: str, labels: Mapping[str, str],
                annotations: Mapping[str, str]) -> str | None:
    """Return the gang id ``<namespace>/<name>`` a pod belongs to, or ``None`` for no gang.

    First match wins: label ``pod-group.scheduling.sigs.k8s.io``, the deprecated label
    ``pod-group.scheduling.sigs.k8s.io/name``, annotation ``gang.scheduling.koordinator.sh/name``
    (Koordinator ``util.GetGangNameByPod``).
    """
    name = (labels.get(LABEL_POD_GROUP) or labels.get(LABEL_POD_GROUP_NAME_DEPRECATED)
            or annotations.get(ANNOTATION_NAME))
    if not name:
        return None
    return f"{namespace}/{name}"


def waits_for_podgroup(labels: Mapping[str, str]) -> bool:
    """True when the pod takes its gang spec only from a PodGroup (it carries the
    ``pod-group.scheduling.sigs.k8s.io`` label); Koordinator's gang cache then never initialises
    the gang from this pod's annotations (``core/gang_cache.go`` ``onPodAdd``)."""
    return bool(labels.get(LABEL_POD_GROUP))


def settings_of_pod(labels: Mapping[str, str], annotations: Mapping[str, str]) -> RawSettings:
    """Read a pod's gang settings as written (``RawSettings``); no parsing happens here.

    min-available: the deprecated label ``pod-group.scheduling.sigs.k8s.io/min-available`` wins
    when non-empty, else the annotation (Koordinator ``core/gang.go`` ``tryInitByPodConfig``).
    """
    min_available = labels.get(LABEL_MIN_AVAILABLE_DEPRECATED) or annotations.get(
        PREFIX + "min-available")
    get = annotations.get
    return RawSettings(min_available, get(PREFIX + "total-number"), get(PREFIX + "mode"),
                       get(PREFIX + "waiting-time"), get(PREFIX + "groups"),
                       _match_policy(annotations), None,
                       get(ANNOTATION_NETWORK_TOPOLOGY_SPEC), get(ANNOTATION_HOLD))


def _match_policy(annotations: Mapping[str, str]) -> str | None:
    """``match-policy`` as the scheduler reads it: the Koordinator annotation when non-empty,
    else its ``pod-group.scheduling.sigs.k8s.io/match-policy`` alias (Koordinator v1.8.0
    ``apis/extension/coscheduling.go:100-106``)."""
    return (annotations.get(PREFIX + "match-policy")
            or annotations.get(ANNOTATION_MATCH_POLICY_ALIAS))


def settings_of_podgroup(spec: Mapping[str, object],
                         annotations: Mapping[str, str]) -> RawSettings:
    """Read a PodGroup's gang settings (``scheduling.sigs.k8s.io/v1alpha1``) as written.

    ``spec.minMember`` becomes ``min_available``: an absent ``minMember`` is 0 (the field is
    ``omitempty``; the scheduler takes it as is and initialisation never fails: Koordinator
    v1.8.0 ``apis/thirdparty/scheduler-plugins/pkg/apis/scheduling/v1alpha1/types.go:141-144``,
    ``core/gang.go:193-197``). ``spec.scheduleTimeoutSeconds`` becomes ``waiting_time`` as
    ``"<n>s"``; a waiting-time annotation on a PodGroup is ignored, as in Koordinator
    (``core/gang.go`` ``tryInitByPodGroup``).
    """
    min_member = spec.get("minMember")
    timeout = spec.get("scheduleTimeoutSeconds")
    get = annotations.get
    return RawSettings(
        "0" if min_member is None else str(min_member),
        get(PREFIX + "total-number"), get(PREFIX + "mode"),
        None if timeout is None else f"{timeout}s",
        get(PREFIX + "groups"), _match_policy(annotations),
        get(PREFIX + "waiting-time"), get(ANNOTATION_NETWORK_TOPOLOGY_SPEC),
        get(ANNOTATION_HOLD),
    )


_INT = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)


def parse_int32(text: str | None) -> int | None:
    """Parse like Go's ``strconv.ParseInt(text, 10, 32)``; ``None`` when it would fail."""
    if text is None or not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT32[0] <= value <= _INT32[1] else None


_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                 "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float | None:
    """Parse a Go duration (``time.ParseDuration``: ``"3600s"``, ``"1h30m"``, ``"1.5h"``) into
    seconds; ``None`` when Go would return an error (``"30"`` has no unit, ``"1h30"`` neither).

    ``"0"`` (with optional sign) is the one unit-less value Go accepts; a value beyond Go's
    int64 nanoseconds (about 292 years) is an error, as in Go.
    """
    s = text
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        return None
    total = 0.0
    pos = 0
    limit = 9_223_372_036.854775807  # Go durations are int64 nanoseconds: ~292 years
    while pos < len(s):
        match = _DURATION_PART.match(s, pos)
        if not match or match.group(1) in ("", "."):
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        if total > limit:
            return None  # Go: "invalid duration" (overflow)
        pos = match.end()
    return sign * total


def go_duration_micros(text: str) -> int | None:
    """A Go duration (``parse_go_duration``) in whole microseconds, rounded to the nearest
    (Go keeps nanoseconds; a Permit timer finer than a microsecond is not observable in
    Events); ``None`` when Go would return an error."""
    seconds = parse_go_duration(text)
    if seconds is None:
        return None
    return round(seconds * 1_000_000)


def _seconds_text(seconds: int | float) -> str:
    return f"{seconds}s"


def parse_spec(gang: str, settings: RawSettings, source: str, *,
               from_podgroup: bool = False,
               default_waiting_seconds: int = DEFAULT_WAITING_SECONDS,
               ) -> tuple[GangSpec | None, tuple[Fallback, ...]]:
    """Initialise a gang spec from one object's settings, the way Koordinator does.

    ``gang`` is the gang id, ``source`` names the object (``Pod/<name>``, ``PodGroup/<name>``).
    Returns ``(spec, fallbacks)``: ``spec`` is ``None`` when initialisation fails (min-available
    missing or not a base-10 32-bit integer: the gang stays uninitialised and its pods wait
    silently); ``fallbacks`` lists every setting that was written but replaced by a default.
    Rules (``core/gang.go``, ``util/gang_helper.go``, ``core/gang_cache_test.go``):
    min-available 0 and negatives are accepted; total-number empty/unparsable/0/below min -> min;
    mode other than exactly ``Strict``/``NonStrict`` -> ``Strict``; waiting-time missing,
    unparsable, 0 or negative -> the default (PodGroup ``scheduleTimeoutSeconds`` <= 0 likewise);
    groups not a non-empty JSON array of strings -> the gang alone, entries used as written;
    unknown match-policy -> ``once-satisfied``; a waiting-time annotation on a PodGroup is
    ignored in favour of ``scheduleTimeoutSeconds``. Raises nothing.
    """
    min_member = parse_int32(settings.min_available)
    if min_member is None:
        return None, ()
    fallbacks: list[Fallback] = []

    total = min_member
    if settings.total_number not in (None, ""):
        parsed = parse_int32(settings.total_number)
        if parsed is None or parsed == 0 or parsed < min_member:
            fallbacks.append(Fallback("total-number", settings.total_number, str(min_member)))
        else:
            total = parsed

    mode: Mode = "Strict"
    # an empty mode is Strict without a word (Koordinator v1.8.0 core/gang.go:130-133)
    if settings.mode not in (None, ""):
        if settings.mode in ("Strict", "NonStrict"):
            mode = settings.mode  # type: ignore[assignment]
        else:
            fallbacks.append(Fallback("mode", settings.mode, "Strict"))

    waiting = default_waiting_seconds * 1_000_000
    if settings.waiting_time not in (None, ""):
        micros = go_duration_micros(settings.waiting_time)
        field = "scheduleTimeoutSeconds" if from_podgroup else "waiting-time"
        written = settings.waiting_time[:-1] if from_podgroup else settings.waiting_time
        if micros is None or micros <= 0:
            fallbacks.append(Fallback(field, written, _seconds_text(default_waiting_seconds)))
        else:
            waiting = micros
            if micros > MAX_PERMIT_WAIT_MICROS:  # T3: kube-scheduler caps the Permit wait
                fallbacks.append(Fallback(field, written,
                                          _seconds_text(MAX_PERMIT_WAIT_MICROS // 1_000_000)))
    if from_podgroup and settings.ignored_waiting_time is not None:
        fallbacks.append(Fallback("waiting-time", settings.ignored_waiting_time,
                                  _seconds_text(seconds_value(min(waiting,
                                                                  MAX_PERMIT_WAIT_MICROS)))))

    groups: tuple[str, ...] = (gang,)
    if settings.groups not in (None, ""):
        listed, all_strings = go_string_slice(settings.groups)
        if not listed:
            fallbacks.append(Fallback("groups", settings.groups, json.dumps([gang])))
        else:
            groups = tuple(sorted(listed))
            if not all_strings:
                fallbacks.append(Fallback("groups", settings.groups, json.dumps(listed)))
            elif gang not in listed:
                fallbacks.append(Fallback("groups", settings.groups, settings.groups))

    policy = "once-satisfied"
    if settings.match_policy not in (None, ""):
        if settings.match_policy in MATCH_POLICIES:
            policy = settings.match_policy
        else:
            fallbacks.append(Fallback("match-policy", settings.match_policy, "once-satisfied"))

    if settings.network_topology_spec not in (None, "") and \
            not valid_network_topology_spec(settings.network_topology_spec):
        fallbacks.append(Fallback("network-topology-spec", settings.network_topology_spec,
                                  "none"))

    spec = GangSpec(source, min_member, total, mode, waiting, groups, ",".join(groups), policy)
    return spec, tuple(fallbacks)


def go_string_slice(text: str) -> tuple[list[str], bool]:
    """``json.Unmarshal(text, &[]string{})`` as Go's encoding/json does it: a JSON array keeps
    its length, ``null`` elements become ``""`` without an error, elements of another type
    become ``""`` with an error (decoding goes on and the slice is kept); ``null`` or anything
    but an array (or invalid JSON) leaves the slice empty. Koordinator v1.8.0
    ``util/gang_helper.go:91-101`` ``StringToGangGroupSlice`` returns that slice even on error
    and ``core/gang.go:167-176`` uses it when it is not empty. Returns ``(slice, all_strings)``:
    ``all_strings`` is false when an element was replaced by ``""``."""
    try:
        value = json.loads(text)
    except ValueError:
        return [], False
    if not isinstance(value, list):
        return [], False
    return [v if isinstance(v, str) else "" for v in value], all(isinstance(v, str)
                                                                 for v in value)


def valid_network_topology_spec(text: str) -> bool:
    """Whether Go's encoding/json accepts ``text`` as Koordinator's ``NetworkTopologySpec``
    (``{"gatherStrategy": [{"layer": str, "strategy": str, "podCountMultiple": int}]}``;
    unknown fields ignored, ``null`` anywhere allowed). Koordinator v1.8.0
    ``apis/extension/network_topology.go:43-53,60-70``: an invalid one is dropped with a klog
    line (``core/gang.go:178-182``) and the gang has no topology requirement."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    rules = value.get("gatherStrategy")
    if rules is None:
        return True
    if not isinstance(rules, list):
        return False
    for rule in rules:
        if rule is None:
            continue
        if not isinstance(rule, dict):
            return False
        for key in ("layer", "strategy"):
            if rule.get(key) is not None and not isinstance(rule.get(key), str):
                return False
        count = rule.get("podCountMultiple")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            return False
    return True
