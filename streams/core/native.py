"""Kubernetes' own gang scheduling (KEP-4671): which scheduler a gang belongs to, gang ids, and
kube-scheduler's gang membership and spec rules.

Where it sits: the functional core, beside ``streams.core.spec`` (Koordinator's rules).
gangstate explains two gang schedulers, and the scheduler is a dimension of the gang itself:

- ``koord-scheduler``: Koordinator's Coscheduling plugin; gangs named by the
  ``pod-group.scheduling.sigs.k8s.io`` label or the ``gang.scheduling.koordinator.sh/name``
  annotation, PodGroups of ``scheduling.sigs.k8s.io/v1alpha1`` (``streams.core.spec``);
- ``kube-scheduler``: kube-scheduler's ``GangScheduling`` plugin (Kubernetes v1.37, feature
  gate ``GenericWorkload``); a pod names its PodGroup in ``spec.schedulingGroup.podGroupName``,
  PodGroups of ``scheduling.k8s.io/v1beta1`` with ``spec.schedulingPolicy.gang.minCount``.

The gang id says which: ``<namespace>/<name>`` for a Koordinator gang (as before, so stored
states, traces and topics stay valid) and ``<namespace>/<name>@kube-scheduler`` for a native
one (``@`` is in no Kubernetes object name), so a Koordinator PodGroup and a native PodGroup of
the same name in one namespace are two gangs, and no rule of one scheduler sees the other's
(``rules.registry`` runs each family only for the schedulers it names).

Sources (rule ids NG1-NG10; file:line in ``docs/native-gang-rules.md``): k8s.io/kubernetes
v1.37.2 ``pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go``,
``pkg/scheduler/backend/cache/podgroupstate.go``, ``pkg/scheduler/backend/cache/cache.go``,
``pkg/apis/scheduling/types.go``.

Must not: import anything outside the standard library and ``streams.core``; read the clock.
"""

from __future__ import annotations

from typing import Any, Mapping

from .spec import GangSpec, RawSettings, gang_of_pod

KOORDINATOR = "koord-scheduler"
"""The scheduler dimension of a Koordinator gang (Coscheduling, koord-scheduler v1.8.0)."""
KUBE_SCHEDULER = "kube-scheduler"
"""The scheduler dimension of a native gang (kube-scheduler's GangScheduling, v1.37.2)."""
SCHEDULERS: tuple[str, ...] = (KOORDINATOR, KUBE_SCHEDULER)
"""Every scheduler gangstate explains, in the order lists show them."""

NATIVE_SUFFIX = "@" + KUBE_SCHEDULER
"""What ends the id of a native gang (``team-a/llm@kube-scheduler``)."""

NATIVE_GROUP = "scheduling.k8s.io"
"""The API group of native Workloads, PodGroups and CompositePodGroups."""
NATIVE_PODGROUP_VERSION = "v1beta1"
"""The PodGroup version gangstate reads (v1beta1 in v1.37, ``pkg/apis/scheduling/install``)."""
NATIVE_PODGROUP_API_VERSION = f"{NATIVE_GROUP}/{NATIVE_PODGROUP_VERSION}"
"""``scheduling.k8s.io/v1beta1``: the ``apiVersion`` of the native PodGroups Events name."""

PERMIT_TIMEOUT_SECONDS = 300
"""NG5: how long a native gang's members that fit wait at Permit for minCount members to be
scheduled, seconds; fixed, not configurable (``permitTimeoutDuration``)."""

SERIES_REFRESH_SECONDS = 30 * 60
"""NG10: how long kube-scheduler's Event recorder leaves a running series unwritten: the
``events.k8s.io`` broadcaster patches a series' count every 30 minutes (client-go v0.37.2
``tools/events/event_broadcaster.go:51,397``), and the pods' ``PodScheduled=False`` condition
does not change while the message stays the same, so a native gang retried with backoff every
18 s shows no new record for up to 30 minutes."""

NATIVE_QUIET_SECONDS = SERIES_REFRESH_SECONDS + 60
"""How long a native gang's failure episode stays open after its last failure seen, seconds:
one series refresh and a minute, so the episode of a gang kube-scheduler keeps failing does
not close between two refreshes (``quiet_micros``)."""


def quiet_micros(gang: str, quiet: int) -> int:
    """The quiet time (microseconds) that closes a gang's failure episode: ``quiet`` (the
    fold's ``episode_quiet_seconds``) for a Koordinator gang, at least ``NATIVE_QUIET_SECONDS``
    for a native one (NG10)."""
    return max(quiet, NATIVE_QUIET_SECONDS * 1_000_000) if is_native(gang) else quiet


KOORDINATOR_SCHEDULER_NAME = "koord-scheduler"
"""NG1: the ``schedulerName`` of Koordinator's profile; its pods are never native gang members
(koord-scheduler v1.8.0 is built on Kubernetes v1.35, which has no ``spec.schedulingGroup``)."""


COMPOSITE_PREFIX = "composite:"
"""What starts the name part of a native CompositePodGroup's id
(``team-a/composite:job@kube-scheduler``): ``:`` is in no Kubernetes object name, so a
CompositePodGroup and a PodGroup of the same name are two ids (NG6)."""


def gang_key(namespace: str, name: str, scheduler: str = KOORDINATOR) -> str:
    """The gang id of gang ``name`` in ``namespace`` under ``scheduler``:
    ``team-a/llm`` (Koordinator) or ``team-a/llm@kube-scheduler`` (native)."""
    return f"{namespace}/{name}" + (NATIVE_SUFFIX if scheduler == KUBE_SCHEDULER else "")


def composite_key(namespace: str, name: str) -> str:
    """The id of native CompositePodGroup ``name`` in ``namespace``
    (``team-a/composite:job@kube-scheduler``): the gang that collects its children's
    summaries and tells them whether the tree meets its quorum (NG6)."""
    return f"{namespace}/{COMPOSITE_PREFIX}{name}{NATIVE_SUFFIX}"


def is_composite(gang: str) -> bool:
    """True for the id of a native CompositePodGroup (``composite_key``)."""
    return is_native(gang) and gang.partition("/")[2].startswith(COMPOSITE_PREFIX)


def scheduler_of(gang: str) -> str:
    """The scheduler of a gang id: ``kube-scheduler`` for an id ending ``@kube-scheduler``,
    else ``koord-scheduler``."""
    return KUBE_SCHEDULER if gang.endswith(NATIVE_SUFFIX) else KOORDINATOR


def is_native(gang: str) -> bool:
    """True for the id of a native gang (kube-scheduler's)."""
    return gang.endswith(NATIVE_SUFFIX)


def split_gang(gang: str) -> tuple[str, str, str]:
    """``(namespace, name, scheduler)`` of a gang id: ``team-a/llm@kube-scheduler`` ->
    ``("team-a", "llm", "kube-scheduler")``; ``team-a/llm`` -> ``("team-a", "llm",
    "koord-scheduler")``; a CompositePodGroup's ``team-a/composite:job@kube-scheduler`` ->
    ``("team-a", "job", "kube-scheduler")``."""
    namespace, _, name = gang.partition("/")
    if name.endswith(NATIVE_SUFFIX):
        name = name[:-len(NATIVE_SUFFIX)]
        if name.startswith(COMPOSITE_PREFIX):
            name = name[len(COMPOSITE_PREFIX):]
        return namespace, name, KUBE_SCHEDULER
    return namespace, name, KOORDINATOR


def gang_name(gang: str) -> str:
    """The PodGroup (or gang) name of a gang id, without namespace and scheduler."""
    return split_gang(gang)[1]


def podgroup_kind(gang: str) -> str:
    """How people name the gang's PodGroup kind: ``PodGroup (scheduling.k8s.io)`` for a
    native gang, ``PodGroup (scheduling.sigs.k8s.io)`` for a Koordinator one."""
    return "PodGroup (scheduling.k8s.io)" if is_native(gang) else \
        "PodGroup (scheduling.sigs.k8s.io)"


def native_gang_of_pod(namespace: str, spec: Mapping[str, Any]) -> str | None:
    """NG1: the native gang id of a pod whose ``spec`` names a PodGroup in
    ``schedulingGroup.podGroupName``, or ``None``. kube-scheduler's GangScheduling reads that
    field only (``PreEnqueue``); a pod of Koordinator's profile (``schedulerName``
    ``koord-scheduler``) is not kube-scheduler's, whatever it names."""
    group = spec.get("schedulingGroup")
    if not isinstance(group, Mapping):
        return None
    name = group.get("podGroupName")
    if not isinstance(name, str) or not name:
        return None
    if spec.get("schedulerName") == KOORDINATOR_SCHEDULER_NAME:
        return None
    return gang_key(namespace, name, KUBE_SCHEDULER)


def gang_of_pod_object(namespace: str, labels: Mapping[str, str],
                       annotations: Mapping[str, str], spec: Mapping[str, Any]) -> str | None:
    """The gang id of a pod, whichever scheduler's: native first (NG1,
    ``native_gang_of_pod``: kube-scheduler reads ``spec.schedulingGroup``), else Koordinator's
    (``spec.gang_of_pod``: its labels and annotations); ``None`` for a pod of no gang. The
    watch producer routes by it and the decoder keys by it, so both agree."""
    return native_gang_of_pod(namespace, spec) or gang_of_pod(namespace, labels, annotations)


def is_native_podgroup(api_version: str) -> bool:
    """True for the ``apiVersion`` of a native PodGroup (``scheduling.k8s.io/<version>``)."""
    return api_version.partition("/")[0] == NATIVE_GROUP


def settings_of_native_podgroup(spec: Mapping[str, Any]) -> RawSettings:
    """A native PodGroup's spec as written (NG3, NG4): ``min_available`` is
    ``schedulingPolicy.gang.minCount`` (``"0"`` when the gang policy has none), ``policy``
    ``Gang`` or ``Basic`` (whichever ``schedulingPolicy`` sets; ``None`` for neither),
    ``parent`` the ``parentCompositePodGroupName``. The other fields are Koordinator's and
    stay ``None``."""
    return _policy_settings(spec, "minCount")


def _policy_settings(spec: Mapping[str, Any], count_field: str) -> RawSettings:
    """``RawSettings`` of a native PodGroup's or CompositePodGroup's ``spec``: the gang
    policy's ``count_field`` (``minCount``, ``minGroupCount``) as ``min_available``, the
    policy set, the parent composite."""
    policy = spec.get("schedulingPolicy")
    policy = policy if isinstance(policy, Mapping) else {}
    gang = policy.get("gang")
    kind: str | None = None
    count: str | None = None
    if isinstance(gang, Mapping):
        kind = "Gang"
        value = gang.get(count_field)
        count = "0" if value is None else str(value)
    elif isinstance(policy.get("basic"), Mapping):
        kind = "Basic"
    parent = spec.get("parentCompositePodGroupName")
    return RawSettings(min_available=count, policy=kind,
                       parent=parent if isinstance(parent, str) and parent else None)


def native_spec(gang: str, settings: RawSettings, source: str) -> GangSpec | None:
    """The spec kube-scheduler uses for a native PodGroup (NG2, NG5): ``min_member`` is
    ``minCount``, the Permit wait is the fixed ``PERMIT_TIMEOUT_SECONDS``; a PodGroup of no
    composite is a group of itself, a child of CompositePodGroup ``P`` (``parent``) is in the
    group ``(itself, P's id)`` whose id is P's (NG6: the tree is scheduled together). For a
    CompositePodGroup (``is_composite``): ``min_member`` is its ``minGroupCount``, the children
    that must have their pods (a ``Basic`` one: 1, as ``isCPGTreeReady`` counts it). ``None``
    for a PodGroup without the gang policy (a ``Basic`` PodGroup: its pods are scheduled one
    by one, NG3) or with a count that does not parse (the API server validates it, so only
    hand-made traces carry one). No silent fallbacks exist: the API server rejects an invalid
    PodGroup."""
    composite = is_composite(gang)
    if composite and settings.policy == "Basic":
        min_count = 1
    elif settings.policy != "Gang" or settings.min_available is None:
        return None
    else:
        try:
            min_count = int(settings.min_available)
        except ValueError:
            return None
    if min_count < 0:
        return None
    groups: tuple[str, ...] = (gang,)
    if settings.parent and not composite:
        parent = composite_key(gang.partition("/")[0], settings.parent)
        groups = tuple(sorted((gang, parent)))
        group_id = parent
    else:
        group_id = gang
    return GangSpec(source=source, min_member=min_count, total_number=min_count,
                    mode="Strict", waiting_micros=PERMIT_TIMEOUT_SECONDS * 1_000_000,
                    groups=groups, gang_group=group_id, match_policy="")


def settings_of_composite(spec: Mapping[str, Any]) -> RawSettings:
    """A native CompositePodGroup's spec as written (NG6): ``min_available`` is
    ``schedulingPolicy.gang.minGroupCount`` (``"0"`` when the gang policy has none),
    ``policy`` ``Gang`` or ``Basic``, ``parent`` its own ``parentCompositePodGroupName``."""
    return _policy_settings(spec, "minGroupCount")


def counts_for_gang(phase: str) -> bool:
    """NG4: whether a pod of this phase counts among the pods kube-scheduler knows for its
    PodGroup (``AllPodsCount``): its pod informers leave out terminated pods (phase
    ``Succeeded`` or ``Failed``), so only live pods count, bound or not, gated or not."""
    return phase not in ("Succeeded", "Failed")


def gang_text(gang: str) -> str:
    """How a message names the gang: ``gang team-a/llm`` (Koordinator) or ``PodGroup
    team-a/llm`` (native: people know it by its PodGroup)."""
    namespace, name, scheduler = split_gang(gang)
    if scheduler != KUBE_SCHEDULER:
        return f"gang {gang}"
    kind = "CompositePodGroup" if is_composite(gang) else "PodGroup"
    return f"{kind} {namespace}/{name}"


def min_name(gang: str) -> str:
    """The name of the gang's minimum in messages: ``minCount`` (native) or ``minMember``."""
    return "minCount" if is_native(gang) else "minMember"
